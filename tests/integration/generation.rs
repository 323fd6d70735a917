//! Generation against junnyu's own `generate` (sim checkpoints, UniLM) and a plain torch decoder
//! (causal), from scripts/fixtures/make_generation_fixtures.py; sampling and the paraphrase pipeline.

use candle_core::DType;
use roformer::{
    load_dir, GenerationMode, GenerationOptions, Paraphraser, PipelineOptions, RoFormerForCausalLM, Sampling,
};
use serde_json::Value;

use crate::support::{device, model_fixture};

fn reference(folder: &str) -> Value {
    let path = model_fixture(folder).join("generation.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn ids(value: &Value) -> Vec<u32> {
    value.as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect()
}

fn sim() -> RoFormerForCausalLM {
    load_dir(model_fixture("sim_generation"), DType::F32, device()).unwrap()
}

fn greedy(reference: &Value) -> GenerationOptions {
    let options = GenerationOptions::default()
        .with_max_new_tokens(reference["max_new_tokens"].as_u64().unwrap() as usize);
    match reference["eos_token_id"].as_u64() {
        Some(eos) => options.with_eos_token_id(eos as u32),
        None => options,
    }
}

const SAMPLING: Sampling = Sampling::Sample { temperature: 1.0, top_k: None, top_p: 0.95 };

#[test]
fn sim_greedy_generation_matches_junnyus_generate() {
    let reference = reference("sim_generation");
    let model = sim();
    assert_eq!(model.generation_mode(), GenerationMode::SourceThenTarget);
    let cases = reference["cases"].as_array().unwrap();
    assert!(cases.len() >= 8);
    let mut ended = 0;
    for case in cases {
        let want = ids(&case["ids"]);
        let got = model.generate(&ids(&case["source_ids"]), &greedy(&reference)).unwrap();
        assert_eq!(got, std::slice::from_ref(&want), "{}", case["text"]);
        ended += usize::from(want.len() < 12);
    }
    assert!(ended >= 3, "the fixture should hold samples that end with [SEP]: {ended}");
}

#[test]
fn the_unilm_layout_matters() {
    // A plain causal mask with token type 0 on generated tokens (transformers' RoFormerForCausalLM)
    // gives other tokens on the sim checkpoint.
    let reference = reference("sim_generation");
    let model = sim();
    let causal = greedy(&reference).with_mode(GenerationMode::Causal);
    let differ = reference["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|case| model.generate(&ids(&case["source_ids"]), &causal).unwrap()[0] != ids(&case["ids"]))
        .count();
    assert!(differ > 0, "causal decoding matched UniLM decoding on every source");
}

#[test]
fn causal_greedy_generation_matches_the_plain_decoder() {
    let reference = reference("causal_lm");
    let model: RoFormerForCausalLM = load_dir(model_fixture("causal_lm"), DType::F32, device()).unwrap();
    assert_eq!(model.generation_mode(), GenerationMode::Causal);
    for case in reference["cases"].as_array().unwrap() {
        let got = model.generate(&ids(&case["source_ids"]), &greedy(&reference)).unwrap();
        assert_eq!(got, [ids(&case["ids"])], "source {:?}", case["source_ids"]);
    }
}

#[test]
fn samples_are_reproducible_with_a_seed_and_differ_across_seeds() {
    let reference = reference("sim_generation");
    let model = sim();
    let source = ids(&reference["cases"][1]["source_ids"]);
    let options = greedy(&reference).with_sampling(SAMPLING).with_num_samples(8);
    let first = model.generate(&source, &options.clone().with_seed(3)).unwrap();
    assert_eq!(first.len(), 8);
    assert_eq!(first, model.generate(&source, &options.clone().with_seed(3)).unwrap());
    assert_ne!(first, model.generate(&source, &options.clone().with_seed(4)).unwrap());
    let distinct: std::collections::HashSet<_> = first.iter().collect();
    assert!(distinct.len() > 1, "8 samples at top_p 0.95 were all {:?}", first[0]);
    // A sample does not depend on the samples decoded beside it, nor on when finished ones leave
    // the batch.
    let three = model.generate(&source, &options.clone().with_seed(3).with_num_samples(3)).unwrap();
    assert_eq!(three, first[..3]);
    // Greedy samples in a batch are each the greedy continuation.
    let batch = model.generate(&source, &greedy(&reference).with_num_samples(4)).unwrap();
    assert_eq!(batch, vec![ids(&reference["cases"][1]["ids"]); 4]);
}

#[test]
fn paraphraser_ranks_candidates_as_gen_synonyms_does() {
    let reference = reference("sim_generation");
    let paraphraser = Paraphraser::from_pretrained_with(
        model_fixture("sim_generation"),
        PipelineOptions::default().with_device(device().clone()),
    )
    .unwrap();
    let options = GenerationOptions::default().with_max_new_tokens(12);
    for case in reference["cases"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        let got = paraphraser.paraphrase(text, &options, 1).unwrap();
        let decoded = case["decoded"].as_str().unwrap();
        if decoded.is_empty() {
            assert!(got.is_empty(), "{text}: an empty generation was kept: {got:?}");
            continue;
        }
        assert_eq!(got.len(), 1, "{text}");
        assert_eq!(got[0].text, decoded);
        assert_eq!(got[0].ids, ids(&case["ids"]));
        let want = case["similar"][0]["similarity"].as_f64().unwrap();
        assert!(
            (f64::from(got[0].similarity) - want).abs() < 1e-4,
            "{text}: {} vs {want}",
            got[0].similarity
        );
    }
    // Sampled candidates come back distinct, ranked best first, at most num_return of them.
    let sampled = options.with_sampling(SAMPLING).with_num_samples(16).with_seed(5);
    let got = paraphraser.paraphrase("我们一起去公园散步吧", &sampled, 4).unwrap();
    assert!(!got.is_empty() && got.len() <= 4);
    assert!(got.windows(2).all(|w| w[0].similarity >= w[1].similarity), "{got:?}");
    let texts: std::collections::HashSet<_> = got.iter().map(|p| &p.text).collect();
    assert_eq!(texts.len(), got.len());
}

#[test]
fn bad_generation_requests_are_refused_with_the_reason() {
    let model = sim();
    let source = [2, 20, 39, 3];
    let refused = |options: GenerationOptions| model.generate(&source, &options).unwrap_err().to_string();
    let sample = |top_p, temperature| Sampling::Sample { temperature, top_k: None, top_p };
    assert!(refused(GenerationOptions::default().with_sampling(sample(0.0, 1.0)))
        .contains("top_p 0 must be in (0, 1]"));
    assert!(refused(GenerationOptions::default().with_sampling(sample(1.5, 1.0))).contains("top_p 1.5"));
    assert!(refused(GenerationOptions::default().with_sampling(sample(0.9, 0.0))).contains("temperature 0"));
    let long = refused(GenerationOptions::default().with_max_new_tokens(61));
    assert!(long.contains("max_position_embeddings 64"), "{long}");
    assert!(refused(GenerationOptions::default().with_num_samples(0)).contains("num_samples"));
    assert!(model
        .generate(&[], &GenerationOptions::default())
        .unwrap_err()
        .to_string()
        .contains("no tokens"));
    assert!(model
        .generate(&[2, 9999], &GenerationOptions::default())
        .unwrap_err()
        .to_string()
        .contains("9999"));

    let paraphraser = Paraphraser::from_pretrained(model_fixture("sim_generation")).unwrap();
    let err =
        paraphraser.paraphrase("你好", &GenerationOptions::default().with_num_samples(2), 3).unwrap_err();
    assert!(err.to_string().contains("num_return 3 is larger than num_samples 2"), "{err}");
    let err = paraphraser.paraphrase("你好", &GenerationOptions::default(), 0).unwrap_err();
    assert!(err.to_string().contains("num_return must be at least 1"), "{err}");
    // The options' own faults are found before a source or model is looked at.
    let err = GenerationOptions::default().with_num_samples(2).with_sampling(sample(0.9, 0.0)).validate();
    assert!(err.unwrap_err().to_string().contains("temperature 0"));
    assert!(GenerationOptions::default().with_max_new_tokens(61).validate().is_ok());
    // A checkpoint without an LM head: a sim encoder saved without one.
    let err = Paraphraser::from_pretrained(model_fixture("sim_decoder")).unwrap_err().to_string();
    assert!(err.contains("cls.predictions"), "{err}");
}

#[test]
fn paraphrase_example_writes_one_row_per_input_in_order() {
    let reference = reference("sim_generation");
    let cases: Vec<&Value> = reference["cases"].as_array().unwrap().iter().take(4).collect();
    let input: String = cases.iter().map(|c| format!("{}\n", c["text"].as_str().unwrap())).collect();
    let folder = model_fixture("sim_generation");
    let out = crate::examples::run(
        "paraphrase",
        &["--model", folder.to_str().unwrap(), "--greedy", "--max-new-tokens", "12"],
        Some(&input),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rows: Vec<Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), cases.len());
    for (i, (row, case)) in rows.iter().zip(&cases).enumerate() {
        assert_eq!(row["index"], i);
        assert_eq!(row["text"], case["text"]);
        let candidates = row["candidates"].as_array().unwrap();
        if case["decoded"].as_str().unwrap().is_empty() {
            assert!(candidates.is_empty());
            continue;
        }
        assert_eq!(candidates.len(), 1);
        assert_eq!(candidates[0]["text"], case["decoded"]);
        assert_eq!(candidates[0]["ids"], case["ids"]);
    }
    // A sampling flag's fault is found before the model loads (there is none at that path), and
    // is no input line's.
    let out =
        crate::examples::run("paraphrase", &["--model", "/nonexistent/sim", "--top-p", "2"], Some("你好\n"));
    crate::examples::refused(&out, "error: invalid option: top_p 2 must be in (0, 1]");
    // Greedy's single candidate against --num-return 2 is refused (it was cut to 1 without a word).
    let out = crate::examples::run(
        "paraphrase",
        &["--model", folder.to_str().unwrap(), "--greedy", "--num-return", "2"],
        Some("你好\n"),
    );
    crate::examples::refused(&out, "error: invalid option: num_return 2 is larger than num_samples 1");
    // Sampling: --num-return larger than --num-samples is refused, naming both.
    let out = crate::examples::run(
        "paraphrase",
        &["--model", folder.to_str().unwrap(), "--num-samples", "2", "--num-return", "3"],
        Some("你好\n"),
    );
    crate::examples::refused(&out, "num_return 3 is larger than num_samples 2");
}
