//! Bad input, fed as a user feeds it (through the library or the example binaries): each case
//! gets a clear error naming what is wrong, or every row of output, in order.

use candle_core::{DType, Device, Tensor};
use roformer::{load_dir, Config, Error, PipelineOptions, RoFormerForSequenceClassification, TextClassifier};

use crate::app::glue::{self, Columns, Task};
use crate::app::tsv;
use crate::examples::run;
use crate::support::{fixture, Scratch};

fn cls() -> std::path::PathBuf {
    fixture("pipelines/cls")
}

fn cls_arg() -> String {
    cls().to_string_lossy().into_owned()
}

const BUNDLED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/models/roformer-sst2");

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn read(
    text: &str,
    columns: Option<&Columns>,
    header: Option<bool>,
    skip: bool,
) -> anyhow::Result<tsv::Dataset> {
    tsv::read_tsv(text.as_bytes(), "in.tsv", columns, header, skip)
}

fn texts(data: &tsv::Dataset) -> Vec<(usize, &str)> {
    data.rows.iter().map(|r| (r.index, r.text.as_str())).collect()
}

// ---- The TSV reader ----

#[test]
fn every_line_ending_reads_the_same_rows() {
    let sst2 = Task::Sst2.columns();
    for text in [
        "sentence\tlabel\na b\t1\nc d\t0\n",
        "sentence\tlabel\r\na b\t1\r\nc d\t0\r\n",
        "sentence\tlabel\ra b\t1\rc d\t0\r",
        "sentence\tlabel\ra b\t1\r\nc d\t0",
    ] {
        let data = read(text, Some(&sst2), Some(true), false).unwrap();
        assert_eq!(texts(&data), [(0, "a b"), (1, "c d")], "{text:?}");
        assert_eq!(data.rows[1].label.as_deref(), Some("0"));
    }
}

#[test]
fn blank_lines_inside_are_bad_lines_and_skipping_keeps_row_numbers() {
    let sst2 = Task::Sst2.columns();
    let text = "sentence\tlabel\none\t1\n\nthree\t0\nno label\nfive\t1\n\n\n";
    let err = read(text, Some(&sst2), Some(true), false).unwrap_err();
    assert_eq!(err.to_string(), "in.tsv:3: blank line");
    let data = read(text, Some(&sst2), Some(true), true).unwrap();
    // Rows keep their input numbers; the trailing blank lines are not rows at all.
    assert_eq!(texts(&data), [(0, "one"), (2, "three"), (4, "five")]);
    let skipped: Vec<usize> = data.skipped.iter().map(|b| b.line).collect();
    assert_eq!(skipped, [3, 5]);
}

#[test]
fn line_one_is_never_guessed_silently() {
    // A headerless file of sentences whose first text reads like a column name keeps that row.
    let data = read("text\nsecond sentence\n", None, None, false).unwrap();
    assert_eq!(texts(&data), [(0, "text"), (1, "second sentence")]);
    assert!(data.header_note.as_deref().unwrap().contains("line 1 read as data"));
    // --header and --no-header decide it, and nothing is said.
    let data = read("text\nsecond\n", None, Some(true), false).unwrap();
    assert_eq!((texts(&data), data.header_note.as_deref()), (vec![(0, "second")], None));
    // A header of unknown names is data unless the user says otherwise, and the run says so.
    let data = read("my words\nhello\n", None, None, false).unwrap();
    assert_eq!(data.rows.len(), 2);
    // Columns by position with a GLUE header: taken as the header, and announced.
    let columns = Columns { text: glue::Column::Index(1), pair: None, label: None };
    let data = read("index\tsentence\n0\tfine\n", Some(&columns), None, false).unwrap();
    assert_eq!(texts(&data), [(0, "fine")]);
    assert!(data.header_note.as_deref().unwrap().contains("taken as the header"));
    // CoLA's files have no header: its task says so.
    let cola = "gj04\t1\t\tOur friends won't buy this analysis.\ngj04\t0\t*\tThey drank the pub.\n";
    let data = read(cola, Some(&Task::Cola.columns()), Some(Task::Cola.has_header()), false).unwrap();
    assert_eq!(data.rows.len(), 2);
}

