//! TEI's request and response bodies, and its error bodies, with their OpenAPI schemas: the
//! document at /api-doc/openapi.json is made from these types. Where a bound depends on the
//! model or the flags (batch sizes, the vocabulary, prompt names, the embedding size), the
//! schema reads it from [`set_limits`], called once at startup.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use utoipa::openapi::schema::{
    AllOfBuilder, AnyOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type,
};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Response, ResponseBuilder};
use utoipa::{IntoResponses, PartialSchema, ToSchema};

use crate::infer::validation::Item;

/// What the schemas state that only the running server knows.
pub struct Limits {
    pub max_client_batch_size: usize,
    pub vocab_size: usize,
    pub prompt_names: Vec<String>,
    /// The length of an embedding: the most `dimensions` may ask.
    pub dim: usize,
}

static LIMITS: OnceLock<Limits> = OnceLock::new();

/// Sets the bounds the schemas state; the first call wins.
pub fn set_limits(limits: Limits) {
    let _ = LIMITS.set(limits);
}

fn limits() -> Option<&'static Limits> {
    LIMITS.get()
}

fn string() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String)
}

fn nonempty() -> ObjectBuilder {
    string().min_length(Some(1))
}

fn text() -> RefOr<Schema> {
    nonempty().build().into()
}

fn token_ids() -> RefOr<Schema> {
    let id = ObjectBuilder::new()
        .schema_type(Type::Integer)
        .minimum(Some(0))
        .maximum(limits().map(|l| l.vocab_size.saturating_sub(1) as u64));
    ArrayBuilder::new().items(id).min_items(Some(1)).build().into()
}

/// A batch: at least `min` items, at most `--max-client-batch-size` less `spare`.
fn batch(item: impl Into<RefOr<Schema>>, min: usize, spare: usize) -> RefOr<Schema> {
    let max = limits().map(|l| l.max_client_batch_size.saturating_sub(spare));
    ArrayBuilder::new().items(item.into()).min_items(Some(min)).max_items(max).build().into()
}

fn one_of(items: impl IntoIterator<Item = RefOr<Schema>>) -> RefOr<Schema> {
    items.into_iter().fold(OneOfBuilder::new(), |b, s| b.item(s)).into()
}

/// `prompt_name` where the folder's prompts are served: one of them, or null.
fn prompt_name() -> RefOr<Schema> {
    let names: Vec<Value> = limits()
        .map(|l| l.prompt_names.iter().map(|n| Value::from(n.as_str())).collect())
        .unwrap_or_default();
    if names.is_empty() {
        return no_prompt_name();
    }
    ObjectBuilder::new()
        .schema_type(SchemaType::Array(vec![Type::String, Type::Null]))
        .enum_values(Some(names.into_iter().chain([Value::Null])))
        .description(Some("A prompt name of the folder's config_sentence_transformers.json"))
        .build()
        .into()
}

/// `prompt_name` where no prompt is served: null only.
fn no_prompt_name() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::Null)
        .description(Some("No prompt is served here: null or absent"))
        .build()
        .into()
}

/// Inputs are truncated on the right only: `left` is refused.
fn truncation_direction() -> RefOr<Schema> {
    string()
        .enum_values(Some(["Right", "right"]))
        .description(Some("Only `Right` (the default): `Left` is refused with 422"))
        .build()
        .into()
}

fn dimensions() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(SchemaType::Array(vec![Type::Integer, Type::Null]))
        .minimum(Some(1))
        .maximum(limits().map(|l| l.dim as u64))
        .build()
        .into()
}

fn top_k() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(SchemaType::Array(vec![Type::Integer, Type::Null]))
        .minimum(Some(1))
        .maximum(Some(usize::MAX as u64))
        .build()
        .into()
}

fn query() -> RefOr<Schema> {
    text()
}

/// The texts may be empty: the query is not (see `Validation::rerank_items`).
fn rerank_texts() -> RefOr<Schema> {
    batch(string().build(), 1, 0)
}

fn sentences() -> RefOr<Schema> {
    // The source sentence counts in the batch.
    batch(text(), 1, 1)
}

/// A non-negative integer, which JSON may write as `18` or `18.0`: JSON Schema counts both as
/// integers, so the server takes both.
#[derive(Clone, Copy, Debug)]
pub struct Whole<T>(pub T);

