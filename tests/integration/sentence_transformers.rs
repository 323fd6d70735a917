//! sentence-transformers folders and cross-encoders, against what sentence-transformers 6 gives for
//! the fixtures of scripts/fixtures/make_st_fixtures.py.

use roformer::{Error, PipelineOptions, Pooling, Prompt, Reranker, SentenceEncoder};
use serde_json::{json, Value};

use crate::support::{fixture, on_device, Scratch};

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

fn texts(want: &Value) -> Vec<String> {
    want["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect()
}

fn encode(model: &std::path::Path, options: PipelineOptions, texts: &[String]) -> Vec<Vec<f32>> {
    SentenceEncoder::from_pretrained_with(model, options).unwrap().encode(texts).unwrap()
}

#[test]
fn a_sentence_transformers_6_folder_is_encoded_as_sentence_transformers_encodes_it() {
    // CLS pooling, Dense with tanh, Normalize; tokenizer.json and no vocab.txt; a default prompt.
    let dir = folder("st6_cls_dense");
    assert!(!dir.join("vocab.txt").exists() && dir.join("tokenizer.json").is_file());
    let want = expected("st6_cls_dense");
    let texts = texts(&want);
    let encoder = SentenceEncoder::from_pretrained_with(&dir, options()).unwrap();
    assert_eq!((encoder.dim(), encoder.normalize(), encoder.pooling()), (24, true, Pooling::Cls));
    assert_eq!(encoder.max_length() as u64, want["max_seq_length"].as_u64().unwrap());
    assert_rows("default prompt name", &encoder.encode(&texts).unwrap(), &want["default"]);
    for (name, reference) in want["prompt_name"].as_object().unwrap() {
        let ours = encode(&dir, options().with_prompt_name(name), &texts);
        assert_rows(&format!("prompt name {name}"), &ours, reference);
    }
    for (prompt, reference) in want["prompt"].as_object().unwrap() {
        assert_rows(
            &format!("prompt {prompt:?}"),
            &encode(&dir, options().with_prompt(prompt), &texts),
            reference,
        );
    }
    let cut = SentenceEncoder::from_pretrained_with(&dir, options().with_truncate_dim(16)).unwrap();
    assert_eq!((cut.dim(), cut.normalize()), (16, false));
    assert_rows("truncate_dim 16", &cut.encode(&texts).unwrap(), &want["truncate_dim"]["16"]);
    // Unit length again when asked for, after the cut.
    let unit = encode(&dir, options().with_truncate_dim(16).with_normalize(true), &texts);
    for (row, cut) in unit.iter().zip(cut.encode(&texts).unwrap()) {
        let norm = cut.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!(row.iter().zip(&cut).all(|(a, b)| (a - b / norm).abs() < 1e-5));
    }
}

#[test]
fn an_older_folder_is_encoded_with_its_max_seq_length_and_without_normalize() {
    // sentence_bert_config.json's max_seq_length (24, below the tokenizer's 64), the old module names and
    // pooling_mode_* flags, vocab.txt, no Normalize module.
    let dir = folder("old_mean");
    let want = expected("old_mean");
    let texts = texts(&want);
    let encoder = SentenceEncoder::from_pretrained_with(&dir, options()).unwrap();
    assert_eq!((encoder.max_length(), encoder.normalize(), encoder.dim()), (24, false, 32));
    assert_rows("mean", &encoder.encode(&texts).unwrap(), &want["default"]);
    assert_rows(
        "prompt passage",
        &encode(&dir, options().with_prompt_name("passage"), &texts),
        &want["prompt_name"]["passage"],
    );
}

#[test]
fn the_transformer_settings_are_read_under_every_name_sentence_transformers_reads() {
    // Releases before the Transformer module named sentence_bert_config.json after the architecture, and
    // sentence-transformers 6 still tries those names in this order: the old_mean folder under each of them
    // is encoded at its max_seq_length of 24, as its reference was.
    let want = expected("old_mean");
    let texts = texts(&want);
    for name in [
        "sentence_roberta_config.json",
        "sentence_distilbert_config.json",
        "sentence_camembert_config.json",
        "sentence_albert_config.json",
        "sentence_xlm-roberta_config.json",
        "sentence_xlnet_config.json",
    ] {
        let scratch = Scratch::copy_of(&folder("old_mean"), "st-config-name");
        std::fs::rename(scratch.path().join("sentence_bert_config.json"), scratch.path().join(name)).unwrap();
        let encoder = SentenceEncoder::from_pretrained_with(scratch.path(), options()).unwrap();
        assert_eq!(encoder.max_length(), 24, "{name}");
        assert_rows(name, &encoder.encode(&texts).unwrap(), &want["default"]);
    }
    // With two of them, sentence_bert_config.json is read (sentence-transformers 6.2, given it at 12 beside
    // sentence_xlm-roberta_config.json at 24, took 12).
    let scratch = Scratch::copy_of(&folder("old_mean"), "st-config-names");
    scratch
        .write_json("sentence_roberta_config.json", &json!({"max_seq_length": 12, "do_lower_case": false}));
    let encoder = SentenceEncoder::from_pretrained_with(scratch.path(), options()).unwrap();
    assert_eq!(encoder.max_length(), 24);
}

#[test]
fn every_pooling_mode_and_include_prompt_as_sentence_transformers() {
    let want = expected("old_mean");
    let texts = texts(&want);
    for (i, variant) in want["variants"].as_array().unwrap().iter().enumerate() {
        let scratch = Scratch::copy_of(&folder("old_mean"), &format!("st-pooling-{i}"));
        let config = variant["pooling_config"].clone();
        scratch.edit_json("1_Pooling/config.json", |c| *c = config.clone());
        let mut options = options();
        if let Some(name) = variant["prompt_name"].as_str() {
            options = options.with_prompt_name(name);
        }
        let ours = encode(scratch.path(), options, &texts);
        assert_rows(&format!("pooling {config}"), &ours, &variant["embeddings"]);
    }
}

#[test]
fn the_pooling_option_replaces_the_pooling_module_as_teis_flag_does() {
    // TEI's --pooling overrides 1_Pooling/config.json; with_pooling(Cls) on the mean-pooled folder gives what
    // sentence-transformers gives with a CLS Pooling module over the same transformer.
    let want = expected("old_mean");
    let cls = want["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| {
            v["pooling_config"]["pooling_mode"] == "cls" && v["pooling_config"]["include_prompt"] == true
        })
        .unwrap();
    let encoder =
        SentenceEncoder::from_pretrained_with(folder("old_mean"), options().with_pooling(Pooling::Cls))
            .unwrap();
    assert_eq!(encoder.pooling(), Pooling::Cls);
    assert_rows("with_pooling(Cls)", &encoder.encode(&texts(&want)).unwrap(), &cls["embeddings"]);
    // The Dense after it reads the new size: three modes concatenated (96 values) refuse its 32 inputs.
    let scratch = Scratch::copy_of(&folder("st6_cls_dense"), "st-pooling-override");
    scratch.edit_json("1_Pooling/config.json", |c| c["pooling_mode"] = json!(["cls", "mean", "max"]));
    let Err(err) = SentenceEncoder::from_pretrained_with(scratch.path(), options()) else { panic!("loaded") };
    assert!(
        err.to_string().contains("`in_features`: 32, but the module before gives vectors of 96"),
        "{err}"
    );
    let encoder =
        SentenceEncoder::from_pretrained_with(scratch.path(), options().with_pooling(Pooling::Mean)).unwrap();
    assert_eq!((encoder.pooling(), encoder.dim()), (Pooling::Mean, 24));
}

