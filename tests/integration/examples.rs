//! The examples run as a user runs them, on fixture checkpoints.

use std::path::PathBuf;
use std::process::Output;

/// The example binary that `cargo test` built beside this test (target/<profile>/examples).
pub fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap().to_path_buf();
    let path = profile_dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: run the tests with `cargo test`, which builds the examples",
        path.display()
    );
    path
}

pub fn run(name: &str, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut child = crate::support::program(example(name))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A run that fails before reading its input closes the pipe: that is its answer, not ours.
    let _ = child.stdin.take().unwrap().write_all(stdin.unwrap_or("").as_bytes());
    child.wait_with_output().unwrap()
}

/// Asserts that a run failed and said `message` on stderr; returns its stderr.
pub fn refused(out: &Output, message: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success() && stderr.contains(message), "wanted {message:?}: {stderr}");
    stderr
}

fn model(name: &str) -> String {
    crate::support::fixture(&format!("pipelines/{name}")).to_string_lossy().into_owned()
}

fn expected(name: &str) -> serde_json::Value {
    let path = crate::support::fixture(&format!("pipelines/{name}/expected.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn classify_writes_one_row_per_input_in_order_with_transformers_probabilities() {
    let want = expected("cls");
    let cases = want["texts"].as_array().unwrap();
    let mut tsv = String::from("sentence\tlabel\n");
    for (i, c) in cases.iter().enumerate() {
        tsv.push_str(&format!("{}\t{}\n", c["input"][0].as_str().unwrap(), i % 3));
    }
    let out = run(
        "classify",
        &[
            "--model",
            &model("cls"),
            "--input",
            "-",
            "--task",
            "sst2",
            "--format",
            "jsonl",
            "--batch-size",
            "4",
        ],
        Some(&tsv),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let rows: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), cases.len());
    for (i, (row, case)) in rows.iter().zip(cases).enumerate() {
        assert_eq!(row["index"], i);
        let probs: Vec<f64> =
            row["probabilities"].as_array().unwrap().iter().map(|p| p.as_f64().unwrap()).collect();
        let want: Vec<f64> = case["scores"].as_array().unwrap().iter().map(|p| p.as_f64().unwrap()).collect();
        for (p, w) in probs.iter().zip(&want) {
            assert!((p - w).abs() < 1e-4, "row {i}: {probs:?} vs {want:?}");
        }
    }
    assert!(stderr.contains("accuracy = "), "{stderr}");
    assert!(stderr.contains("1 of 10 rows were truncated"), "{stderr}");
}

#[test]
fn embed_writes_jsonl_and_npy() {
    let want = expected("sim");
    let texts: Vec<&str> = want["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    // Lines of a file: the multi-line fixture texts are single lines, the empty one stays a row.
    let input = texts.join("\n") + "\n";
    let out = run("embed", &["--model", &model("sim"), "--pooling", "mean", "--no-normalize"], Some(&input));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), texts.len());
    for (row, want) in rows.iter().zip(want["mean"].as_array().unwrap()) {
        for (a, b) in row["embedding"].as_array().unwrap().iter().zip(want.as_array().unwrap()) {
            assert!((a.as_f64().unwrap() - b.as_f64().unwrap()).abs() < 1e-4);
        }
    }
    let npy = std::env::temp_dir().join(format!("roformer-embed-{}.npy", std::process::id()));
    let out = run("embed", &["--model", &model("sim"), "--output", npy.to_str().unwrap()], Some(&input));
    assert!(out.status.success());
    let t = candle_core::Tensor::read_npy(&npy).unwrap();
    assert_eq!(t.dims(), [texts.len(), 32]);
    let _ = std::fs::remove_file(npy);
}

