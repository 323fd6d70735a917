//! The families transformers' RoFormer does not cover as is, against references built by
//! scripts/fixtures/make_family_fixtures.py: RoFormer v2 (junnyu's code path), sim encoders as their
//! authors run them, and RoPE scaling past max_position_embeddings.

use candle_core::{DType, Device, Tensor};
use roformer::{
    load_dir, Checkpoint, Config, Encoded, FillMask, Inputs, Pooling, Quantization, RoFormerForMaskedLM,
    RoFormerForSequenceClassification, RoFormerForTokenClassification, RoFormerModel, RopeScaling,
    SentenceEncoder,
};
use serde_json::Value;

use crate::model_parity::{check, in_precision, load, precisions};
use crate::support::{assert_close, device, model_fixture, on_device, Reference};

fn inputs<'a>(reference: &'a Reference, case: &str) -> Inputs<'a> {
    Inputs {
        input_ids: reference.tensor(&format!("{case}.input_ids")),
        token_type_ids: reference.get(&format!("{case}.token_type_ids")),
        attention_mask: reference.get(&format!("{case}.attention_mask")),
    }
}

#[test]
fn v2_encoder_matches_junnyus_code_path() {
    let reference = Reference::load("v2_base");
    for precision in precisions() {
        let model: RoFormerModel = load("v2_base", precision);
        assert_eq!(model.config().norm_type(), roformer::NormType::RmsNorm);
        assert!(!model.config().use_bias());
        for case in reference.cases() {
            let states = model.forward_hidden_states(inputs(&reference, &case)).unwrap();
            // The embeddings (state 0) are f32 in every precision.
            for (i, state) in states.iter().enumerate().skip(usize::from(precision != Quantization::None)) {
                let want = reference.tensor(&format!("{case}.hidden_states.{i}"));
                check(&format!("v2 {case} hidden_states.{i}"), precision, state, want);
            }
        }
    }
}

#[test]
fn v2_heads_match_junnyus_code_path() {
    for precision in precisions() {
        let reference = Reference::load("v2_mlm");
        let mlm: RoFormerForMaskedLM = load("v2_mlm", precision);
        for case in reference.cases() {
            let logits = mlm.forward(inputs(&reference, &case)).unwrap();
            check(&format!("v2 mlm {case}"), precision, &logits, reference.tensor(&format!("{case}.logits")));
        }
        let reference = Reference::load("v2_seqcls");
        let seqcls: RoFormerForSequenceClassification = load("v2_seqcls", precision);
        for case in reference.cases() {
            let logits = seqcls.forward(inputs(&reference, &case)).unwrap();
            check(
                &format!("v2 seqcls {case}"),
                precision,
                &logits,
                reference.tensor(&format!("{case}.logits")),
            );
        }
        let reference = Reference::load("v2_tokcls");
        let tokcls: RoFormerForTokenClassification = load("v2_tokcls", precision);
        for case in reference.cases() {
            let logits = tokcls.forward(inputs(&reference, &case)).unwrap();
            check(
                &format!("v2 tokcls {case}"),
                precision,
                &logits,
                reference.tensor(&format!("{case}.logits")),
            );
        }
    }
}

#[test]
fn fill_mask_runs_on_a_v2_checkpoint() {
    let folder = model_fixture("v2_mlm");
    let want: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("fill_mask.json")).unwrap()).unwrap();
    let fill = FillMask::from_pretrained_with(&folder, on_device()).unwrap();
    let got = fill.fill(&[want["text"].as_str().unwrap()], 5).unwrap();
    let masks = want["top5"].as_array().unwrap();
    assert_eq!(got[0].len(), masks.len(), "one list per [MASK]");
    for (ours, theirs) in got[0].iter().zip(masks) {
        for (c, w) in ours.iter().zip(theirs.as_array().unwrap()) {
            assert_eq!(
                (c.token.as_str(), c.token_id),
                (w[0].as_str().unwrap(), w[1].as_u64().unwrap() as u32)
            );
            assert!((c.score as f64 - w[2].as_f64().unwrap()).abs() < 1e-4, "{} {}", c.score, w[2]);
        }
    }
}

