//! Property-based fuzzing of every reader of untrusted input: config.json, the safetensors header,
//! the shard index, vocab.txt, tokenizer_config.json, the TSV reader and sentence-transformers
//! folders. Each must return a
//! value or an error, never panic. `cargo test` runs a few cases of each; `scripts/checks/fuzz.sh` runs
//! many (PROPTEST_CASES) and reports the counts.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use candle_core::{DType, Device};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};
use roformer::{Checkpoint, Config, RoFormerModel, Tokenizer};

use crate::app::glue::{Column, Columns};
use crate::app::tsv;
use crate::support::{fixture, model_fixture, Scratch};

/// Runs `property` on `strategy` for PROPTEST_CASES cases (64 by default), failing with the
/// smallest input proptest finds if it errs or panics, and reports on stderr how many cases ran
/// and how many the reader accepted (`property` returns whether it did).
fn fuzz<S: Strategy>(name: &str, strategy: S, property: impl Fn(S::Value) -> bool)
where
    S::Value: std::fmt::Debug,
{
    let mut config = RunnerConfig { failure_persistence: None, ..RunnerConfig::default() };
    if std::env::var("PROPTEST_CASES").is_err() {
        config.cases = 64;
    }
    let (cases, accepted) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let mut runner = TestRunner::new(config);
    let result = runner.run(&strategy, |value| {
        cases.fetch_add(1, Ordering::Relaxed);
        if property(value) {
            accepted.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("fuzz {name}: {e}");
    }
    let (cases, accepted) = (cases.load(Ordering::Relaxed), accepted.load(Ordering::Relaxed));
    eprintln!(
        "fuzz {name}: {cases} cases, no panic ({accepted} accepted, {} refused with an error)",
        cases - accepted
    );
}

/// A scratch folder per target, reused across its cases.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("roformer-fuzz-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Bytes with the structure of the format most of the time, and noise some of the time.
fn json_like() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|f| format!("{f:?}")),
        Just("1e400".to_string()),
        Just("-0.0".to_string()),
        "[a-z_]{0,12}".prop_map(|s| format!("{s:?}")),
        ".{0,8}".prop_map(|s| format!("{s:?}")),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((field_name(), inner), 0..6).prop_map(|kv| {
                let body: Vec<String> = kv.into_iter().map(|(k, v)| format!("{k:?}:{v}")).collect();
                format!("{{{}}}", body.join(","))
            }),
        ]
    })
}

fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "embedding_size",
            "hidden_act",
            "id2label",
            "label2id",
            "num_labels",
            "rope_scaling",
            "rope_parameters",
            "rope_theta",
            "norm_type",
            "layer_norm_eps",
            "type_vocab_size",
            "pooler_activation",
            "problem_type",
            "weight_map",
            "dtype",
            "shape",
            "data_offsets",
            "do_lower_case",
            "model_max_length",
            "tokenize_chinese_chars",
            "strip_accents",
            "tokenizer_class",
            "unk_token",
            "mask_token",
            "pad_token",
        ])
        .prop_map(str::to_string),
        "[a-z_.0-9]{0,10}",
    ]
}

#[test]
fn fuzz_config() {
    let object = prop::collection::vec((field_name(), json_like()), 0..10).prop_map(|kv| {
        let body: Vec<String> = kv.into_iter().map(|(k, v)| format!("{k:?}:{v}")).collect();
        format!("{{{}}}", body.join(","))
    });
    fuzz("config.json", prop_oneof![object, json_like(), ".{0,64}"], |text| {
        let Ok(config) = Config::from_json(&text) else { return false };
        // A config that parses is valid, and what it asks for can be computed.
        config.validate().unwrap();
        let _ = (config.num_labels(), config.head_dim(), config.rope_scaling(), config.rope_theta());
        true
    });
}

