//! The entry points that take inputs already tokenized (what roformer-serve hands the pipelines
//! after tokenizing each input once) give what the text entry points give, on the fixtures.

use candle_core::Tensor;
use roformer::{Encoded, Error, Inputs, PipelineOptions, Prompt, Reranker, SentenceEncoder, TextClassifier};

use crate::support::{fixture, on_device, Scratch};

const TEXTS: [&str; 5] = [
    "it 's a charming and often affecting journey .",
    "a great film",
    "the movie was terrible and boring , and far too long for what it had to say",
    "x",
    "Héllo wörld, ça va ?",
];

/// A batch size that splits the inputs unevenly, so sorting and reordering are exercised.
fn options() -> PipelineOptions {
    on_device().with_batch_size(2)
}

fn assert_close(what: &str, ours: &[Vec<f32>], want: &[Vec<f32>], tol: f32) {
    assert_eq!(ours.len(), want.len(), "{what}: rows");
    for (i, (a, b)) in ours.iter().zip(want).enumerate() {
        assert_eq!(a.len(), b.len(), "{what}[{i}]: length");
        let worst = crate::support::largest(a.iter().zip(b).map(|(x, y)| f64::from((x - y).abs())));
        assert!(worst <= f64::from(tol), "{what}[{i}]: max abs diff {worst:e}");
    }
}

/// Each text after the prompt, encoded by the encoder's own tokenizer.
fn prompted(encoder: &SentenceEncoder, prompt: Prompt<'_>) -> Vec<Encoded> {
    let prompt = encoder.prompt_text(prompt).unwrap();
    let texts: Vec<String> = TEXTS.iter().map(|t| format!("{prompt}{t}")).collect();
    encoder.tokenizer().encode_batch(&texts).unwrap()
}

#[test]
fn prompted_embeddings_from_tokens_are_those_of_encode_with() {
    let st6 = fixture("sentence_transformers/st6_cls_dense");
    // The same folder pooling the mean without the prompt's tokens, where the prompt's length
    // counts.
    let scratch = Scratch::copy_of(&st6, "tokenized-mean");
    std::fs::write(
        scratch.path().join("1_Pooling/config.json"),
        r#"{"embedding_dimension": 32, "pooling_mode": "mean", "include_prompt": false}"#,
    )
    .unwrap();
    let prompts = [
        Prompt::Default,
        Prompt::None,
        Prompt::Named("query"),
        Prompt::Named("passage"),
        Prompt::Named("empty"),
        Prompt::Text("search for: "),
    ];
    for folder in [st6.as_path(), scratch.path()] {
        let encoder = SentenceEncoder::from_pretrained_with(folder, options()).unwrap();
        for prompt in prompts {
            let want = encoder.encode_with(&TEXTS, prompt).unwrap();
            let ours = encoder.encode_tokenized_with(&prompted(&encoder, prompt), prompt).unwrap();
            assert_close(&format!("{} {prompt:?}", folder.display()), &ours, &want, 1e-6);
        }
        assert_eq!(encoder.prompt_text(Prompt::Default).unwrap(), "query: ");
        assert_eq!(encoder.prompt_text(Prompt::Named("empty")).unwrap(), "");
        let unknown = encoder.prompt_text(Prompt::Named("nope")).unwrap_err();
        assert!(matches!(unknown, Error::UnknownPrompt { .. }), "{unknown}");
        assert!(encoder
            .encode_tokenized_with(&prompted(&encoder, Prompt::None), Prompt::Named("nope"))
            .is_err());
        // Without the prompt named, a pooling that leaves it out would keep it: the prompt counts.
        let tokens = prompted(&encoder, Prompt::Named("query"));
        let as_none = encoder.encode_tokenized_with(&tokens, Prompt::None).unwrap();
        let as_query = encoder.encode_tokenized_with(&tokens, Prompt::Named("query")).unwrap();
        assert_eq!(as_none == as_query, folder == st6.as_path(), "{}", folder.display());
    }
    // A checkpoint without prompts takes a prompt's text, and knows no names.
    let plain = SentenceEncoder::from_pretrained_with(fixture("pipelines/sim"), options()).unwrap();
    let prompt = Prompt::Text("query: ");
    let want = plain.encode_with(&TEXTS, prompt).unwrap();
    assert_close(
        "sim",
        &plain.encode_tokenized_with(&prompted(&plain, prompt), prompt).unwrap(),
        &want,
        1e-6,
    );
    assert!(matches!(plain.prompt_text(Prompt::Named("query")), Err(Error::UnknownPrompt { .. })));
}