impl<'de, T: TryFrom<u64>> Deserialize<'de> for Whole<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{Unexpected, Visitor};
        struct WholeVisitor<T>(std::marker::PhantomData<T>);
        impl<T: TryFrom<u64>> Visitor<'_> for WholeVisitor<T> {
            type Value = Whole<T>;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a non-negative integer in range")
            }

            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
                T::try_from(v).map(Whole).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &self))
            }

            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::invalid_value(Unexpected::Signed(v), &self)),
                }
            }

            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
                if v.fract() == 0.0 && (0.0..u64::MAX as f64).contains(&v) {
                    self.visit_u64(v as u64)
                } else {
                    Err(E::invalid_value(Unexpected::Float(v), &self))
                }
            }
        }
        deserializer.deserialize_any(WholeVisitor(std::marker::PhantomData))
    }
}

/// An object (or null, for an optional one) only: serde would also read a struct from a JSON
/// array of its fields, which the document does not allow.
fn object<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned>(deserializer: D) -> Result<T, D::Error> {
    match Value::deserialize(deserializer)? {
        value @ (Value::Null | Value::Object(_)) => serde_json::from_value(value).map_err(D::Error::custom),
        other => Err(D::Error::custom(format!("invalid type: {other}, expected an object"))),
    }
}

fn wholes<T>(values: Vec<Whole<T>>) -> Vec<T> {
    values.into_iter().map(|w| w.0).collect()
}

/// TEI's `ErrorType`, serialised PascalCase as TEI does.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub enum ErrorType {
    Unhealthy,
    Backend,
    Overloaded,
    Validation,
    Tokenizer,
    Empty,
}

/// TEI's error body.
#[derive(Serialize, ToSchema)]
pub struct ErrorResponse {
    pub error: String,
    pub error_type: ErrorType,
}

/// The error body of the OpenAI route.
#[derive(Serialize, ToSchema)]
pub struct OpenAiErrorResponse {
    pub message: String,
    pub code: u16,
    #[serde(rename = "type")]
    pub error_type: ErrorType,
}

/// The error statuses of every POST route, each with TEI's error body (`E`: [`ErrorResponse`],
/// or [`OpenAiErrorResponse`] on the OpenAI routes); 401 has no body. Listed in each route's
/// `responses` of `#[utoipa::path]`.
pub struct Errors<E = ErrorResponse>(std::marker::PhantomData<E>);

/// [`Errors`] in the OpenAI routes' error body.
pub type OpenAiErrors = Errors<OpenAiErrorResponse>;

const ERRORS: [(u16, &str); 9] = [
    (400, "The body is not JSON"),
    (401, "`--api-key` is set and the request does not carry it"),
    (408, "The body did not arrive within `--body-read-timeout`"),
    (413, "The body is over `--payload-limit`, or the batch over `--max-client-batch-size`"),
    (415, "The body is not `application/json`"),
    (422, "The body does not fit the schema, or an input is refused (empty, too long without truncation)"),
    (
        424,
        "The model does not serve this route (/predict without a classifier, /rerank without a cross-encoder); \
         a body that does not fit the schema gets 422 first",
    ),
    (429, "Every permit of `--max-concurrent-requests` is taken"),
    (500, "The forward pass failed"),
];

impl<E: ToSchema> IntoResponses for Errors<E> {
    fn responses() -> BTreeMap<String, RefOr<Response>> {
        ERRORS
            .iter()
            .map(|&(status, description)| {
                let response = ResponseBuilder::new().description(description);
                let response = if status == 401 {
                    response
                } else {
                    let schema = RefOr::Ref(Ref::from_schema_name(E::name()));
                    response.content("application/json", ContentBuilder::new().schema(Some(schema)).build())
                };
                (status.to_string(), response.build().into())
            })
            .collect()
    }
}

/// `"text"`, `[ids]`, or a batch of either; tried in this order, so `[]` is one empty input.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum Input {
    Single(InputType),
    Batch(Vec<InputType>),
}

impl PartialSchema for Input {
    fn schema() -> RefOr<Schema> {
        one_of([text(), token_ids(), batch(one_of([text(), token_ids()]), 1, 0)])
    }
}

impl ToSchema for Input {}

/// What a prompt can go before: a text or a batch of texts, not token ids (the document states it
/// for requests that name a prompt).
pub struct TextInput;

impl PartialSchema for TextInput {
    fn schema() -> RefOr<Schema> {
        one_of([text(), batch(text(), 1, 0)])
    }
}

impl ToSchema for TextInput {}

/// The schema of a request body whose `prompt_name` goes before text: the fields of `T`, and
/// either no prompt name (absent or null) or text in `inputs` (no token ids). JSON Schema's
/// allOf and anyOf state it, for the document to refuse what the server refuses.
fn prompted<T: ToSchema>(inputs: &str) -> RefOr<Schema> {
    let no_prompt =
        ObjectBuilder::new().property("prompt_name", ObjectBuilder::new().schema_type(Type::Null));
    let text = ObjectBuilder::new().property(inputs, RefOr::Ref(Ref::from_schema_name(TextInput::name())));
    let either = AnyOfBuilder::new().item(no_prompt).item(text);
    AllOfBuilder::new().item(RefOr::Ref(Ref::from_schema_name(T::name()))).item(either).into()
}