/// A small real checkpoint's bytes with its header rewritten or its bytes flipped.
#[test]
fn fuzz_safetensors_header() {
    let original = std::fs::read(model_fixture("base").join("model.safetensors")).unwrap();
    let config = Config::from_file(model_fixture("base").join("config.json")).unwrap();
    let header_len = u64::from_le_bytes(original[..8].try_into().unwrap()) as usize;
    let dir = scratch("safetensors");
    let file = dir.join("model.safetensors");
    let edits = prop_oneof![
        // Flip bytes inside the header.
        prop::collection::vec((0..header_len + 8, any::<u8>()), 1..6).prop_map(Edit::Bytes),
        // A header of JSON-like text.
        json_like().prop_map(Edit::Header),
        // A length prefix that lies.
        any::<u64>().prop_map(Edit::Length),
        // Cut short.
        (0..original.len()).prop_map(Edit::Truncate),
    ];
    fuzz("safetensors header", edits, |edit| {
        let mut bytes = original.clone();
        match edit {
            Edit::Bytes(flips) => flips.iter().for_each(|&(i, b)| bytes[i] = b),
            Edit::Header(text) => {
                bytes = (text.len() as u64).to_le_bytes().to_vec();
                bytes.extend_from_slice(text.as_bytes());
                bytes.extend_from_slice(&original[8 + header_len..]);
            }
            Edit::Length(n) => bytes[..8].copy_from_slice(&n.to_le_bytes()),
            Edit::Truncate(n) => bytes.truncate(n),
        }
        std::fs::write(&file, &bytes).unwrap();
        let Ok(checkpoint) = Checkpoint::open(&file) else { return false };
        let _ = checkpoint.load::<RoFormerModel>(&config, DType::F32, &Device::Cpu);
        true
    });
}

#[derive(Debug, Clone)]
enum Edit {
    Bytes(Vec<(usize, u8)>),
    Header(String),
    Length(u64),
    Truncate(usize),
}

#[test]
fn fuzz_shard_index() {
    let sharded = model_fixture("base_sharded");
    let dir = scratch("shards");
    for entry in std::fs::read_dir(&sharded).unwrap().flatten() {
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    let names: Vec<String> = std::fs::read_dir(&sharded)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".safetensors"))
        .collect();
    let file_name = prop_oneof![
        prop::sample::select(names),
        Just("../escape.safetensors".to_string()),
        Just("/etc/passwd".to_string()),
        "[a-z./\\\\-]{0,20}",
    ];
    let real: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sharded.join("model.safetensors.index.json")).unwrap())
            .unwrap();
    let tensors: Vec<String> = real["weight_map"].as_object().unwrap().keys().cloned().collect();
    let index = prop_oneof![
        // The real index with a few entries renamed, pointed elsewhere or dropped.
        prop::collection::vec((0..tensors.len(), prop::option::of(file_name.clone())), 0..4).prop_map(
            move |edits| {
                let mut index = real.clone();
                for (i, file) in edits {
                    match file {
                        Some(f) => index["weight_map"][&tensors[i]] = f.into(),
                        None => {
                            index["weight_map"].as_object_mut().unwrap().remove(&tensors[i]);
                        }
                    }
                }
                index.to_string()
            }
        ),
        prop::collection::vec(("[a-z.0-9_]{1,30}", file_name), 0..6).prop_map(|entries| {
            let map: Vec<String> = entries.iter().map(|(t, f)| format!("{t:?}:{f:?}")).collect();
            format!("{{\"metadata\":{{}},\"weight_map\":{{{}}}}}", map.join(","))
        }),
        json_like(),
    ];
    let config = Config::from_file(sharded.join("config.json")).unwrap();
    fuzz("shard index", index, |text| {
        std::fs::write(dir.join("model.safetensors.index.json"), text).unwrap();
        let Ok(checkpoint) = Checkpoint::open(dir.join("model.safetensors.index.json")) else { return false };
        assert!(checkpoint.tensor_names().len() < 1000);
        let _ = checkpoint.load::<RoFormerModel>(&config, DType::F32, &Device::Cpu);
        true
    });
}