#[test]
fn sim_checkpoints_encode_as_their_authors_do() {
    // The config says is_decoder and omits pooler_activation, as the published sim configs do.
    let folder = model_fixture("sim_decoder");
    let config = Config::from_file(folder.join("config.json")).unwrap();
    assert!(config.is_decoder && config.pooler_activation.is_none());
    let reference = Reference::load("sim_decoder");
    let model: RoFormerModel = load_dir(&folder, DType::F32, device()).unwrap();
    let last = model.forward(inputs(&reference, "batch")).unwrap();
    assert_close("sim bidirectional last_hidden_state", &last, reference.tensor("batch.last_hidden_state"));

    // The default sentence encoding: pooler with a linear activation, L2-normalised.
    let encoder = SentenceEncoder::from_pretrained_with(&folder, on_device()).unwrap();
    assert_eq!((encoder.pooling(), encoder.normalize()), (Pooling::Pooler, true));
    let ids = reference.tensor("batch.input_ids").to_vec2::<i64>().unwrap();
    let types = reference.tensor("batch.token_type_ids").to_vec2::<i64>().unwrap();
    let mask = reference.tensor("batch.attention_mask").to_vec2::<i64>().unwrap();
    let encodings: Vec<Encoded> = (0..ids.len())
        .map(|b| {
            let n = mask[b].iter().filter(|&&m| m == 1).count();
            let u32s = |v: &[i64]| v[..n].iter().map(|&x| x as u32).collect::<Vec<u32>>();
            Encoded {
                input_ids: u32s(&ids[b]),
                token_type_ids: u32s(&types[b]),
                attention_mask: vec![1; n],
                offsets: vec![(0, 0); n],
                truncated: false,
            }
        })
        .collect();
    let embeddings = encoder.encode_tokenized(&encodings).unwrap();
    let flat: Vec<f32> = embeddings.into_iter().flatten().collect();
    let ours = Tensor::from_vec(flat, (ids.len(), 64), &Device::Cpu).unwrap();
    assert_close("sim embedding", &ours, reference.tensor("batch.embedding"));
}

/// The base fixture's config with `edit` applied, and its weights.
fn base_with(edit: impl FnOnce(&mut Config)) -> RoFormerModel {
    let mut config = Config::from_file(model_fixture("base").join("config.json")).unwrap();
    edit(&mut config);
    Checkpoint::open(model_fixture("base")).unwrap().load(&config, DType::F32, device()).unwrap()
}

#[test]
fn rope_scaling_matches_transformers_rope_functions() {
    let reference = Reference::load_file("base", "rope_scaling.safetensors");
    let cases: Value = serde_json::from_str(
        &std::fs::read_to_string(model_fixture("base").join("rope_scaling.json")).unwrap(),
    )
    .unwrap();
    let max = Config::from_file(model_fixture("base").join("config.json")).unwrap().max_position_embeddings;
    for (name, case) in cases.as_object().unwrap() {
        for precision in precisions() {
            // Each case as a config.json would carry it: rope_scaling, or rope_theta alone.
            let model = base_with(|config| {
                for (key, value) in case.as_object().unwrap() {
                    if key != "attention_factor" {
                        config.extra.insert(key.clone(), value.clone());
                    }
                }
                config.validate().unwrap();
            });
            let model = in_precision(model, precision);
            let ids = reference.tensor(&format!("{name}.input_ids"));
            assert!(ids.dim(1).unwrap() > max, "{name} is not longer than max_position_embeddings");
            let out = model.forward(inputs(&reference, name)).unwrap();
            let want = reference.tensor(&format!("{name}.last_hidden_state"));
            check(&format!("rope {name}"), precision, &out, want);
        }
    }
    // The same through an override, as --rope-scaling and PipelineOptions::with_rope_scaling set it.
    let model = base_with(|config| config.set_rope_scaling(Some("linear:4".parse::<RopeScaling>().unwrap())));
    let out = model.forward(inputs(&reference, "linear")).unwrap();
    assert_close("rope linear override", &out, reference.tensor("linear.last_hidden_state"));
    // And the scaling matters: without it the long inputs give other states.
    let plain = base_with(|_| {}).forward(inputs(&reference, "linear")).unwrap();
    let (abs, _) = crate::support::diffs(&plain, reference.tensor("linear.last_hidden_state"));
    assert!(abs > 0.1, "linear scaling changed nothing ({abs})");
}

#[test]
fn bad_rope_scaling_is_named() {
    for bad in ["linear", "linear:x", "cubic:2", "linear:0.5", "yarn:-1"] {
        let err = bad.parse::<RopeScaling>().unwrap_err();
        assert!(err.to_string().contains(bad), "{bad}: {err}");
    }
}