/// The schemas a [`prompted`] body refers to: the fields of `T` (and theirs), and [`TextInput`].
fn prompted_schemas<T: ToSchema>(schemas: &mut Vec<(String, RefOr<Schema>)>) {
    schemas.push((T::name().into_owned(), T::schema()));
    T::schemas(schemas);
    schemas.push((TextInput::name().into_owned(), TextInput::schema()));
}

/// The body of /embed (and of POST / on an embedding model): [`EmbedRequest`]'s fields, text
/// only when a prompt is named.
pub struct EmbedBody;

impl PartialSchema for EmbedBody {
    fn schema() -> RefOr<Schema> {
        prompted::<EmbedRequest>("inputs")
    }
}

impl ToSchema for EmbedBody {
    fn name() -> Cow<'static, str> {
        "EmbedRequest".into()
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        prompted_schemas::<EmbedRequest>(schemas);
    }
}

/// The body of /v1/embeddings: [`OpenAiRequest`]'s fields, text only when a prompt is named.
pub struct OpenAiBody;

impl PartialSchema for OpenAiBody {
    fn schema() -> RefOr<Schema> {
        prompted::<OpenAiRequest>("input")
    }
}

impl ToSchema for OpenAiBody {
    fn name() -> Cow<'static, str> {
        "OpenAiRequest".into()
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        prompted_schemas::<OpenAiRequest>(schemas);
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum InputType {
    String(String),
    Ids(Vec<Whole<u32>>),
}

impl Input {
    pub fn into_items(self) -> (Vec<Item>, bool) {
        let item = |i: InputType| match i {
            InputType::String(s) => Item::Text(s),
            InputType::Ids(ids) => Item::Ids(wholes(ids)),
        };
        match self {
            Input::Single(i) => (vec![item(i)], false),
            Input::Batch(v) => (v.into_iter().map(item).collect(), true),
        }
    }
}

#[derive(Deserialize, Default, PartialEq, Eq, Clone, Copy)]
pub enum TruncationDirection {
    #[serde(alias = "left")]
    Left,
    #[default]
    #[serde(alias = "right")]
    Right,
}

/// /embed's fields; the body's schema is [`EmbedBody`]'s.
#[derive(Deserialize, ToSchema)]
#[schema(as = EmbedRequestFields)]
pub struct EmbedRequest {
    pub inputs: Input,
    #[serde(default)]
    pub truncate: Option<bool>,
    #[serde(default)]
    #[schema(schema_with = truncation_direction)]
    pub truncation_direction: TruncationDirection,
    #[serde(default)]
    #[schema(schema_with = prompt_name)]
    pub prompt_name: Option<String>,
    #[serde(default = "yes")]
    #[schema(default = true)]
    pub normalize: bool,
    #[serde(default)]
    #[schema(schema_with = dimensions)]
    pub dimensions: Option<Whole<usize>>,
}

fn yes() -> bool {
    true
}

#[derive(Deserialize, ToSchema)]
pub struct PredictRequest {
    pub inputs: PredictInput,
    #[serde(default)]
    pub truncate: Option<bool>,
    #[serde(default)]
    #[schema(schema_with = truncation_direction)]
    pub truncation_direction: TruncationDirection,
    #[serde(default)]
    pub raw_scores: bool,
    /// What huggingface_hub's `text_classification` sends to `POST /`; only `top_k` is read.
    #[serde(default, deserialize_with = "object")]
    #[schema(nullable = true)]
    pub parameters: Option<PredictParameters>,
}

#[derive(Deserialize, Default, ToSchema)]
pub struct PredictParameters {
    /// Keep the best `top_k` labels (at least 1).
    #[serde(default)]
    #[schema(schema_with = top_k)]
    pub top_k: Option<Whole<usize>>,
}

/// TEI's reading of /predict inputs, where the first element decides: `"a"` and `["a"]` are one
/// text, `["a", "b"]` is ONE pair, `[["a"], ["b", "c"]]` is a batch of texts and pairs.
pub enum PredictInput {
    Single(Item),
    Batch(Vec<Item>),
    /// A flat list of more than two strings: neither a text, a pair nor a batch. Kept until the
    /// handler, which answers 422 (the batch size's message when it is longer than a batch may be).
    Invalid {
        length: usize,
        message: String,
    },
}

/// A text, or a pair of texts of which at most one is empty (TEI refuses only two empty ones).
fn text_or_pair() -> RefOr<Schema> {
    let pair = |first: ObjectBuilder, second: ObjectBuilder| {
        ArrayBuilder::new()
            .prefix_items([first.build(), second.build()])
            .min_items(Some(2))
            .max_items(Some(2))
            .build()
    };
    AnyOfBuilder::new()
        .item(ArrayBuilder::new().items(text()).min_items(Some(1)).max_items(Some(1)).build())
        .item(pair(nonempty(), string()))
        .item(pair(string(), nonempty()))
        .into()
}

impl PartialSchema for PredictInput {
    fn schema() -> RefOr<Schema> {
        one_of([text(), text_or_pair(), batch(text_or_pair(), 1, 0)])
    }
}

impl ToSchema for PredictInput {}

const PREDICT_EXPECTING: &str =
    "a string, a pair of strings [string, string] or a batch of mixed strings and pairs [[string], [string, string], ...]";

impl<'de> Deserialize<'de> for PredictInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        parse_predict_input(Value::deserialize(deserializer)?).map_err(D::Error::custom)
    }
}