#[test]
fn embed_follows_a_sentence_transformers_folder_and_keeps_its_old_flags() {
    let dir = crate::support::fixture("sentence_transformers/st6_cls_dense");
    let path = dir.join("expected.json");
    let want: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let texts: Vec<&str> = want["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let input = texts.join("\n") + "\n";
    let model = dir.to_string_lossy().into_owned();
    let rows = |args: &[&str]| -> Vec<serde_json::Value> {
        let out =
            run("embed", &[&["--model", model.as_str(), "--batch-size", "2"], args].concat(), Some(&input));
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let check = |what: &str, rows: &[serde_json::Value], reference: &serde_json::Value| {
        let reference = reference.as_array().unwrap();
        assert_eq!(rows.len(), reference.len(), "{what}");
        for (i, (row, want)) in rows.iter().zip(reference).enumerate() {
            assert_eq!(row["index"], i, "{what}");
            let (ours, want) = (row["embedding"].as_array().unwrap(), want.as_array().unwrap());
            assert_eq!(ours.len(), want.len(), "{what}: row {i}");
            for (a, b) in ours.iter().zip(want) {
                assert!((a.as_f64().unwrap() - b.as_f64().unwrap()).abs() < 1e-4, "{what}: row {i}");
            }
        }
    };
    check("default prompt", &rows(&[]), &want["default"]);
    check("--prompt-name passage", &rows(&["--prompt-name", "passage"]), &want["prompt_name"]["passage"]);
    check("--prompt", &rows(&["--prompt", "literal: "]), &want["prompt"]["literal: "]);
    check("--truncate-dim 16", &rows(&["--truncate-dim", "16"]), &want["truncate_dim"]["16"]);
    // --normalize, which scripts of last month pass, is the default's alias: the folder already
    // normalizes, so nothing changes without a cut.
    check("--normalize", &rows(&["--normalize"]), &want["default"]);

    let out = run("embed", &["--model", &model, "--prompt-name", "search"], Some(&input));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("unknown prompt name `search`"), "{stderr}");
    let out = run("embed", &["--model", &model, "--normalize", "--no-normalize"], Some(&input));
    assert!(!out.status.success());
}

#[test]
fn embed_accepts_normalize_on_a_plain_checkpoint() {
    let want = expected("sim");
    let texts: Vec<&str> = want["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    let input = texts.join("\n") + "\n";
    let rows = |args: &[&str]| -> Vec<Vec<f64>> {
        let out = run(
            "embed",
            &[&["--model", model("sim").as_str(), "--pooling", "mean"], args].concat(),
            Some(&input),
        );
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["embedding"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap())
                    .collect()
            })
            .collect()
    };
    let (normalized, default) = (rows(&["--normalize"]), rows(&[]));
    assert_eq!(normalized.len(), default.len());
    for (a, b) in normalized.iter().flatten().zip(default.iter().flatten()) {
        assert!((a - b).abs() < 1e-6);
    }
    for (row, raw) in normalized.iter().zip(want["mean"].as_array().unwrap()) {
        let raw: Vec<f64> = raw.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        let norm = raw.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-12);
        for (a, b) in row.iter().zip(&raw) {
            assert!((a - b / norm).abs() < 1e-4);
        }
    }
}

#[test]
fn fill_mask_prints_candidates() {
    let out = run("fill_mask", &["--model", &model("mlm"), "--top-k", "3", "the [MASK] was good"], None);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let want = expected("mlm");
    let best = want["top5"][0][0][0][0].as_str().unwrap();
    assert!(stdout.contains(&format!("[MASK] 1: {best} (")), "{stdout}");
}