#[test]
fn several_columns_need_a_choice_and_the_error_lists_them() {
    let mrpc = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tA b.\tA c.\n";
    let err = read(mrpc, None, None, false).unwrap_err().to_string();
    assert!(err.contains("5 tab-separated columns") && err.contains("3: `#1 String`"), "{err}");
    let out = run("classify", &["--model", &cls_arg(), "--input", "-"], Some(mrpc));
    assert!(!out.status.success() && stdout(&out).is_empty());
    assert!(stderr(&out).contains("--text-col"), "{}", stderr(&out));
    // With the task, its columns are read.
    let data = read(mrpc, Some(&Task::Mrpc.columns()), Some(true), false).unwrap();
    assert_eq!(data.rows[0].pair.as_deref(), Some("A c."));
}

#[test]
fn pair_and_label_columns_without_a_text_column_are_errors() {
    let err = Columns::select(None, None, Some("1".parse().unwrap()), None).unwrap_err();
    assert!(err.to_string().contains("--pair-col and --label-col need --text-col"), "{err}");
    let out = run("classify", &["--model", &cls_arg(), "--input", "-", "--label-col", "1"], Some("a\t1\n"));
    assert!(!out.status.success());
    assert!(stderr(&out).contains("need --text-col"), "{}", stderr(&out));
    // With a task, they override the task's own.
    let columns = Columns::select(Some(Task::Sst2), None, None, Some("2".parse().unwrap())).unwrap().unwrap();
    assert_eq!(columns.label, Some(glue::Column::Index(2)));
}

#[test]
fn long_lines_binary_data_and_bad_utf8_are_named() {
    let long = format!("sentence\nshort\n{}\nafter\n", "a".repeat(tsv::MAX_LINE_BYTES + 1));
    let columns = Task::Sst2.columns();
    let err = read(&long, Some(&columns), Some(true), false).unwrap_err();
    assert!(err.to_string().starts_with("in.tsv:3: longer than"), "{err}");
    let data = read(&long, Some(&columns), Some(true), true).unwrap();
    assert_eq!(texts(&data), [(0, "short"), (2, "after")]);

    let err =
        tsv::read_tsv(&b"sentence\nok\nbin\0ary\n"[..], "x", Some(&columns), Some(true), true).unwrap_err();
    assert!(err.to_string().contains("x:3: a NUL byte"), "{err}");
    let data =
        tsv::read_tsv(&b"sentence\nok\n\xff\xfe\n"[..], "x", Some(&columns), Some(true), true).unwrap();
    assert_eq!(data.skipped[0].line, 3);
    assert!(data.skipped[0].message.contains("not UTF-8"));

    // An endless stream of zeros ends at once with an error, not in an abort.
    let out = run("classify", &["--model", &cls_arg(), "--input", "/dev/zero"], None);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("/dev/zero:1: a NUL byte"), "{}", stderr(&out));
}

#[test]
fn a_bad_label_names_its_line_before_any_output() {
    let tsv = "sentence\tlabel\ngood\tpositive\nbad\tmaybe\n";
    let out = run(
        "classify",
        &["--model", &cls_arg(), "--input", "-", "--task", "sst2", "--format", "jsonl"],
        Some(tsv),
    );
    assert!(!out.status.success());
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
    assert!(stderr(&out).contains("-:3: label `maybe`"), "{}", stderr(&out));
    let out = run(
        "classify",
        &["--model", &cls_arg(), "--input", "-", "--task", "sst2", "--format", "jsonl", "--skip-bad-lines"],
        Some(tsv),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("skipped -:3: label `maybe`"));
    assert_eq!(stdout(&out).lines().count(), 1);
}