#[test]
fn one_encoder_serves_every_prompt_per_call_as_sentence_transformers() {
    // One load, the prompts chosen per call, against sentence-transformers' per-prompt references.
    let want = expected("st6_cls_dense");
    let texts = texts(&want);
    let encoder = SentenceEncoder::from_pretrained_with(folder("st6_cls_dense"), options()).unwrap();
    assert_eq!(encoder.prompt_names(), ["document", "empty", "passage", "query"]);
    assert_rows("Prompt::Default", &encoder.encode_with(&texts, Prompt::Default).unwrap(), &want["default"]);
    for (name, reference) in want["prompt_name"].as_object().unwrap() {
        let ours = encoder.encode_with(&texts, Prompt::Named(name)).unwrap();
        assert_rows(&format!("Prompt::Named({name})"), &ours, reference);
    }
    for (prompt, reference) in want["prompt"].as_object().unwrap() {
        let ours = encoder.encode_with(&texts, Prompt::Text(prompt)).unwrap();
        assert_rows(&format!("Prompt::Text({prompt:?})"), &ours, reference);
    }
    // No prompt is the empty prompt of the folder's `empty`.
    let ours = encoder.encode_with(&texts, Prompt::None).unwrap();
    assert_rows("Prompt::None", &ours, &want["prompt_name"]["empty"]);
    let e = encoder.encode_with(&texts, Prompt::Named("search")).unwrap_err();
    assert!(
        matches!(&e, Error::UnknownPrompt { name, known, .. } if name == "search" && known.len() == 4)
            && e.to_string().contains("unknown prompt name `search`")
            && e.to_string().contains("`query`"),
        "{e}"
    );

    // Without the prompt in the pooling (include_prompt false), the prompt's tokens are left out per call too.
    let old = expected("old_mean");
    let variant = old["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["pooling_config"]["include_prompt"] == false && v["prompt_name"] == "passage")
        .unwrap();
    let scratch = Scratch::copy_of(&folder("old_mean"), "st-prompt-per-call");
    scratch.edit_json("1_Pooling/config.json", |c| *c = variant["pooling_config"].clone());
    let encoder = SentenceEncoder::from_pretrained_with(scratch.path(), options()).unwrap();
    let ours = encoder.encode_with(&self::texts(&old), Prompt::Named("passage")).unwrap();
    assert_rows("Prompt::Named(passage) without include_prompt", &ours, &variant["embeddings"]);

    // A checkpoint without prompts refuses a name, and takes a literal prompt.
    let plain = SentenceEncoder::from_pretrained_with(fixture("pipelines/sim"), options()).unwrap();
    assert!(plain.prompt_names().is_empty());
    let e = plain.encode_with(&["a"], Prompt::Named("query")).unwrap_err();
    assert!(matches!(&e, Error::UnknownPrompt { known, .. } if known.is_empty()), "{e:?}");
    assert!(e.to_string().contains("config_sentence_transformers.json has no prompts"), "{e}");
    let literal =
        SentenceEncoder::from_pretrained_with(fixture("pipelines/sim"), options().with_prompt("q: "))
            .unwrap();
    assert_eq!(plain.encode_with(&["a"], Prompt::Text("q: ")).unwrap(), literal.encode(&["a"]).unwrap());
}

#[test]
fn a_dense_module_from_pytorch_model_bin() {
    let want = expected("old_mean");
    let scratch = Scratch::copy_of(&folder("old_mean"), "st-dense-bin");
    scratch.edit_json("modules.json", |m| {
        m.as_array_mut().unwrap().push(serde_json::json!(
            {"idx": 2, "name": "2", "path": "dense_bin", "type": "sentence_transformers.models.Dense"}
        ));
    });
    let encoder = SentenceEncoder::from_pretrained_with(scratch.path(), options()).unwrap();
    assert_eq!((encoder.dim(), encoder.normalize()), (8, false));
    assert_rows("dense from .bin", &encoder.encode(&texts(&want)).unwrap(), &want["dense_bin"]["embeddings"]);
}

#[test]
fn sentence_transformers_folders_refuse_what_they_cannot_honour() {
    let dir = folder("st6_cls_dense");
    let message = |options: PipelineOptions| {
        SentenceEncoder::from_pretrained_with(&dir, options).unwrap_err().to_string()
    };
    let m = message(options().with_prompt_name("search"));
    assert!(
        m.contains("unknown prompt name `search`") && m.contains("config_sentence_transformers.json"),
        "{m}"
    );
    assert!(m.contains("`query`") && m.contains("`passage`"), "{m}");
    let m = message(options().with_prompt_name("query").with_prompt("q: "));
    assert!(m.contains("not both"), "{m}");
    let m = message(options().with_pooling(Pooling::Pooler));
    assert!(m.contains("pooling `pooler`") && m.contains("takes `cls` or `mean`"), "{m}");
    let m = message(options().with_truncate_dim(25));
    assert!(m.contains("truncate_dim 25") && m.contains("24"), "{m}");
    // A prompt name needs a folder with prompts.
    let err =
        SentenceEncoder::from_pretrained_with(fixture("pipelines/sim"), options().with_prompt_name("query"));
    assert!(err.unwrap_err().to_string().contains("unknown prompt name `query`"));
}

#[test]
fn a_malformed_sentence_transformers_folder_is_named() {
    let cases: [(&str, Value, &str); 4] = [
        ("not-a-list", serde_json::json!({"0": "Transformer"}), "expected a list of modules"),
        (
            "unknown-module",
            serde_json::json!([
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.LSTM"}
            ]),
            "invalid config field `[1].type`: module `sentence_transformers.models.LSTM` is not supported",
        ),
        (
            "no-pooling",
            serde_json::json!([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]),
            "no Pooling module",
        ),
        (
            "escape",
            serde_json::json!([
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "../x", "type": "sentence_transformers.models.Pooling"}
            ]),
            "`../x` is not a subfolder",
        ),
    ];
    for (tag, modules, wanted) in cases {
        let scratch = Scratch::copy_of(&folder("old_mean"), &format!("st-bad-{tag}"));
        let path = scratch.edit_json("modules.json", |m| *m = modules.clone());
        let err = SentenceEncoder::from_pretrained_with(scratch.path(), options()).unwrap_err();
        let m = err.to_string();
        assert!(matches!(err, Error::Config { .. }), "{tag}: {err:?}");
        assert!(m.starts_with(&path.display().to_string()) && m.contains(wanted), "{tag}: {m}");
    }
    let scratch = Scratch::copy_of(&folder("old_mean"), "st-bad-mode");
    let path =
        scratch.edit_json("1_Pooling/config.json", |c| *c = serde_json::json!({"pooling_mode": "median"}));
    let m = SentenceEncoder::from_pretrained_with(scratch.path(), options()).unwrap_err().to_string();
    assert!(
        m.starts_with(&path.display().to_string()) && m.contains("`pooling_mode`") && m.contains("median"),
        "{m}"
    );
}

