//! Token classification and question answering against transformers' pipelines (5.23 for NER,
//! 4.57.1 for QA) on the fixtures of scripts/fixtures/make_ner_qa_fixtures.py: texts and offsets equal,
//! scores within 1e-4.

use roformer::{
    AggregationStrategy, Error, QuestionAnswerer, QuestionAnswererOptions, TokenClassifier,
    TokenClassifierOptions,
};
use serde_json::Value;

use crate::support::{fixture, on_device, Scratch};

fn dir(name: &str) -> std::path::PathBuf {
    fixture(&format!("pipelines/{name}"))
}

pub fn expected(name: &str) -> Value {
    let path = fixture(&format!("pipelines/{name}/expected.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap()
}

fn num(v: &Value) -> usize {
    v.as_u64().unwrap() as usize
}

/// The QA case's arguments, as transformers took them.
pub fn qa_options(args: &Value) -> QuestionAnswererOptions {
    let mut options = QuestionAnswererOptions::default();
    for (key, value) in args.as_object().unwrap() {
        options = match key.as_str() {
            "top_k" => options.with_top_k(num(value)),
            "max_answer_len" => options.with_max_answer_len(num(value)),
            "max_seq_len" => options.with_max_seq_len(num(value)),
            "doc_stride" => options.with_doc_stride(num(value)),
            "handle_impossible_answer" => options.with_handle_impossible_answer(value.as_bool().unwrap()),
            other => panic!("the fixture has an argument {other} the test does not pass on"),
        };
    }
    options
}

#[test]
fn entities_match_transformers_for_every_aggregation_strategy() {
    // English with WordPiece, and Chinese with jieba.
    for checkpoint in ["ner", "ner_zh"] {
        entities_match(checkpoint);
    }
}

fn entities_match(checkpoint: &str) {
    let want = expected(checkpoint);
    let texts: Vec<&str> = want["texts"].as_array().unwrap().iter().map(str_of).collect();
    // A batch size that splits the texts unevenly, so that length sorting and reordering run.
    let ner = TokenClassifier::from_pretrained_with(dir(checkpoint), on_device().with_batch_size(3)).unwrap();
    let mut grouped = 0;
    for (name, rows) in want["strategies"].as_object().unwrap() {
        let strategy: AggregationStrategy = name.parse().unwrap();
        let options = TokenClassifierOptions::default().with_aggregation_strategy(strategy);
        let got = ner.classify_with(&texts, &options).unwrap();
        assert_eq!(got.len(), texts.len());
        for ((text, ours), theirs) in texts.iter().zip(&got).zip(rows.as_array().unwrap()) {
            let theirs = theirs.as_array().unwrap();
            let what = format!("{checkpoint} {name} {text:?}");
            assert_eq!(ours.len(), theirs.len(), "{what}: {ours:#?}\nwant {theirs:#?}");
            for (o, t) in ours.iter().zip(theirs) {
                let label =
                    if strategy == AggregationStrategy::None { &t["entity"] } else { &t["entity_group"] };
                assert_eq!(o.entity, str_of(label), "{what}: {o:?} vs {t}");
                assert_eq!(o.word, str_of(&t["word"]), "{what}: {o:?} vs {t}");
                assert_eq!((o.start, o.end), (num(&t["start"]), num(&t["end"])), "{what}: {o:?} vs {t}");
                assert_eq!(o.index, t.get("index").map(num), "{what}: {o:?} vs {t}");
                let diff = (f64::from(o.score) - t["score"].as_f64().unwrap()).abs();
                assert!(diff < 1e-4, "{what}: score {o:?} vs {t}");
                grouped += usize::from(o.word.contains(' '));
            }
        }
    }
    assert!(grouped > 0, "no entity of {checkpoint} groups several words: the grouping went untested");
}

#[test]
fn ignore_labels_leave_out_what_they_name() {
    let ner = TokenClassifier::from_pretrained_with(dir("ner"), on_device()).unwrap();
    let text = ["John Smith lives in New York and works for Google."];
    let all =
        ner.classify_with(&text, &TokenClassifierOptions::default().with_ignore_labels::<&str>([])).unwrap();
    let default = ner.classify(&text).unwrap();
    let without_o: Vec<_> = all[0].iter().filter(|e| e.entity != "O").cloned().collect();
    assert_eq!(default[0], without_o);
    assert!(all[0].len() > default[0].len(), "the fixture text has O tokens");
}

#[test]
fn answers_match_transformers() {
    let want = expected("qa");
    let qa = QuestionAnswerer::from_pretrained_with(dir("qa"), on_device().with_batch_size(2)).unwrap();
    let cases = want["cases"].as_array().unwrap();
    assert!(
        cases.iter().any(|c| num(&c["windows"]) > 2),
        "a context of the fixture must need several windows"
    );
    for case in cases {
        let (question, context) = (str_of(&case["question"]), str_of(&case["context"]));
        let got = qa.answer_with(&[(question, context)], &qa_options(&case["options"])).unwrap();
        let theirs = case["answers"].as_array().unwrap();
        let what = format!("{question:?} {}", case["options"]);
        assert_eq!(got[0].len(), theirs.len(), "{what}: {:#?}\nwant {theirs:#?}", got[0]);
        for (o, t) in got[0].iter().zip(theirs) {
            assert_eq!(o.answer, str_of(&t["answer"]), "{what}: {o:?} vs {t}");
            assert_eq!((o.start, o.end), (num(&t["start"]), num(&t["end"])), "{what}: {o:?} vs {t}");
            let diff = (f64::from(o.score) - t["score"].as_f64().unwrap()).abs();
            assert!(diff < 1e-4, "{what}: score {o:?} vs {t}");
        }
    }
    // Batched together, the answers are those of each pair alone.
    let pairs: Vec<(&str, &str)> =
        cases.iter().map(|c| (str_of(&c["question"]), str_of(&c["context"]))).collect();
    let batched = qa.answer(&pairs).unwrap();
    for (case, got) in cases.iter().zip(&batched) {
        let alone = qa.answer(&[(str_of(&case["question"]), str_of(&case["context"]))]).unwrap();
        assert_eq!(got, &alone[0]);
    }
}

#[test]
fn bad_questions_contexts_and_options_are_errors() {
    let qa = QuestionAnswerer::from_pretrained_with(dir("qa"), on_device()).unwrap();
    for (question, context, field) in [("", "some context", "question"), ("a question ?", " ", "context")] {
        let err = qa.answer(&[("fine ?", "fine"), (question, context)]).unwrap_err();
        assert!(matches!(err, Error::Input(_)), "{err:?}");
        assert!(err.to_string().contains(&format!("pair 1: the {field} is empty")), "{err}");
    }
    let pair = [("who ?", "John Smith lives in New York and works for Google as an engineer.")];
    for (options, says, option) in [
        (QuestionAnswererOptions::default().with_top_k(0), "top_k", Some("top_k")),
        (QuestionAnswererOptions::default().with_max_answer_len(0), "max_answer_len", Some("max_answer_len")),
        (
            QuestionAnswererOptions::default().with_max_seq_len(16).with_doc_stride(20),
            "doc_stride (20)",
            Some("doc_stride"),
        ),
        // Room for 16 - 3 - 2 = 11 context tokens a window, which a stride of 11 never leaves.
        (QuestionAnswererOptions::default().with_max_seq_len(16).with_doc_stride(11), "stride (11)", None),
    ] {
        let err = qa.answer_with(&pair, &options).unwrap_err();
        assert!(err.to_string().contains(says), "{says}: {err}");
        if let Some(want) = option {
            assert!(matches!(&err, Error::InvalidOption { option, .. } if option == want), "{err:?}");
            // The same refusal without a model, as a program checks its flags before loading one.
            assert_eq!(options.validate().unwrap_err().to_string(), err.to_string());
        } else {
            assert!(options.validate().is_ok(), "{says}: the window's room depends on the question");
        }
    }
    let out = crate::examples::run(
        "qa",
        &["--model", "/nonexistent/qa", "--no-header", "--max-answer-len", "0"],
        Some("q\tc\n"),
    );
    crate::examples::refused(&out, "error: invalid option: max_answer_len");
}

#[test]
fn a_token_classifier_needs_a_token_classification_checkpoint_with_labels() {
    let scratch = Scratch::copy_of(&dir("ner"), "ner-no-labels");
    scratch.edit_config(|c| {
        let c = c.as_object_mut().unwrap();
        c.remove("id2label");
        c.remove("label2id");
        c.insert("num_labels".into(), 7.into());
    });
    let err = TokenClassifier::from_pretrained_with(scratch.path(), on_device()).unwrap_err();
    assert!(matches!(&err, Error::Config { field, .. } if field == "id2label"), "{err:?}");
    assert!(err.to_string().contains("config.json"), "{err}");

    let err = TokenClassifier::from_pretrained_with(dir("cls"), on_device()).unwrap_err();
    assert!(matches!(&err, Error::MissingTensor { tensor, .. } if tensor == "classifier.weight"), "{err:?}");

    let err = "grouped".parse::<AggregationStrategy>().unwrap_err();
    assert!(
        matches!(&err, Error::InvalidOption { option, .. } if option == "aggregation_strategy")
            && err.to_string().contains("unknown aggregation strategy `grouped`")
    );
}
