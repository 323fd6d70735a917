//! Every output of every model fixture against transformers, in f32: 1e-4 max abs, 1e-5 relative,
//! on the test device (`ROFORMER_TEST_DEVICE`).

use crate::support::{assert_close, device, model_fixture, Reference};
use candle_core::{DType, Module, Tensor};
use roformer::{
    load_dir, Inputs, RoFormerForCausalLM, RoFormerForMaskedLM, RoFormerForMultipleChoice,
    RoFormerForQuestionAnswering, RoFormerForSequenceClassification, RoFormerForTokenClassification,
    RoFormerModel, TaskModel,
};

fn inputs<'a>(reference: &'a Reference, case: &str) -> Inputs<'a> {
    Inputs {
        input_ids: reference.tensor(&format!("{case}.input_ids")),
        token_type_ids: reference.get(&format!("{case}.token_type_ids")),
        attention_mask: reference.get(&format!("{case}.attention_mask")),
    }
}

fn check_base(folder: &str) {
    let reference = Reference::load("base");
    let model: RoFormerModel = load_dir(model_fixture(folder), DType::F32, device()).unwrap();
    let cases = reference.cases();
    assert_eq!(cases, ["batch", "beyond_max", "longest", "no_mask", "single_token"]);
    for case in cases {
        let states = model.forward_hidden_states(inputs(&reference, &case)).unwrap();
        assert_eq!(states.len(), 3);
        for (i, state) in states.iter().enumerate() {
            assert_close(
                &format!("{folder} {case} hidden_states.{i}"),
                state,
                reference.tensor(&format!("{case}.hidden_states.{i}")),
            );
        }
        let last = model.forward(inputs(&reference, &case)).unwrap();
        assert_close(
            &format!("{folder} {case} last_hidden_state"),
            &last,
            reference.tensor(&format!("{case}.last_hidden_state")),
        );
    }
}

#[test]
fn base_model_safetensors() {
    check_base("base");
}

#[test]
fn base_model_sharded_safetensors() {
    check_base("base_sharded");
}

#[test]
fn base_model_pytorch_bin() {
    check_base("base_bin");
}

#[test]
fn sequence_classification_heads() {
    for name in ["seqcls", "seqcls_multilabel", "seqcls_regression"] {
        let reference = Reference::load(name);
        let model: RoFormerForSequenceClassification =
            load_dir(model_fixture(name), DType::F32, device()).unwrap();
        for case in reference.cases() {
            let logits = model.forward(inputs(&reference, &case)).unwrap();
            assert_close(&format!("{name} {case}"), &logits, reference.tensor(&format!("{case}.logits")));
        }
    }
}

#[test]
fn token_classification_head() {
    let reference = Reference::load("tokcls");
    let model: RoFormerForTokenClassification =
        load_dir(model_fixture("tokcls"), DType::F32, device()).unwrap();
    for case in reference.cases() {
        let logits = model.forward(inputs(&reference, &case)).unwrap();
        assert_close(&format!("tokcls {case}"), &logits, reference.tensor(&format!("{case}.logits")));
    }
}

#[test]
fn masked_lm_head_with_tied_decoder_and_projection() {
    let reference = Reference::load("mlm");
    let model: RoFormerForMaskedLM = load_dir(model_fixture("mlm"), DType::F32, device()).unwrap();
    for case in reference.cases() {
        let logits = model.forward(inputs(&reference, &case)).unwrap();
        assert_close(&format!("mlm {case}"), &logits, reference.tensor(&format!("{case}.logits")));
    }
}

#[test]
fn causal_lm_masks_the_future() {
    // transformers' RoFormerForCausalLM (is_decoder) on the same head.
    let reference = Reference::load("causal_lm");
    let model: RoFormerForCausalLM = load_dir(model_fixture("causal_lm"), DType::F32, device()).unwrap();
    for case in reference.cases() {
        let logits = model.forward(inputs(&reference, &case)).unwrap();
        assert_close(&format!("causal_lm {case}"), &logits, reference.tensor(&format!("{case}.logits")));
    }
    // The same weights as a masked LM attend both ways, so they disagree with the reference.
    let bidirectional: RoFormerForMaskedLM =
        load_dir(model_fixture("causal_lm"), DType::F32, device()).unwrap();
    let logits = bidirectional.forward(inputs(&reference, "batch")).unwrap();
    let (max_abs, _) = crate::support::diffs(&logits, reference.tensor("batch.logits"));
    assert!(max_abs > 0.1, "a bidirectional pass matched the causal reference ({max_abs})");
}

#[test]
fn question_answering_head_with_rotary_value() {
    let reference = Reference::load("qa");
    let model: RoFormerForQuestionAnswering = load_dir(model_fixture("qa"), DType::F32, device()).unwrap();
    assert!(model.roformer().config().rotary_value);
    for case in reference.cases() {
        let (start, end) = model.forward(inputs(&reference, &case)).unwrap();
        assert_close(&format!("qa {case} start"), &start, reference.tensor(&format!("{case}.start_logits")));
        assert_close(&format!("qa {case} end"), &end, reference.tensor(&format!("{case}.end_logits")));
    }
}

#[test]
fn multiple_choice_head() {
    let reference = Reference::load("multiple_choice");
    let model: RoFormerForMultipleChoice =
        load_dir(model_fixture("multiple_choice"), DType::F32, device()).unwrap();
    let logits = model.forward(inputs(&reference, "batch")).unwrap();
    assert_close("multiple_choice", &logits, reference.tensor("batch.logits"));
}

#[test]
fn sim_checkpoint_pooler() {
    let reference = Reference::load("sim_pooler");
    let model: RoFormerModel = load_dir(model_fixture("sim_pooler"), DType::F32, device()).unwrap();
    let last = model.forward(inputs(&reference, "batch")).unwrap();
    assert_close("sim last_hidden_state", &last, reference.tensor("batch.last_hidden_state"));
    let pooled = model.pooler().expect("pooler loaded").forward(&last).unwrap();
    assert_close("sim pooler_output", &pooled, reference.tensor("batch.pooler_output"));
}

#[test]
fn integer_dtypes_of_inputs_are_accepted() {
    let reference = Reference::load("base");
    let model: RoFormerModel = load_dir(model_fixture("base"), DType::F32, device()).unwrap();
    let ids = reference.tensor("batch.input_ids").to_dtype(DType::U32).unwrap();
    let types = reference.tensor("batch.token_type_ids").to_dtype(DType::U32).unwrap();
    let mask = reference.tensor("batch.attention_mask").to_dtype(DType::U8).unwrap();
    let out =
        model.forward(Inputs::new(&ids).with_token_type_ids(&types).with_attention_mask(&mask)).unwrap();
    assert_close("u32 inputs", &out, reference.tensor("batch.last_hidden_state"));
    let _: &Tensor = &out;
}