#[test]
fn sentence_bert_config_do_lower_case_lowercases_as_sentence_transformers() {
    // A cased tokenizer under sentence_bert_config.json's do_lower_case: sentence-transformers lowercases the
    // texts first, so "I loved it!" finds "i", which the cased tokenizer alone makes [UNK].
    let want = expected("old_mean");
    let texts = texts(&want);
    let reference = &want["do_lower_case"];
    let cased = reference["tokenizer_config"].as_object().unwrap();
    for (lower, key) in [(true, "lowercased"), (false, "cased")] {
        let scratch = Scratch::copy_of(&folder("old_mean"), &format!("st-lower-{lower}"));
        scratch.edit_json("tokenizer_config.json", |c| {
            cased.iter().for_each(|(k, v)| c[k] = v.clone());
        });
        scratch.edit_json("sentence_bert_config.json", |c| c["do_lower_case"] = lower.into());
        let encoder = SentenceEncoder::from_pretrained_with(scratch.path(), options()).unwrap();
        let tokens = encoder.tokenizer().tokenize("I loved it!").unwrap();
        assert_eq!(tokens[0], if lower { "i" } else { "[UNK]" }, "{key}: {tokens:?}");
        assert_rows(key, &encoder.encode(&texts).unwrap(), &reference[key]);
    }
}

