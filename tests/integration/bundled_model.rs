//! The built-in SST-2 model (models/roformer-sst2) against transformers on the shipped folder:
//! the logits `scripts/distill/export.py` had transformers compute from the same f16 bytes.

use roformer::TextClassifier;
use serde_json::Value;

/// The reference's sentences and logits.
fn reference() -> Vec<(String, Vec<f32>)> {
    let path = crate::support::fixture("bundled/reference.json");
    let want: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let floats = |v: &Value| v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
    let sentences = want["sentences"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string());
    sentences.zip(want["logits"].as_array().unwrap().iter().map(floats)).collect()
}

/// The label transformers gives `sentence` (one of the reference's).
pub fn label_of(sentence: &str) -> &'static str {
    let (_, logits) =
        reference().into_iter().find(|(s, _)| s == sentence).expect("a sentence of the reference");
    label(&logits)
}

/// The label of two logits, as the model's id2label names them.
fn label(logits: &[f32]) -> &'static str {
    if logits[1] > logits[0] {
        "positive"
    } else {
        "negative"
    }
}

#[test]
fn the_built_in_model_matches_transformers() {
    let reference = reference();
    let sentences: Vec<&str> = reference.iter().map(|(s, _)| s.as_str()).collect();
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/roformer-sst2");
    // A batch size that splits the sentences unevenly, so padding and reordering are exercised.
    let classifier =
        TextClassifier::from_pretrained_with(model, crate::support::on_device().with_batch_size(3)).unwrap();
    let got = classifier.classify(&sentences).unwrap();
    assert_eq!(got.len(), sentences.len());
    for (ours, (sentence, theirs)) in got.iter().zip(&reference) {
        let worst =
            crate::support::largest(ours.logits.iter().zip(theirs).map(|(a, b)| f64::from((a - b).abs())));
        assert!(worst <= 1e-4, "{sentence:?}: logits {:?}, transformers {theirs:?}", ours.logits);
        assert_eq!(ours.label, label(theirs), "{sentence:?}");
    }
}
