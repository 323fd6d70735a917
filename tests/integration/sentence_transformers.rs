//! sentence-transformers folders and cross-encoders, against what sentence-transformers 6 gives for
//! the fixtures of scripts/make_st_fixtures.py.

use roformer::{Error, PipelineOptions, Reranker};
use serde_json::Value;

use crate::support::{fixture, on_device};

fn folder(name: &str) -> std::path::PathBuf {
    fixture("sentence_transformers").join(name)
}

fn expected(name: &str) -> Value {
    let path = folder(name).join("expected.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

/// Every value within 1e-4 of the reference, row by row, and as many rows and values.
fn assert_rows(what: &str, ours: &[Vec<f32>], reference: &Value) {
    let reference = reference.as_array().unwrap();
    assert_eq!(ours.len(), reference.len(), "{what}: rows");
    for (i, (row, want)) in ours.iter().zip(reference).enumerate() {
        let want = floats(want);
        assert_eq!(row.len(), want.len(), "{what}: row {i} length");
        for (j, (a, b)) in row.iter().zip(&want).enumerate() {
            assert!((a - b).abs() < 1e-4, "{what}: row {i} [{j}]: {a} vs {b}");
        }
    }
}

fn options() -> PipelineOptions {
    on_device().with_batch_size(3)
}

#[test]
fn reranker_predicts_and_ranks_as_cross_encoder() {
    let want = expected("cross_encoder");
    let reranker = Reranker::from_pretrained_with(folder("cross_encoder"), options()).unwrap();
    let pairs: Vec<(String, String)> = want["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_str().unwrap().to_string(), p[1].as_str().unwrap().to_string()))
        .collect();
    assert_rows(
        "sigmoid scores",
        &[reranker.predict(&pairs).unwrap()],
        &Value::Array(vec![want["scores"].clone()]),
    );
    assert_rows(
        "raw scores",
        &[reranker.predict_raw(&pairs).unwrap()],
        &Value::Array(vec![want["raw"].clone()]),
    );

    let documents: Vec<&str> =
        want["documents"].as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect();
    let ranked = reranker.rank(want["query"].as_str().unwrap(), &documents).unwrap();
    let reference = want["rank"].as_array().unwrap();
    assert_eq!(ranked.len(), reference.len());
    for (r, w) in ranked.iter().zip(reference) {
        // Ties (the document given twice) keep input order, as sentence-transformers' rank does.
        assert_eq!(r.index, w["index"].as_u64().unwrap() as usize, "{ranked:?}");
        assert!((r.score - w["score"].as_f64().unwrap() as f32).abs() < 1e-4);
    }
    let raw = reranker.rank_raw(want["query"].as_str().unwrap(), &documents).unwrap();
    let order: Vec<usize> = raw.iter().map(|r| r.index).collect();
    assert_eq!(order, ranked.iter().map(|r| r.index).collect::<Vec<_>>());
    assert!(raw[0].score > 1.0, "logits, not probabilities: {raw:?}");
    assert!(reranker.rank("query", &[] as &[&str]).unwrap().is_empty());
}

#[test]
fn reranker_refuses_a_checkpoint_of_several_labels() {
    let err = Reranker::from_pretrained_with(fixture("pipelines/cls"), options()).unwrap_err();
    assert!(matches!(&err, Error::Config { field, .. } if field == "num_labels"), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("config.json") && message.contains("has 3"), "{message}");
}