fn parse_predict_input(value: Value) -> Result<PredictInput, String> {
    fn strings(items: &[Value]) -> Result<Item, String> {
        let texts = items
            .iter()
            .map(|v| {
                v.as_str().map(str::to_string).ok_or_else(|| format!("invalid type: {v}, expected a string"))
            })
            .collect::<Result<Vec<String>, String>>()?;
        let mut texts = texts.into_iter();
        match (texts.next(), texts.next(), texts.next()) {
            (Some(a), None, _) => Ok(Item::Text(a)),
            (Some(a), Some(b), None) => Ok(Item::Pair(a, b)),
            _ => Err(format!("invalid length {}, expected {PREDICT_EXPECTING}", items.len())),
        }
    }
    match value {
        Value::String(s) => Ok(PredictInput::Single(Item::Text(s))),
        Value::Array(items) => match items.first() {
            Some(Value::Array(_)) => items
                .iter()
                .map(|v| match v {
                    Value::Array(pair) => strings(pair),
                    other => Err(format!("invalid type: {other}, expected a list of 1 or 2 strings")),
                })
                .collect::<Result<Vec<Item>, String>>()
                .map(PredictInput::Batch),
            _ if items.len() > 2 && items.iter().all(Value::is_string) => Ok(PredictInput::Invalid {
                length: items.len(),
                message: format!("invalid length {}, expected {PREDICT_EXPECTING}", items.len()),
            }),
            _ => strings(&items).map(PredictInput::Single),
        },
        other => Err(format!("invalid type: {other}, expected {PREDICT_EXPECTING}")),
    }
}

/// A single input's labels (a flat list), or one list per input of a batch.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum PredictResponse {
    Single(Vec<Prediction>),
    Batch(Vec<Vec<Prediction>>),
}

#[derive(Serialize, ToSchema)]
pub struct Prediction {
    pub score: f32,
    pub label: String,
}

#[derive(Deserialize, ToSchema)]
pub struct RerankRequest {
    #[schema(schema_with = query)]
    pub query: String,
    #[schema(schema_with = rerank_texts)]
    pub texts: Vec<String>,
    #[serde(default)]
    pub truncate: Option<bool>,
    #[serde(default)]
    #[schema(schema_with = truncation_direction)]
    pub truncation_direction: TruncationDirection,
    #[serde(default)]
    pub raw_scores: bool,
    #[serde(default)]
    pub return_text: bool,
}

#[derive(Serialize, ToSchema)]
pub struct Rank {
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    pub score: f32,
}

#[derive(Deserialize, ToSchema)]
pub struct SimilarityRequest {
    #[serde(deserialize_with = "object")]
    pub inputs: SimilarityInput,
    #[serde(default, deserialize_with = "object")]
    #[schema(nullable = true)]
    pub parameters: Option<SimilarityParameters>,
}

#[derive(Deserialize, ToSchema)]
pub struct SimilarityInput {
    #[schema(schema_with = query)]
    pub source_sentence: String,
    #[schema(schema_with = sentences)]
    pub sentences: Vec<String>,
}

#[derive(Deserialize, Default, ToSchema)]
pub struct SimilarityParameters {
    #[serde(default)]
    pub truncate: Option<bool>,
    #[serde(default)]
    #[schema(schema_with = truncation_direction)]
    pub truncation_direction: TruncationDirection,
    #[serde(default)]
    #[schema(schema_with = prompt_name)]
    pub prompt_name: Option<String>,
}