#[test]
fn classifications_of_tokens_are_those_of_texts_and_pairs() {
    let classifier = TextClassifier::from_pretrained_with(fixture("pipelines/cls"), options()).unwrap();
    let tokens = classifier.tokenizer().encode_batch(&TEXTS).unwrap();
    assert_eq!(classifier.classify_tokenized(&tokens).unwrap(), classifier.classify(&TEXTS).unwrap());
    let pairs: Vec<(&str, &str)> = TEXTS.iter().zip(TEXTS.iter().rev()).map(|(a, b)| (*a, *b)).collect();
    let tokens = classifier.tokenizer().encode_pair_batch(&pairs).unwrap();
    assert_eq!(classifier.classify_tokenized(&tokens).unwrap(), classifier.classify_pairs(&pairs).unwrap());
}

#[test]
fn rerank_scores_of_tokens_are_those_of_texts() {
    let reranker =
        Reranker::from_pretrained_with(fixture("sentence_transformers/cross_encoder"), options()).unwrap();
    let pairs: Vec<(&str, &str)> = TEXTS.iter().map(|t| ("a good movie", *t)).collect();
    let tokens = reranker.tokenizer().encode_pair_batch(&pairs).unwrap();
    assert_eq!(reranker.predict_tokenized(&tokens).unwrap(), reranker.predict(&pairs).unwrap());
    assert_eq!(reranker.predict_raw_tokenized(&tokens).unwrap(), reranker.predict_raw(&pairs).unwrap());
    assert_ne!(
        reranker.predict_tokenized(&tokens).unwrap(),
        reranker.predict_raw_tokenized(&tokens).unwrap()
    );
}

#[test]
fn token_embeddings_in_batches_are_each_encodings_forward_pass_alone() {
    for name in ["pipelines/sim", "pipelines/cls", "sentence_transformers/st6_cls_dense"] {
        let encoder = SentenceEncoder::from_pretrained_with(fixture(name), options()).unwrap();
        let tokenizer = encoder.tokenizer();
        let mut encodings = tokenizer.encode_batch(&TEXTS).unwrap();
        encodings.push(tokenizer.encode_pair(TEXTS[1], TEXTS[0]).unwrap());
        let ours = encoder.token_embeddings_tokenized(&encodings).unwrap();
        assert_eq!(ours.len(), encodings.len(), "{name}");
        let model = encoder.model();
        for (i, (rows, e)) in ours.iter().zip(&encodings).enumerate() {
            let tensor = |v: &[u32]| Tensor::new(v, model.device()).unwrap().unsqueeze(0).unwrap();
            let (ids, types) = (tensor(&e.input_ids), tensor(&e.token_type_ids));
            let alone = model.forward(Inputs::new(&ids).with_token_type_ids(&types)).unwrap();
            let want =
                alone.squeeze(0).unwrap().to_dtype(candle_core::DType::F32).unwrap().to_vec2().unwrap();
            assert_eq!(rows.len(), e.len(), "{name}[{i}]: one row per token");
            assert_close(&format!("{name}[{i}]"), rows, &want, 1e-5);
        }
        assert!(encoder.token_embeddings_tokenized(&[]).unwrap().is_empty());
    }
}
