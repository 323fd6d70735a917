//! Validation and tokenization of inputs, as TEI's `core/src/tokenization.rs` and the checks of
//! its router: empty inputs, batch sizes, prompt names, lengths and token ids.

use roformer::{Encoded, Tokenizer};

use super::error::InferError;

/// One input of any route, before tokenization.
pub enum Item {
    Text(String),
    Ids(Vec<u32>),
    Pair(String, String),
}

/// The model's limits and the tokenizers the checks use.
pub struct Validation {
    /// Truncates to `max_input_length`, as the pipelines do.
    pub tokenizer: Tokenizer,
    /// No truncation: lengths for error messages, and /tokenize.
    pub untruncated: Tokenizer,
    pub vocab_size: usize,
    pub max_input_length: usize,
    pub max_client_batch_size: usize,
    /// The encoder's prompt names (sorted), which `Task::Embed`'s prompt indexes.
    pub prompt_names: Vec<String>,
    /// The text of each prompt of `prompt_names`, which goes before a text given with its name.
    pub prompts: Vec<String>,
    /// What goes before a text to embed that names no prompt (`--default-prompt-name` or
    /// `--default-prompt`); empty for none.
    pub default_prompt: String,
}

impl Validation {
    /// Options TEI has that this server cannot honour are refused, not ignored; a prompt name is
    /// given as its index in `prompt_names`.
    pub fn check_options(
        &self,
        truncate_left: bool,
        prompt_name: Option<&str>,
    ) -> Result<Option<usize>, InferError> {
        if truncate_left {
            return Err(InferError::Validation(
                "Input validation error: `truncation_direction` `left` is not supported: inputs are truncated on the right".into(),
            ));
        }
        let Some(name) = prompt_name else { return Ok(None) };
        match self.prompt_names.iter().position(|n| n == name) {
            Some(i) => Ok(Some(i)),
            None if self.prompt_names.is_empty() => Err(InferError::Validation(format!(
                "Input validation error: `prompt_name` is `{name}` but no prompts were found in the Sentence Transformers configuration"
            ))),
            None => Err(InferError::Validation(format!(
                "Input validation error: `prompt_name` `{name}` is not in the Sentence Transformers configuration prompts ({})",
                self.prompt_names.join(", ")
            ))),
        }
    }

    /// [`Validation::check_options`] for a call that takes no prompt (`call` names it): a
    /// `prompt_name` it would ignore is refused.
    pub fn check_no_prompt(
        &self,
        truncate_left: bool,
        prompt_name: Option<&str>,
        call: &str,
    ) -> Result<(), InferError> {
        match self.check_options(truncate_left, prompt_name)? {
            Some(_) => Err(InferError::Validation(format!(
                "Input validation error: `prompt_name` is not supported on {call}"
            ))),
            None => Ok(()),
        }
    }

    /// A rerank's (query, text) pairs, for HTTP and gRPC alike. It asks for texts and a query.
    /// TEI also takes an empty query beside texts that are not; this server refuses it, as its
    /// document states, which could not say "not both empty" of a query and each text.
    pub fn rerank_items(&self, query: &str, texts: &[String]) -> Result<Vec<Item>, InferError> {
        if texts.is_empty() {
            return Err(InferError::Empty("`texts` cannot be empty".into()));
        }
        if query.is_empty() {
            return Err(InferError::Empty("Input validation error: `query` cannot be empty".into()));
        }
        Ok(texts.iter().map(|t| Item::Pair(query.to_owned(), t.clone())).collect())
    }

    pub fn check_batch(&self, n: usize) -> Result<(), InferError> {
        if n > self.max_client_batch_size {
            return Err(InferError::BatchSize { size: n, max: self.max_client_batch_size });
        }
        Ok(())
    }

    /// Text past this many bytes is cut before tokenizing (or refused without truncation).
    pub fn max_characters(&self) -> usize {
        self.max_input_length * 250
    }