/// /embed_sparse's body, as TEI's.
#[derive(Deserialize, ToSchema)]
pub struct EmbedSparseRequest {
    pub inputs: Input,
    #[serde(default)]
    pub truncate: Option<bool>,
    #[serde(default)]
    #[schema(schema_with = truncation_direction)]
    pub truncation_direction: TruncationDirection,
    /// Not served: a SPLADE model here has no prompts.
    #[serde(default)]
    #[schema(schema_with = no_prompt_name)]
    pub prompt_name: Option<String>,
}

/// A vocabulary entry of a sparse embedding, and its weight (above zero).
#[derive(Serialize, ToSchema)]
pub struct SparseValue {
    pub index: usize,
    pub value: f32,
}

#[derive(Deserialize, ToSchema)]
pub struct EmbedAllRequest {
    pub inputs: Input,
    #[serde(default)]
    pub truncate: Option<bool>,
    #[serde(default)]
    #[schema(schema_with = truncation_direction)]
    pub truncation_direction: TruncationDirection,
    /// Not served on /embed_all.
    #[serde(default)]
    #[schema(schema_with = no_prompt_name)]
    pub prompt_name: Option<String>,
}

/// /v1/embeddings' fields; the body's schema is [`OpenAiBody`]'s.
#[derive(Deserialize, ToSchema)]
#[schema(as = OpenAiRequestFields)]
pub struct OpenAiRequest {
    pub input: Input,
    /// Ignored, as TEI does: the server has one model.
    #[serde(default)]
    #[allow(dead_code)]
    pub model: Option<String>,
    #[serde(default)]
    pub encoding_format: EncodingFormat,
    #[serde(default)]
    #[schema(schema_with = dimensions)]
    pub dimensions: Option<Whole<usize>>,
    /// Not OpenAI's, but what TEI's /v1/embeddings also takes.
    #[serde(default)]
    #[schema(schema_with = prompt_name)]
    pub prompt_name: Option<String>,
}

#[derive(Deserialize, Default, PartialEq, Eq, Clone, Copy, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EncodingFormat {
    #[default]
    Float,
    Base64,
}

/// OpenAI's answer: the embeddings (a list of floats, or base64 of little-endian f32 bytes).
#[derive(Serialize, ToSchema)]
pub struct OpenAiResponse {
    pub object: String,
    pub data: Vec<OpenAiEmbedding>,
    pub model: String,
    pub usage: OpenAiUsage,
}

#[derive(Serialize, ToSchema)]
pub struct OpenAiEmbedding {
    pub object: String,
    pub embedding: OpenAiVector,
    pub index: usize,
}

#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum OpenAiVector {
    Float(Vec<f32>),
    Base64(String),
}

#[derive(Serialize, ToSchema)]
pub struct OpenAiUsage {
    pub prompt_tokens: usize,
    pub total_tokens: usize,
}

#[derive(Deserialize, ToSchema)]
pub struct TokenizeRequest {
    pub inputs: TokenizeInput,
    #[serde(default = "yes")]
    #[schema(default = true)]
    pub add_special_tokens: bool,
    /// Not served on /tokenize.
    #[serde(default)]
    #[schema(schema_with = no_prompt_name)]
    pub prompt_name: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum TokenizeInput {
    Single(String),
    Batch(Vec<String>),
}

impl PartialSchema for TokenizeInput {
    fn schema() -> RefOr<Schema> {
        one_of([text(), batch(text(), 0, 0)])
    }
}

impl ToSchema for TokenizeInput {}

#[derive(Serialize, ToSchema)]
pub struct Token {
    pub id: u32,
    pub text: String,
    pub special: bool,
    pub start: Option<usize>,
    pub stop: Option<usize>,
}

#[derive(Deserialize, ToSchema)]
pub struct DecodeRequest {
    pub ids: InputIds,
    #[serde(default = "yes")]
    #[schema(default = true)]
    pub skip_special_tokens: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum InputIds {
    Single(Vec<Whole<u32>>),
    Batch(Vec<Vec<Whole<u32>>>),
}

impl InputIds {
    /// One list of ids per text to decode, and whether they came as a batch.
    pub fn into_lists(self) -> (Vec<Vec<u32>>, bool) {
        match self {
            InputIds::Single(ids) => (vec![wholes(ids)], false),
            InputIds::Batch(batch) => (batch.into_iter().map(wholes).collect(), true),
        }
    }
}

impl PartialSchema for InputIds {
    fn schema() -> RefOr<Schema> {
        one_of([token_ids(), batch(token_ids(), 1, 0)])
    }
}

impl ToSchema for InputIds {}