fn jsonl(out: &Output) -> Vec<serde_json::Value> {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn assert_close(what: &str, ours: &serde_json::Value, theirs: &serde_json::Value) {
    let (a, b) = (ours.as_f64().unwrap(), theirs.as_f64().unwrap());
    assert!((a - b).abs() < 1e-4, "{what}: {a} vs {b}");
}

#[test]
fn ner_writes_the_entities_of_each_row() {
    let want = expected("ner");
    let texts: Vec<&str> = want["texts"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    // The empty text is no line of a file: it stays out.
    let kept: Vec<usize> = (0..texts.len()).filter(|&i| !texts[i].is_empty()).collect();
    let tsv: String = kept.iter().map(|&i| format!("{}\n", texts[i])).collect();
    let out = run(
        "ner",
        &["--model", &model("ner"), "--aggregation-strategy", "average", "--no-header", "--batch-size", "3"],
        Some(&tsv),
    );
    let rows = jsonl(&out);
    assert_eq!(rows.len(), kept.len());
    for (n, (row, &i)) in rows.iter().zip(&kept).enumerate() {
        assert_eq!(row["index"], n);
        let ours = row["entities"].as_array().unwrap();
        let theirs = want["strategies"]["average"][i].as_array().unwrap();
        assert_eq!(ours.len(), theirs.len(), "row {n}: {ours:?} vs {theirs:?}");
        for (o, t) in ours.iter().zip(theirs) {
            for key in ["entity_group", "word", "start", "end"] {
                assert_eq!(o[key], t[key], "row {n}: {o} vs {t}");
            }
            assert_close(&format!("row {n}"), &o["score"], &t["score"]);
        }
    }
    let out = run("ner", &["--model", &model("ner"), "--aggregation-strategy", "grouped"], Some("a text\n"));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown aggregation strategy `grouped`"));
}

#[test]
fn qa_writes_one_answer_or_the_best_answers_of_each_row() {
    let want = expected("qa");
    let cases = want["cases"].as_array().unwrap();
    let field = |c: &serde_json::Value, k: &str| c[k].as_str().unwrap().to_string();
    // The cases transformers answered with top_k 3 and otherwise default arguments.
    let top3: Vec<&serde_json::Value> =
        cases.iter().filter(|c| c["options"] == serde_json::json!({"top_k": 3})).collect();
    assert!(top3.len() >= 2);
    // Line 2 has an empty question: a bad line, skipped, and the rows after it keep their index.
    let mut tsv = format!("{}\t{}\n\tno question\n", field(top3[0], "question"), field(top3[0], "context"));
    for c in &top3[1..] {
        tsv.push_str(&format!("{}\t{}\n", field(c, "question"), field(c, "context")));
    }
    let args = ["--model", &model("qa"), "--no-header", "--top-k", "3", "--skip-bad-lines"];
    let out = run("qa", &args, Some(&tsv));
    assert!(String::from_utf8_lossy(&out.stderr).contains("skipped -:2: the question is empty"));
    let rows = jsonl(&out);
    assert_eq!(rows.len(), top3.len());
    for (row, (case, index)) in rows.iter().zip(top3.iter().zip([0].into_iter().chain(2..))) {
        assert_eq!(row["index"], index);
        let (ours, theirs) = (row["answers"].as_array().unwrap(), case["answers"].as_array().unwrap());
        assert_eq!(ours.len(), theirs.len());
        for (o, t) in ours.iter().zip(theirs) {
            for key in ["answer", "start", "end"] {
                assert_eq!(o[key], t[key], "row {index}: {o} vs {t}");
            }
            assert_close(&format!("row {index}"), &o["score"], &t["score"]);
        }
    }
    // Without --skip-bad-lines the line is named and nothing is answered.
    let out = run("qa", &args[..5], Some(&tsv));
    assert!(!out.status.success() && out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("-:2: the question is empty"));

    // top_k 1: the answer's fields on the row itself, context first when the columns say so.
    let case = cases.iter().find(|c| c["options"] == serde_json::json!({})).unwrap();
    let tsv = format!("context\tquestion\n{}\t{}\n", field(case, "context"), field(case, "question"));
    let out =
        run("qa", &["--model", &model("qa"), "--text-col", "question", "--pair-col", "context"], Some(&tsv));
    let rows = jsonl(&out);
    let t = &case["answers"][0];
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (&rows[0]["index"], &rows[0]["answer"], &rows[0]["start"]),
        (&0.into(), &t["answer"], &t["start"])
    );
    assert_eq!(rows[0]["end"], t["end"]);
    assert_close("top_k 1", &rows[0]["score"], &t["score"]);
}

#[test]
fn an_output_that_cannot_be_created_fails_before_the_model_loads_and_names_the_path() {
    // The model does not exist either: the error must be the output's, so the output came first.
    let missing_model = "/nonexistent/roformer-model";
    let (jsonl, npy) = ("/nonexistent/roformer-out/out.jsonl", "/nonexistent/roformer-out/out.npy");
    let cases: [(&str, &str, &[&str]); 6] = [
        ("classify", jsonl, &["--input", "-", "--task", "sst2"]),
        ("embed", jsonl, &[]),
        ("embed", npy, &[]),
        ("ner", jsonl, &[]),
        ("qa", jsonl, &[]),
        ("paraphrase", jsonl, &[]),
    ];
    for (name, output, extra) in cases {
        let args = [&["--model", missing_model, "--output", output][..], extra].concat();
        let stderr = refused(&run(name, &args, Some("a text\tanother\n")), &format!("creating {output}"));
        assert!(!stderr.contains("roformer-model"), "{name} loaded the model first: {stderr}");
    }

    // The fine-tuning's folder is made before the checkpoint is opened, not at the first epoch.
    let dir = std::env::temp_dir().join(format!("roformer-finetune-out-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (train, file) = (dir.join("train.tsv"), dir.join("a-file"));
    std::fs::write(&train, "sentence\tlabel\ngood\t1\nbad\t0\n").unwrap();
    std::fs::write(&file, "").unwrap();
    let args = ["--model", missing_model, "--train", train.to_str().unwrap(), "--task", "sst2"];
    let out = run("finetune", &[&args[..], &["--output", file.to_str().unwrap()]].concat(), None);
    refused(&out, &format!("creating the folder {}", file.display()));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn embed_refuses_a_ranking_into_npy_before_it_loads() {
    let out = run(
        "embed",
        &["--model", "/nonexistent/roformer-model", "--query", "q", "--output", "/tmp/rank.npy"],
        Some("a text\n"),
    );
    refused(&out, "--query writes a ranking as text lines, not a matrix: --output /tmp/rank.npy");
}

/// /dev/full takes the file's creation and refuses every write (ENOSPC): the error names the file.
#[cfg(target_os = "linux")]
#[test]
fn a_write_that_fails_names_the_output() {
    let args = ["--model", &model("cls"), "--input", "-", "--no-header", "--output", "/dev/full"];
    refused(&run("classify", &args, Some("a good film\n")), "writing /dev/full: ");
    let out = run("embed", &["--model", &model("sim"), "--output", "/dev/full"], Some("a text\n"));
    refused(&out, "writing /dev/full: ");
}

#[test]
fn mlm_accuracy_writes_a_line_per_length_and_refuses_zero_windows() {
    let text = std::env::temp_dir().join(format!("roformer-mlm-accuracy-{}.txt", std::process::id()));
    std::fs::write(&text, "the cat sat on the mat and the dog ran far away from home today\n").unwrap();
    let args = ["--model", &model("mlm"), "--input", text.to_str().unwrap(), "--lengths", "8,10"];
    let rows = jsonl(&run("mlm_accuracy", &args, None));
    assert_eq!(rows.iter().map(|r| r["length"].as_u64().unwrap()).collect::<Vec<_>>(), [8, 10]);
    for row in &rows {
        let accuracy = row["accuracy"].as_f64().unwrap();
        assert!(row["windows"].as_u64().unwrap() >= 1 && (0.0..=1.0).contains(&accuracy), "{row}");
    }
    let out = run("mlm_accuracy", &[&args[..], &["--max-windows", "0"]].concat(), None);
    refused(&out, "'--max-windows <MAX_WINDOWS>'");
    let _ = std::fs::remove_file(text);
}

#[test]
fn finetune_names_the_file_and_line_of_a_label_the_model_lacks_and_can_skip_it() {
    let dir = std::env::temp_dir().join(format!("roformer-finetune-labels-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (train, output) = (dir.join("train.tsv"), dir.join("out"));
    std::fs::write(&train, "sentence\tlabel\na great film\tpositive\nhard to say\tmaybe\ndull\tnegative\n")
        .unwrap();
    let model = crate::support::fixture("finetune/model");
    let args = [
        "--model",
        model.to_str().unwrap(),
        "--train",
        train.to_str().unwrap(),
        "--text-col",
        "sentence",
        "--label-col",
        "label",
        "--epochs",
        "1",
        "--output",
        output.to_str().unwrap(),
    ];
    let message = format!("{}:3: label `maybe` is neither in the model's label2id", train.display());
    refused(&run("finetune", &args, None), &format!("error: {message}"));
    let out = run("finetune", &[&args[..], &["--skip-bad-lines"]].concat(), None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains(&format!("skipped {message}")), "{stderr}");
    assert!(stderr.contains("2 training examples"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}