/// vocab.txt lines and tokenizer_config.json values; a tokenizer that loads must encode.
#[test]
fn fuzz_vocab_and_tokenizer_config() {
    let vocab: Vec<String> = std::fs::read_to_string(fixture("pipelines/cls/vocab.txt"))
        .unwrap()
        .split('\n')
        .take(200)
        .map(str::to_string)
        .collect();
    let dir = scratch("vocab");
    let line = prop_oneof![
        4 => prop::sample::select(vocab),
        1 => ".{0,6}",
        1 => Just(String::new()),
        1 => Just("\u{2028}".to_string()),
        1 => Just("\r".to_string()),
        1 => Just("[UNK]".to_string()),
    ];
    let tokenizer_config = prop::collection::vec((field_name(), json_like()), 0..5).prop_map(|kv| {
        let body: Vec<String> = kv.into_iter().map(|(k, v)| format!("{k:?}:{v}")).collect();
        format!("{{{}}}", body.join(","))
    });
    let tokenizer_config = prop_oneof![
        Just("{}".to_string()),
        Just(r#"{"do_lower_case": false, "tokenizer_class": "RoFormerTokenizer"}"#.to_string()),
        tokenizer_config,
    ];
    // The special tokens first, most of the time, so that most vocabularies load and get used.
    let specials = prop_oneof![3 => Just(true), 1 => Just(false)];
    let inputs = (specials, prop::collection::vec(line, 0..40), tokenizer_config, ".{0,40}");
    fuzz("vocab + tokenizer_config", inputs, |(specials, mut lines, tokenizer_config, text)| {
        if specials {
            let head = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"].map(String::from);
            lines.splice(0..0, head);
        }
        std::fs::write(dir.join("vocab.txt"), lines.join("\n")).unwrap();
        std::fs::write(dir.join("tokenizer_config.json"), tokenizer_config).unwrap();
        let Ok(tokenizer) = Tokenizer::from_dir(&dir) else { return false };
        if let Ok(encoded) = tokenizer.encode(&text) {
            let _ = tokenizer.decode(&encoded.input_ids, true);
        }
        true
    });
}

#[test]
fn fuzz_tsv() {
    let bytes = prop_oneof![
        prop::collection::vec(
            prop_oneof![
                4 => "[a-z ]{0,6}".prop_map(String::into_bytes),
                2 => Just(b"\t".to_vec()),
                2 => Just(b"\n".to_vec()),
                1 => Just(b"\r".to_vec()),
                1 => Just(b"\r\n".to_vec()),
                1 => Just(b"sentence\tlabel".to_vec()),
                1 => prop::collection::vec(any::<u8>(), 0..4),
            ],
            0..40,
        )
        .prop_map(|parts| parts.concat()),
        prop::collection::vec(any::<u8>(), 0..200),
    ];
    let columns = prop_oneof![
        Just(None),
        (0..4usize, prop::option::of(0..4usize), prop::option::of(0..4usize)).prop_map(|(t, p, l)| Some(
            Columns { text: Column::Index(t), pair: p.map(Column::Index), label: l.map(Column::Index) }
        )),
        Just(Some(Columns {
            text: Column::Name("sentence".into()),
            pair: None,
            label: Some(Column::Name("label".into())),
        })),
    ];
    let inputs = (bytes, columns, prop::option::of(any::<bool>()), any::<bool>());
    fuzz("tsv", inputs, |(bytes, columns, header, skip)| {
        let lines = 1 + bytes.iter().filter(|&&b| b == b'\n' || b == b'\r').count();
        let Ok(data) = tsv::read_tsv(&bytes[..], "fuzz.tsv", columns.as_ref(), header, skip) else {
            return false;
        };
        // Every row keeps its own number, in order, and no line is counted twice.
        assert!(data.rows.windows(2).all(|w| w[0].index < w[1].index && w[0].line < w[1].line));
        assert!(data.rows.len() + data.skipped.len() <= lines);
        assert!(data.rows.iter().all(|r| r.line == r.index + 1 + usize::from(data.has_header)));
        true
    });
}

/// A JSON value for the sentence-transformers files: the keys and words those files use, and
/// other values of every type.
fn st_value() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let word = prop::sample::select(vec![
        "cls",
        "mean",
        "max",
        "lasttoken",
        "weightedmean",
        "mean_sqrt_len_tokens",
        "query",
        "",
        "../escape",
        "/etc",
        "1_Pooling",
        "2_Dense",
        "3_Normalize",
        "sentence_embedding",
        "token_embeddings",
        "torch.nn.modules.activation.Tanh",
        "torch.nn.modules.linear.Identity",
        "sentence_transformers.models.Pooling",
        "sentence_transformers.models.Dense",
        "sentence_transformers.models.Normalize",
        "sentence_transformers.models.Transformer",
        "cosine",
        "dot",
    ]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop::sample::select(vec![0i64, 1, 2, -1, 24, 32, 33, 4096]).prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
        word.prop_map(Value::from),
        ".{0,8}".prop_map(Value::from),
    ];
    let key = prop_oneof![
        prop::sample::select(vec![
            "idx",
            "name",
            "path",
            "type",
            "pooling_mode",
            "pooling_mode_cls_token",
            "pooling_mode_mean_tokens",
            "pooling_mode_max_tokens",
            "pooling_mode_lasttoken",
            "word_embedding_dimension",
            "embedding_dimension",
            "include_prompt",
            "in_features",
            "out_features",
            "bias",
            "activation_function",
            "max_seq_length",
            "do_lower_case",
            "prompts",
            "default_prompt_name",
            "model_type",
            "num_labels",
            "activation_fn",
            "model_max_length",
        ])
        .prop_map(str::to_string),
        field_name(),
    ];
    leaf.prop_recursive(3, 24, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::vec((key.clone(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// Every place inside a JSON value, as the keys and indices that lead to it.
fn json_paths(
    value: &serde_json::Value,
    here: &mut Vec<serde_json::Value>,
    out: &mut Vec<Vec<serde_json::Value>>,
) {
    out.push(here.clone());
    let children: Vec<(serde_json::Value, &serde_json::Value)> = match value {
        serde_json::Value::Object(map) => map.iter().map(|(k, v)| (k.as_str().into(), v)).collect(),
        serde_json::Value::Array(items) => items.iter().enumerate().map(|(i, v)| (i.into(), v)).collect(),
        _ => Vec::new(),
    };
    for (step, child) in children {
        here.push(step);
        json_paths(child, here, out);
        here.pop();
    }
}

fn json_at<'a>(value: &'a mut serde_json::Value, path: &[serde_json::Value]) -> &'a mut serde_json::Value {
    path.iter().fold(value, |v, step| match step {
        serde_json::Value::String(k) => &mut v[k.as_str()],
        _ => &mut v[step.as_u64().unwrap() as usize],
    })
}

#[derive(Debug, Clone)]
enum StEdit {
    /// The value at the n-th place (modulo the places there are) replaced.
    Replace(usize, serde_json::Value),
    /// The n-th place's key or item removed.
    Remove(usize),
    /// The whole file replaced by JSON-like text.
    Text(String),
    /// The file gone.
    Delete,
}

/// The loaders of the sentence-transformers folders below.
#[derive(Debug, Clone, Copy)]
enum StLoader {
    Sentence,
    Rerank,
    Sparse,
}

/// sentence-transformers folders (a sentence-transformers 6 one with Dense and Normalize, an
/// older one with a `pytorch_model.bin` Dense, a cross-encoder, and a SparseEncoder one) with one
/// of their JSON files edited: modules.json, the modules' configs, sentence_bert_config.json,
/// config_sentence_transformers.json, tokenizer.json and the rest. A folder that loads must give
/// one output per input.
#[test]
fn fuzz_sentence_transformers_folder() {
    let mut folders: Vec<(StLoader, Scratch)> = [
        ("st6_cls_dense", StLoader::Sentence),
        ("old_mean", StLoader::Sentence),
        ("cross_encoder", StLoader::Rerank),
    ]
    .into_iter()
    .map(|(name, loader)| {
        (loader, Scratch::copy_of(&fixture("sentence_transformers").join(name), &format!("fuzz-st-{name}")))
    })
    .collect();
    // The masked-LM fixture with the files of a SparseEncoder folder (sum pooling).
    let sparse = Scratch::copy_of(&fixture("pipelines/mlm"), "fuzz-st-sparse");
    let splade: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("pipelines/mlm/splade_st.json")).unwrap())
            .unwrap();
    for (name, value) in splade["variants"][1]["files"].as_object().unwrap() {
        sparse.write_json(name, value);
    }
    folders.push((StLoader::Sparse, sparse));
    // Each folder's JSON files (the references left out) and their text, restored after each case.
    let files: Vec<Vec<(String, String)>> = folders
        .iter()
        .map(|(_, root)| {
            let root = root.path();
            let mut files = Vec::new();
            let mut pending = vec![root.to_path_buf()];
            while let Some(dir) = pending.pop() {
                for entry in std::fs::read_dir(dir).unwrap().flatten() {
                    let path = entry.path();
                    let name = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                    if path.is_dir() {
                        pending.push(path);
                    } else if name.ends_with(".json")
                        && !name.starts_with("expected")
                        && !name.starts_with("splade")
                    {
                        files.push((name, std::fs::read_to_string(&path).unwrap()));
                    }
                }
            }
            files.sort();
            files
        })
        .collect();
    let edit = prop_oneof![
        6 => (any::<usize>(), st_value()).prop_map(|(n, v)| StEdit::Replace(n, v)),
        2 => any::<usize>().prop_map(StEdit::Remove),
        1 => prop_oneof![json_like(), ".{0,32}"].prop_map(StEdit::Text),
        1 => Just(StEdit::Delete),
    ];
    let inputs = (0..folders.len(), any::<prop::sample::Index>(), edit);
    fuzz("sentence-transformers folder", inputs, |(folder, file, edit)| {
        let (loader, dir) = &folders[folder];
        let dir = dir.path();
        let (file, text) = file.get(&files[folder]);
        let target = dir.join(file);
        match edit {
            StEdit::Text(text) => std::fs::write(&target, text).unwrap(),
            StEdit::Delete => std::fs::remove_file(&target).unwrap(),
            StEdit::Replace(n, _) | StEdit::Remove(n) => {
                let mut json: serde_json::Value = serde_json::from_str(text).unwrap();
                let mut paths = Vec::new();
                json_paths(&json, &mut Vec::new(), &mut paths);
                let path = &paths[n % paths.len()];
                match (&edit, path.split_last()) {
                    (StEdit::Replace(_, value), _) => *json_at(&mut json, path) = value.clone(),
                    (_, Some((last, parent))) => match json_at(&mut json, parent) {
                        serde_json::Value::Object(map) => {
                            map.remove(last.as_str().unwrap());
                        }
                        serde_json::Value::Array(items) => {
                            items.remove(last.as_u64().unwrap() as usize);
                        }
                        _ => unreachable!(),
                    },
                    (_, None) => json = serde_json::Value::Null,
                }
                std::fs::write(&target, json.to_string()).unwrap();
            }
        }
        let options = roformer::PipelineOptions::default().with_batch_size(2);
        let texts = ["a short sentence", "", "another one"];
        let loaded = match loader {
            StLoader::Rerank => roformer::Reranker::from_pretrained_with(dir, options).map(|reranker| {
                let pairs: Vec<(&str, &str)> = texts.iter().map(|t| ("the query", *t)).collect();
                if let Ok(scores) = reranker.predict(&pairs) {
                    assert_eq!(scores.len(), texts.len());
                }
            }),
            StLoader::Sentence => {
                roformer::SentenceEncoder::from_pretrained_with(dir, options).map(|encoder| {
                    if let Ok(rows) = encoder.encode(&texts) {
                        assert_eq!(rows.len(), texts.len());
                        assert!(rows.iter().all(|r| r.len() == encoder.dim()));
                    }
                })
            }
            StLoader::Sparse => roformer::SparseEncoder::from_pretrained_with(dir, options).map(|encoder| {
                if let Ok(rows) = encoder.encode(&texts) {
                    assert_eq!(rows.len(), texts.len());
                    assert!(rows.iter().flat_map(|r| &r.indices).all(|&i| (i as usize) < encoder.dim()));
                }
            }),
        };
        std::fs::write(&target, text).unwrap();
        loaded.is_ok()
    });
}