    /// One input, encoded as the pipelines encode it, after the text of `prompt` (an index of
    /// `prompt_names`) when one is named: the one tokenization of the input, whose tokens the
    /// pipeline gets. Too long without truncation is an error; the prompt's tokens count.
    /// Tokenizes one input; a text to `embed` gets its prompt, the one named or the default.
    pub fn encode(
        &self,
        item: &Item,
        truncate: bool,
        prompt: Option<usize>,
        embed: bool,
    ) -> Result<Encoded, InferError> {
        let empty = || InferError::Empty("Input validation error: `inputs` cannot be empty".into());
        let too_long = |n: usize| {
            InferError::Validation(format!(
                "Input validation error: `inputs` must have less than {} tokens. Given: {n}",
                self.max_input_length
            ))
        };
        let limit = self.max_characters();
        let clip = |text: &'_ str| -> Result<String, InferError> {
            if text.len() <= limit {
                return Ok(text.to_string());
            }
            if !truncate {
                return Err(InferError::Validation(format!(
                    "Input validation error: `inputs` must have less than {limit} characters. Given: {}",
                    text.len()
                )));
            }
            // Far past max_input_length tokens anyway: spare the tokenizer the rest.
            let mut end = limit;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            Ok(text[..end].to_string())
        };
        match item {
            Item::Text(text) => {
                if text.is_empty() {
                    return Err(empty());
                }
                let text = clip(text)?;
                let prompt = match prompt {
                    Some(p) => self.prompts.get(p).map(String::as_str),
                    None => Some(self.default_prompt.as_str()).filter(|_| embed),
                };
                let text = match prompt {
                    Some(prompt) if !prompt.is_empty() => format!("{prompt}{text}"),
                    _ => text,
                };
                let encoded = self.tokenizer.encode(&text).map_err(InferError::tokenizer)?;
                if encoded.truncated && !truncate {
                    let n = self.untruncated.encode(&text).map_err(InferError::tokenizer)?.len();
                    return Err(too_long(n));
                }
                Ok(encoded)
            }
            // A prompt goes before text: routes that take pairs name none.
            Item::Ids(_) | Item::Pair(..) if prompt.is_some() => {
                let what = if matches!(item, Item::Ids(_)) { "token ids" } else { "pairs" };
                Err(InferError::Validation(format!(
                    "Input validation error: `prompt_name` cannot be used with {what}"
                )))
            }
            // As TEI: a pair is empty only when both its texts are, and one empty text still makes
            // a pair, `[CLS] a [SEP] [SEP]`, as the tokenizers library encodes it there.
            Item::Pair(a, b) => {
                if a.is_empty() && b.is_empty() {
                    return Err(empty());
                }
                let pair = [(clip(a)?, clip(b)?)];
                let encode = |tokenizer: &Tokenizer| {
                    tokenizer
                        .encode_pair_batch(&pair)
                        .map(|mut one| one.remove(0))
                        .map_err(InferError::tokenizer)
                };
                let encoded = encode(&self.tokenizer)?;
                if encoded.truncated && !truncate {
                    return Err(too_long(encode(&self.untruncated)?.len()));
                }
                Ok(encoded)
            }
            // Token ids are used as given, special tokens included (TEI adds none to them).
            Item::Ids(ids) => {
                if ids.is_empty() {
                    return Err(empty());
                }
                let vocab = self.vocab_size;
                if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
                    return Err(InferError::Validation(format!(
                        "Input validation error: token id {bad} is past the vocabulary ({vocab} tokens)"
                    )));
                }
                if ids.len() > self.max_input_length && !truncate {
                    return Err(too_long(ids.len()));
                }
                let truncated = ids.len() > self.max_input_length;
                let ids = &ids[..ids.len().min(self.max_input_length)];
                Ok(Encoded {
                    input_ids: ids.to_vec(),
                    token_type_ids: vec![0; ids.len()],
                    attention_mask: vec![1; ids.len()],
                    offsets: vec![(0, 0); ids.len()],
                    truncated,
                })
            }
        }
    }

    /// /tokenize: one text, untruncated, within the character limit.
    pub fn tokenize(&self, text: &str) -> Result<Encoded, InferError> {
        if text.is_empty() {
            return Err(InferError::Empty("Input validation error: `inputs` cannot be empty".into()));
        }
        let limit = self.max_characters();
        if text.len() > limit {
            return Err(InferError::Validation(format!(
                "Input validation error: `inputs` must have less than {limit} characters. Given: {}",
                text.len()
            )));
        }
        self.untruncated.encode(text).map_err(InferError::tokenizer)
    }

    /// /decode: token ids back to text.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String, InferError> {
        if ids.is_empty() {
            return Err(InferError::Empty("Input validation error: `input_ids` cannot be empty".into()));
        }
        let vocab = self.vocab_size;
        if let Some(bad) = ids.iter().find(|&&id| id as usize >= vocab) {
            return Err(InferError::Validation(format!(
                "Input validation error: token id {bad} is past the vocabulary ({vocab} tokens)"
            )));
        }
        self.tokenizer.decode(ids, skip_special_tokens).map_err(InferError::tokenizer)
    }
}