#[test]
fn skipped_lines_keep_the_output_indices_of_the_input() {
    let tsv = "sentence\tlabel\ngood\t1\nno label column\nbad\t0\n";
    let out = run("classify", &["--model", BUNDLED, "--input", "-", "--task", "sst2"], Some(tsv));
    assert!(!out.status.success());
    assert!(stderr(&out).contains("-:3"), "the error names the line: {}", stderr(&out));

    let out = run(
        "classify",
        &["--model", BUNDLED, "--input", "-", "--task", "sst2", "--skip-bad-lines"],
        Some(tsv),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("skipped -:3"), "{}", stderr(&out));
    let lines: Vec<String> = stdout(&out).lines().map(str::to_string).collect();
    assert_eq!(lines[0], "index\tprediction");
    let indices: Vec<&str> = lines[1..].iter().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(indices, ["0", "2"]);
}

#[test]
fn glue_submissions_hold_the_values_the_glue_server_expects() {
    // The bundled model's labels are names; SST-2's server wants 0 and 1.
    let tsv = "index\tsentence\n0\ta gorgeous , witty , seductive movie .\n1\ta chore to sit through .\n";
    let out = run("classify", &["--model", BUNDLED, "--input", "-", "--task", "sst2"], Some(tsv));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "index\tprediction\n0\t1\n1\t0\n");
    // JSONL keeps the model's label names.
    let out = run(
        "classify",
        &["--model", BUNDLED, "--input", "-", "--task", "sst2", "--format", "jsonl"],
        Some(tsv),
    );
    let first: serde_json::Value = serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
    assert_eq!(first["label"], "positive");

    let config = |labels: &[&str]| {
        let id2label: serde_json::Map<String, serde_json::Value> =
            labels.iter().enumerate().map(|(i, l)| (i.to_string(), (*l).into())).collect();
        Config::from_json(&serde_json::json!({ "id2label": id2label }).to_string()).unwrap()
    };
    let values = |task, labels: &[&str]| glue::submission_labels(task, &config(labels)).unwrap().unwrap();
    assert_eq!(
        values(Task::Mnli, &["contradiction", "entailment", "neutral"]),
        ["contradiction", "entailment", "neutral"]
    );
    assert_eq!(
        values(Task::Mnli, &["LABEL_0", "LABEL_1", "LABEL_2"]),
        ["entailment", "neutral", "contradiction"]
    );
    assert_eq!(values(Task::Qnli, &["not_entailment", "entailment"]), ["not_entailment", "entailment"]);
    assert_eq!(values(Task::Rte, &["LABEL_0", "LABEL_1"]), ["entailment", "not_entailment"]);
    assert_eq!(values(Task::Cola, &["unacceptable", "acceptable"]), ["0", "1"]);
    let err = glue::submission_labels(Task::Sst2, &config(&["a", "b", "c"])).unwrap_err();
    assert!(err.to_string().contains("3 classes"), "{err}");
    assert!(glue::submission_labels(Task::Stsb, &config(&["LABEL_0"])).unwrap().is_none());
}

#[test]
fn format_and_output_apply_without_input() {
    let out = run("classify", &["--model", BUNDLED, "--format", "jsonl"], None);
    assert!(out.status.success(), "{}", stderr(&out));
    let rows: Vec<serde_json::Value> =
        stdout(&out).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), 6);
    assert_eq!(rows[5]["index"], 5);
    let file = std::env::temp_dir().join(format!("roformer-builtin-{}.tsv", std::process::id()));
    let out = run("classify", &["--model", BUNDLED, "--output", file.to_str().unwrap()], None);
    assert!(out.status.success() && stdout(&out).is_empty());
    let written = std::fs::read_to_string(&file).unwrap();
    assert_eq!(written.lines().count(), 7, "{written}");
    let _ = std::fs::remove_file(file);
}

// ---- Loading ----