#[test]
fn module_configs_of_the_wrong_type_are_named() {
    // Each was read as absent before (defaults: mean pooling, tanh, no prompts), where sentence-transformers fails.
    let cases: [(&str, &str, Value, &str); 7] = [
        ("old_mean", "1_Pooling/config.json", Value::Null, "expected a JSON object, found null"),
        (
            "old_mean",
            "1_Pooling/config.json",
            serde_json::json!({"pooling_mode_cls_token": 1}),
            "`pooling_mode_cls_token`: 1 is not a boolean",
        ),
        ("old_mean", "sentence_bert_config.json", serde_json::json!([24]), "expected a JSON object"),
        (
            "old_mean",
            "sentence_bert_config.json",
            serde_json::json!({"do_lower_case": "yes"}),
            "`do_lower_case`: \"yes\" is not a boolean",
        ),
        ("st6_cls_dense", "config_sentence_transformers.json", Value::Null, "expected a JSON object"),
        (
            "st6_cls_dense",
            "2_Dense/config.json",
            serde_json::json!({"in_features": 32, "out_features": 24, "activation_function": {}}),
            "`activation_function`: {} is not the class name of a torch.nn activation",
        ),
        (
            "st6_cls_dense",
            "2_Dense/config.json",
            serde_json::json!({"in_features": 32, "out_features": 24, "module_output_name": ["x"]}),
            "`module_output_name`: [\"x\"]: only \"sentence_embedding\" is supported",
        ),
    ];
    for (i, (name, file, value, wanted)) in cases.into_iter().enumerate() {
        let scratch = Scratch::copy_of(&folder(name), &format!("st-type-{i}"));
        let path = scratch.edit_json(file, |c| *c = value.clone());
        let Err(err) = SentenceEncoder::from_pretrained_with(scratch.path(), options()) else {
            panic!("{file}: {value} loaded");
        };
        let m = err.to_string();
        assert!(matches!(err, Error::Config { .. }), "{file}: {err:?}");
        assert!(m.starts_with(&path.display().to_string()) && m.contains(wanted), "{file}: {m}");
    }
}

