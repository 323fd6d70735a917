//! The pipelines as a user calls them, against transformers on the same inputs (1e-4), and the
//! metric code against scikit-learn and scipy.

use crate::app::metrics;
use roformer::{
    cosine_similarity, Error, FillMask, PipelineOptions, Pooling, SentenceEncoder, SparseEmbedding,
    SparseEncoder, TextClassifier,
};

use crate::support::Scratch;
use serde_json::Value;

fn expected(name: &str) -> Value {
    let path = crate::support::fixture(&format!("pipelines/{name}/expected.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

fn assert_vec_close(what: &str, ours: &[f32], want: &[f32], tol: f32) {
    assert_eq!(ours.len(), want.len(), "{what}: lengths");
    let worst = crate::support::largest(ours.iter().zip(want).map(|(a, b)| f64::from((a - b).abs())));
    assert!(
        worst <= f64::from(tol),
        "{what}: max abs diff {worst:e} > {tol:e}\nours {ours:?}\nwant {want:?}"
    );
}

/// On the test device (`ROFORMER_TEST_DEVICE`).
fn options(batch_size: usize) -> PipelineOptions {
    crate::support::on_device().with_batch_size(batch_size)
}

fn dir(name: &str) -> String {
    crate::support::fixture(&format!("pipelines/{name}")).to_string_lossy().into_owned()
}

#[test]
fn classifier_matches_transformers_for_every_problem_type() {
    for name in ["cls", "multilabel", "regression"] {
        let want = expected(name);
        // A batch size that splits the inputs unevenly, so sorting and reordering are exercised.
        let classifier = TextClassifier::from_pretrained_with(dir(name), options(3)).unwrap();
        let texts: Vec<&str> =
            want["texts"].as_array().unwrap().iter().map(|c| c["input"][0].as_str().unwrap()).collect();
        let results = classifier.classify(&texts).unwrap();
        assert_eq!(results.len(), texts.len());
        for (case, got) in want["texts"].as_array().unwrap().iter().zip(&results) {
            let what = format!("{name} {:?}", case["input"][0]);
            assert_vec_close(&what, &got.scores, &floats(&case["scores"]), 1e-4);
            assert_vec_close(&what, &got.logits, &floats(&case["logits"]), 1e-4);
            assert_eq!(got.truncated, case["truncated"].as_bool().unwrap(), "{what}");
        }
        let pairs: Vec<(&str, &str)> = want["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["input"][0].as_str().unwrap(), c["input"][1].as_str().unwrap()))
            .collect();
        let results = classifier.classify_pairs(&pairs).unwrap();
        for (case, got) in want["pairs"].as_array().unwrap().iter().zip(&results) {
            assert_vec_close(
                &format!("{name} pair {:?}", case["input"]),
                &got.scores,
                &floats(&case["scores"]),
                1e-4,
            );
        }
    }
}

#[test]
fn classifier_labels_come_from_id2label() {
    let classifier = TextClassifier::from_pretrained_with(dir("cls"), options(8)).unwrap();
    let want = expected("cls");
    let results = classifier.classify(&["a great film"]).unwrap();
    let scores = floats(&want["texts"][2]["scores"]);
    let best = (0..3).max_by(|&a, &b| scores[a].total_cmp(&scores[b])).unwrap();
    assert_eq!(results[0].label_id, best);
    assert_eq!(results[0].label, ["negative", "neutral", "positive"][best]);
    assert!((results[0].score - scores[best]).abs() < 1e-4);
}

#[test]
fn sentence_encoder_matches_transformers() {
    let want = expected("sim");
    let texts: Vec<&str> = want["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    for (pooling, key) in [(Pooling::Cls, "cls"), (Pooling::Mean, "mean"), (Pooling::Pooler, "pooler")] {
        let raw = SentenceEncoder::from_pretrained_with(
            dir("sim"),
            options(4).with_pooling(pooling).with_normalize(false),
        )
        .unwrap();
        let ours = raw.encode(&texts).unwrap();
        for ((text, got), want) in texts.iter().zip(&ours).zip(want[key].as_array().unwrap()) {
            assert_vec_close(&format!("{key} {text:?}"), got, &floats(want), 1e-4);
        }
        let normalized = SentenceEncoder::from_pretrained_with(dir("sim"), options(4).with_pooling(pooling))
            .unwrap()
            .encode(&texts)
            .unwrap();
        for (n, raw) in normalized.iter().zip(&ours) {
            let norm: f32 = n.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-5);
            assert!((cosine_similarity(n, raw) - 1.0).abs() < 1e-5);
        }
    }
}

#[test]
fn fill_mask_matches_transformers() {
    let want = expected("mlm");
    let texts: Vec<&str> = want["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let fill = FillMask::from_pretrained_with(dir("mlm"), options(2)).unwrap();
    let ours = fill.fill(&texts, 5).unwrap();
    let zero = fill.fill(&texts, 0).unwrap_err();
    assert!(matches!(&zero, Error::InvalidOption { option, .. } if option == "top_k"), "{zero}");
    for ((text, got), want) in texts.iter().zip(&ours).zip(want["top5"].as_array().unwrap()) {
        let want = want.as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{text}: one list per [MASK]");
        for (mask, want_mask) in got.iter().zip(want) {
            let ids: Vec<u32> = mask.iter().map(|c| c.token_id).collect();
            let want_ids: Vec<u32> =
                want_mask.as_array().unwrap().iter().map(|c| c[1].as_u64().unwrap() as u32).collect();
            assert_eq!(ids, want_ids, "{text}");
            for (c, w) in mask.iter().zip(want_mask.as_array().unwrap()) {
                assert_eq!(c.token, w[0].as_str().unwrap());
                assert!((c.score - w[2].as_f64().unwrap() as f32).abs() < 1e-4);
            }
        }
    }
}

/// Each text's sparse embedding against the reference's (index, value) pairs: the same non-zero
/// entries, values within 1e-5 (relative above 1: sums over the tokens reach 20).
fn assert_sparse(what: &str, texts: &[&str], ours: &[SparseEmbedding], want: &Value, dim: usize) {
    assert_eq!(ours.len(), texts.len(), "{what}");
    for ((text, got), want) in texts.iter().zip(ours).zip(want.as_array().unwrap()) {
        let want: Vec<(u32, f32)> = want
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_u64().unwrap() as u32, p[1].as_f64().unwrap() as f32))
            .collect();
        let want_indices: Vec<u32> = want.iter().map(|p| p.0).collect();
        assert_eq!(got.indices, want_indices, "{what}, {text:?}: the non-zero entries");
        let diff = crate::support::largest(
            got.values.iter().zip(&want).map(|(a, (_, b))| f64::from((a - b).abs() / b.max(1.0))),
        );
        assert!(diff < 1e-5, "{what}, {text:?}: max diff {diff:e}");
        let dense = got.to_dense(dim);
        assert_eq!(dense.iter().filter(|&&v| v != 0.0).count(), want.len());
    }
}

/// A reference file of the masked-LM fixture.
fn mlm_reference(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(format!("{}/{name}", dir("mlm"))).unwrap()).unwrap()
}

fn texts_of(want: &Value) -> Vec<&str> {
    want["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect()
}

#[test]
fn splade_matches_transformers() {
    let want = mlm_reference("splade.json");
    let texts = texts_of(&want);
    // Batches of 2 mix lengths (padding or packing), as in the other pipeline tests; the last text
    // is truncated to the model's 64 positions.
    let encoder = SparseEncoder::from_pretrained_with(dir("mlm"), options(2)).unwrap();
    assert_eq!(encoder.dim(), 1131);
    assert_sparse("splade", &texts, &encoder.encode(&texts).unwrap(), &want["sparse"], encoder.dim());
}

#[test]
fn a_sentence_transformers_sparse_encoder_folder_is_encoded_as_sentence_transformers() {
    // The masked-LM fixture with the files SparseEncoder saved: max or sum pooling, relu or log1p_relu, a
    // max_seq_length (8) and the module names of sentence-transformers 5 (make_st_splade_fixture.py).
    let want = mlm_reference("splade_st.json");
    let texts = texts_of(&want);
    let variants = want["variants"].as_array().unwrap();
    for (i, variant) in variants.iter().enumerate() {
        let scratch = Scratch::copy_of(std::path::Path::new(&dir("mlm")), &format!("splade-st-{i}"));
        for (name, value) in variant["files"].as_object().unwrap() {
            scratch.write_json(name, value);
        }
        let encoder = SparseEncoder::from_pretrained_with(scratch.path(), options(2)).unwrap();
        let what = variant["variant"].to_string();
        assert_sparse(&what, &texts, &encoder.encode(&texts).unwrap(), &variant["sparse"], encoder.dim());
    }

    // What SparseEncoder cannot honour, and a sparse folder given to SentenceEncoder.
    let scratch = Scratch::copy_of(std::path::Path::new(&dir("mlm")), "splade-st-bad");
    for (name, value) in variants[0]["files"].as_object().unwrap() {
        scratch.write_json(name, value);
    }
    let message = |scratch: &Scratch| match SparseEncoder::from_pretrained_with(scratch.path(), options(2)) {
        Ok(_) => panic!("loaded"),
        Err(e) => e.to_string(),
    };
    let m = match SentenceEncoder::from_pretrained_with(scratch.path(), options(2)) {
        Ok(_) => panic!("a SentenceEncoder loaded a sparse folder"),
        Err(e) => e.to_string(),
    };
    assert!(m.contains("load the folder with SparseEncoder"), "{m}");
    scratch.edit_json("1_SpladePooling/config.json", |c| c["pooling_strategy"] = "mean".into());
    let m = message(&scratch);
    assert!(m.contains("`pooling_strategy`: \"mean\" is not one of max, sum"), "{m}");
    scratch.edit_json("1_SpladePooling/config.json", |c| c["pooling_strategy"] = "max".into());
    scratch.edit_json("config_sentence_transformers.json", |c| {
        c["prompts"]["query"] = "query: ".into();
        c["default_prompt_name"] = "query".into();
    });
    let m = message(&scratch);
    assert!(m.contains("default prompt `query`") && m.contains("puts no prompt"), "{m}");
    scratch.edit_json("modules.json", |m| {
        m.as_array_mut().unwrap().push(serde_json::json!(
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}
        ));
    });
    let m = message(&scratch);
    assert!(m.contains("`[2].type`: nothing may follow the SpladePooling module"), "{m}");
}

#[test]
fn metrics_match_scikit_learn_and_scipy() {
    let m: Value = serde_json::from_str(
        &std::fs::read_to_string(crate::support::fixture("pipelines/metrics.json")).unwrap(),
    )
    .unwrap();
    let ints =
        |v: &Value| v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect::<Vec<_>>();
    let f64s = |v: &Value| v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect::<Vec<_>>();
    let close = |what: &str, ours: f64, want: &Value| {
        let want = want.as_f64().unwrap();
        assert!((ours - want).abs() < 1e-12, "{what}: {ours} vs {want}");
    };
    let b = &m["binary"];
    let (p, l) = (ints(&b["predictions"]), ints(&b["labels"]));
    close("accuracy", metrics::accuracy(&p, &l), &b["accuracy"]);
    close("f1", metrics::f1_binary(&p, &l), &b["f1"]);
    close("matthews", metrics::matthews_corrcoef(&p, &l), &b["matthews"]);
    let c = &m["multiclass"];
    let (p, l) = (ints(&c["predictions"]), ints(&c["labels"]));
    close("accuracy 3", metrics::accuracy(&p, &l), &c["accuracy"]);
    close("matthews 3", metrics::matthews_corrcoef(&p, &l), &c["matthews"]);
    let r = &m["regression"];
    let (x, y, xt) = (f64s(&r["x"]), f64s(&r["y"]), f64s(&r["xt"]));
    close("pearson", metrics::pearson(&x, &y), &r["pearson"]);
    close("spearman", metrics::spearman(&x, &y), &r["spearman"]);
    close("spearman ties", metrics::spearman(&xt, &y), &r["spearman_ties"]);
}

#[test]
fn inputs_of_any_string_type_and_empty_batches() {
    let classifier = TextClassifier::from_pretrained_with(dir("cls"), options(32)).unwrap();
    let owned: Vec<String> = vec!["a great film".into(), "dull".into()];
    let by_ref = classifier.classify(&["a great film", "dull"]).unwrap();
    assert_eq!(classifier.classify(&owned).unwrap(), by_ref);
    assert_eq!(classifier.classify(&owned[..]).unwrap(), by_ref);
    assert!(classifier.classify::<&str>(&[]).unwrap().is_empty());
    assert!(classifier.classify_pairs::<&str, String>(&[]).unwrap().is_empty());
    let pairs = [("good fun".to_string(), "a delight")];
    assert_eq!(classifier.classify_pairs(&pairs).unwrap().len(), 1);
    let encoder = SentenceEncoder::from_pretrained_with(dir("sim"), options(32)).unwrap();
    assert!(encoder.encode::<String>(&[]).unwrap().is_empty());
}

#[test]
fn the_checkpoint_decides_pooling_and_normalisation() {
    // The sim fixture carries junnyu's pooler: the authors' recipe (pooler, L2-normalised) is the
    // default. The classifier fixture has none: mean pooling, normalised.
    let want = expected("sim");
    let texts: Vec<&str> = want["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let encoder = SentenceEncoder::from_pretrained_with(dir("sim"), options(32)).unwrap();
    assert_eq!((encoder.pooling(), encoder.normalize()), (Pooling::Pooler, true));
    for (got, want) in encoder.encode(&texts).unwrap().iter().zip(want["pooler"].as_array().unwrap()) {
        let want = floats(want);
        let norm = want.iter().map(|x| x * x).sum::<f32>().sqrt();
        let want: Vec<f32> = want.iter().map(|x| x / norm).collect();
        assert_vec_close("default pooling", got, &want, 1e-4);
    }
    let encoder = SentenceEncoder::from_pretrained_with(dir("cls"), options(32)).unwrap();
    assert_eq!((encoder.pooling(), encoder.normalize()), (Pooling::Mean, true));
    let err = SentenceEncoder::from_pretrained_with(dir("cls"), options(32).with_pooling(Pooling::Pooler))
        .unwrap_err();
    assert!(err.to_string().contains("roformer.pooler.dense"), "{err}");
}

#[test]
fn a_classifiers_encoder_embeds_like_a_separately_loaded_one() {
    let classifier = TextClassifier::from_pretrained_with(dir("cls"), options(32)).unwrap();
    let shared = SentenceEncoder::from_classifier(&classifier).unwrap();
    let separate = SentenceEncoder::from_pretrained_with(dir("cls"), options(32)).unwrap();
    let texts = ["a great film", "the movie was terrible and boring", ""];
    assert_eq!(shared.encode(&texts).unwrap(), separate.encode(&texts).unwrap());
    assert_eq!(
        (shared.max_length(), classifier.max_length()),
        (separate.max_length(), separate.max_length())
    );
    // The classifier still works beside it.
    assert_eq!(classifier.classify(&texts).unwrap().len(), 3);
}