#[test]
fn unused_encoder_layers_mean_the_config_disagrees_with_the_weights() {
    let scratch = Scratch::copy_of(&cls(), "layers");
    scratch.edit_config(|c| c["num_hidden_layers"] = 1.into());
    let err = TextClassifier::from_pretrained(scratch.path()).unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, Error::Checkpoint { .. }), "{err}");
    assert!(
        message.contains("encoder-layer tensors are not used") && message.contains("encoder.layer.1."),
        "{message}"
    );
    let out = run("classify", &["--model", &scratch.arg()], None);
    assert!(!out.status.success() && stderr(&out).contains("encoder.layer.1."));

    // Other unused tensors are a warning, as in transformers: a classifier read as a bare encoder.
    let out = run("embed", &["--model", &cls_arg(), "--input", "-"], Some("a sentence\n"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warn: ") && stderr(&out).contains("classifier.out_proj.weight"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn integer_and_non_finite_weights_are_refused_naming_the_tensor() {
    let name = "roformer.encoder.layer.0.attention.self.query.weight";
    // F32 bytes relabelled I32 in the header: same size, silently converted before.
    let scratch = Scratch::copy_of(&cls(), "int");
    let file = scratch.path().join("model.safetensors");
    let mut bytes = std::fs::read(&file).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    header[name]["dtype"] = "I32".into();
    let mut text = serde_json::to_string(&header).unwrap();
    assert!(text.len() <= len);
    text.push_str(&" ".repeat(len - text.len()));
    bytes[8..8 + len].copy_from_slice(text.as_bytes());
    std::fs::write(&file, bytes).unwrap();
    let err = TextClassifier::from_pretrained(scratch.path()).unwrap_err().to_string();
    assert!(err.contains(name) && err.contains("stored as I32"), "{err}");

    let scratch = Scratch::copy_of(&cls(), "nan");
    scratch.edit_weights(|t| {
        let mut v = t[name].flatten_all().unwrap().to_vec1::<f32>().unwrap();
        v[5] = f32::NAN;
        t.insert(name.into(), Tensor::from_vec(v, t[name].dims(), &Device::Cpu).unwrap());
    });
    let err = TextClassifier::from_pretrained(scratch.path()).unwrap_err().to_string();
    assert!(err.contains(name) && err.contains("non-finite") && err.contains("index 5"), "{err}");
    let scratch = Scratch::copy_of(&cls(), "inf");
    scratch.edit_weights(|t| {
        let w = (t["classifier.dense.bias"].clone() * f64::INFINITY).unwrap();
        t.insert("classifier.dense.bias".into(), w);
    });
    let err =
        load_dir::<RoFormerForSequenceClassification>(scratch.path(), DType::F32, &Device::Cpu).unwrap_err();
    assert!(err.to_string().contains("classifier.dense.bias"), "{err}");
}

#[test]
fn a_vocabulary_larger_than_the_embeddings_is_refused_at_load() {
    let scratch = Scratch::copy_of(&cls(), "vocab");
    let vocab = scratch.path().join("vocab.txt");
    let mut text = std::fs::read_to_string(&vocab).unwrap();
    for i in 0..5 {
        text.push_str(&format!("extra{i}\n"));
    }
    std::fs::write(&vocab, text).unwrap();
    let err = TextClassifier::from_pretrained(scratch.path()).unwrap_err();
    let message = err.to_string();
    assert!(matches!(&err, Error::Vocab { path, .. } if path == &vocab), "{err}");
    assert!(message.contains("1136 tokens") && message.contains("vocab_size is 1131"), "{message}");
}

// ---- Sizes ----

#[test]
fn huge_sizes_are_config_errors_or_work_never_aborts() {
    for (field, value) in [
        ("intermediate_size", 1u64 << 60),
        ("hidden_size", 1 << 32),
        ("vocab_size", u64::MAX),
        ("num_hidden_layers", 1 << 60),
    ] {
        let mut json = serde_json::json!({"vocab_size": 100, "hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64});
        json[field] = value.into();
        let err = Config::from_json(&json.to_string()).unwrap_err();
        assert!(matches!(&err, Error::Config { field: f, .. } if f == field), "{field}: {err}");
        assert!(err.to_string().contains("overflow"), "{field}: {err}");
    }
    // A huge max_position_embeddings costs nothing: rotary tables are built for the length in use.
    for value in [1_000_000_000u64, 1 << 60, u64::MAX] {
        let scratch = Scratch::copy_of(&cls(), &format!("positions-{value}"));
        scratch.edit_config(|c| c["max_position_embeddings"] = value.into());
        let classifier = TextClassifier::from_pretrained_with(
            scratch.path(),
            PipelineOptions::default().with_max_length(64),
        )
        .unwrap();
        let reference = TextClassifier::from_pretrained(cls()).unwrap();
        assert_eq!(
            classifier.classify(&["a fine film"]).unwrap(),
            reference.classify(&["a fine film"]).unwrap()
        );
    }
}

#[test]
fn attention_that_would_not_fit_is_an_error_before_allocating() {
    // f16 takes the unblocked path, which would hold 2 heads × 34k² scores (4.3 GiB).
    let options = PipelineOptions::default().with_dtype(DType::F16).with_max_length(40_000);
    let classifier = TextClassifier::from_pretrained_with(cls(), options).unwrap();
    let long = "good ".repeat(34_000);
    let err = classifier.classify(&[long.as_str()]).unwrap_err().to_string();
    assert!(err.contains("GiB of scores") && err.contains("use f32 on the CPU"), "{err}");
    // The f32 CPU path is blocked: the same input runs, in memory linear in its length.
    let classifier =
        TextClassifier::from_pretrained_with(cls(), PipelineOptions::default().with_max_length(40_000))
            .unwrap();
    let out = classifier.classify(&[long.as_str(), "good"]).unwrap();
    assert_eq!(out.len(), 2);
    assert!(out[0].scores.iter().all(|p| p.is_finite()));
}

// ---- Paths ----

#[test]
fn shard_names_must_stay_inside_the_checkpoint_folder() {
    let scratch = Scratch::copy_of(&crate::support::model_fixture("base_sharded"), "escape");
    let index = scratch.redirect_a_shard("../other/x.safetensors");
    let err = load_dir::<roformer::RoFormerModel>(scratch.path(), DType::F32, &Device::Cpu).unwrap_err();
    assert!(matches!(&err, Error::Checkpoint { path, .. } if path == &index), "{err}");
    assert!(err.to_string().contains("outside the folder"), "{err}");
}

#[test]
fn a_missing_folder_that_looks_like_a_path_is_named_once() {
    // `tests/nope` could be a Hub id, but its first part is a folder here.
    let out = run("classify", &["--model", "tests/nope"], None);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("tests/nope: no such folder"), "{err}");
    assert_eq!(err.matches("no such folder").count(), 1, "the cause is printed once: {err}");
    let err = TextClassifier::from_pretrained("./missing-model").unwrap_err();
    assert!(err.to_string().contains("no such folder"), "{err}");
    let err = TextClassifier::from_pretrained_with(
        "org/model",
        PipelineOptions::default().with_revision("../../x"),
    )
    .unwrap_err();
    assert!(err.to_string().contains("invalid revision"), "{err}");
}

#[test]
fn embed_says_it_is_reading_a_terminal() {
    // util-linux's `script` gives embed a terminal for stdin; the sentence and Ctrl-D arrive through it.
    let command = format!(
        "{} {} --model {}",
        crate::support::runner().join(" "),
        crate::examples::example("embed").display(),
        fixture("pipelines/sim").display()
    );
    let mut child = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("`script` (util-linux) runs the example on a terminal");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"a sentence\n\x04").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("reading sentences from the terminal"), "{text}");
    assert_eq!(text.matches("\"embedding\"").count(), 1, "{text}");
}