#[test]
fn transformer_settings_this_crate_does_not_run_are_refused() {
    // sentence-transformers 6 would run each (another task's outputs, the HF pooler's output, per-call
    // tokenizer arguments, multi-vector lengths); read as absent, each gave other vectors.
    let cases: [(&str, Value, &str); 5] = [
        (
            "transformer_task",
            json!("fill-mask"),
            "\"fill-mask\": load the folder with SparseEncoder (roformer-serve: --pooling splade) (this reader needs \
             `feature-extraction`)",
        ),
        (
            "modality_config",
            json!({"text": {"method": "forward", "method_output_name": "pooler_output"}}),
            "is not supported (only {\"text\":{\"method\":\"forward\",\"method_output_name\":\"last_hidden_state\"}})",
        ),
        ("module_output_name", json!("sentence_embedding"), "is not supported (only `token_embeddings`)"),
        ("processing_kwargs", json!({"text": {"max_length": 16}}), "per-call processing is not supported"),
        ("query_length", json!(32), "`query_length`: 32: multi-vector settings are not supported"),
    ];
    for (field, value, wanted) in cases {
        let scratch = Scratch::copy_of(&folder("st6_cls_dense"), &format!("st-task-{field}"));
        let path = scratch.edit_json("sentence_bert_config.json", |c| c[field] = value.clone());
        let Err(err) = SentenceEncoder::from_pretrained_with(scratch.path(), options()) else {
            panic!("{field}: {value} loaded");
        };
        let m = err.to_string();
        assert!(m.starts_with(&path.display().to_string()) && m.contains(wanted), "{field}: {m}");
    }
    // A cross-encoder's Transformer is sequence-classification.
    let scratch = Scratch::copy_of(&folder("cross_encoder"), "ce-task");
    scratch.edit_json("sentence_bert_config.json", |c| c["transformer_task"] = "feature-extraction".into());
    let Err(err) = Reranker::from_pretrained_with(scratch.path(), options()) else { panic!("loaded") };
    assert!(
        err.to_string()
            .contains("load the folder with SentenceEncoder (this reader needs `sequence-classification`)"),
        "{err}"
    );
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
fn a_cross_encoder_folder_truncates_and_lowercases_as_its_transformer_module_says() {
    // sentence_bert_config.json's max_seq_length (8) and do_lower_case over a cased tokenizer.json, which
    // CrossEncoder honours: "I LOVED IT" finds "i" only lowercased, and long pairs are cut at 8 tokens.
    let want = &expected("cross_encoder")["transformer_config"];
    let scratch = Scratch::copy_of(&folder("cross_encoder"), "ce-transformer-config");
    let settings = want["sentence_bert_config"].as_object().unwrap();
    scratch.edit_json("sentence_bert_config.json", |c| settings.iter().for_each(|(k, v)| c[k] = v.clone()));
    scratch
        .edit_json("tokenizer.json", |t| t["normalizer"]["lowercase"] = want["tokenizer_lowercase"].clone());
    let reranker = Reranker::from_pretrained_with(scratch.path(), options()).unwrap();
    assert_eq!(reranker.classifier().max_length(), 8);
    let pairs: Vec<(&str, &str)> = want["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_str().unwrap(), p[1].as_str().unwrap()))
        .collect();
    assert_rows("scores", &[reranker.predict(&pairs).unwrap()], &Value::Array(vec![want["scores"].clone()]));
}

#[test]
fn reranker_refuses_a_checkpoint_of_several_labels() {
    let err = Reranker::from_pretrained_with(fixture("pipelines/cls"), options()).unwrap_err();
    assert!(matches!(&err, Error::Config { field, .. } if field == "num_labels"), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("config.json") && message.contains("has 3"), "{message}");
}
