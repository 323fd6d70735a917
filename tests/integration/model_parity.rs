//! Every output of every model fixture against transformers: in f32 within 1e-4 max abs and 1e-5
//! relative, on the test device (`ROFORMER_TEST_DEVICE`); and on the CPU in bf16 too, within
//! [`BF16`]'s bounds.

use crate::support::{assert_close, device, diffs, model_fixture, not_run_here, on_cpu, Reference};
use candle_core::{DType, Module, Tensor};
use roformer::{
    load_dir, Inputs, Quantization, RoFormerForCausalLM, RoFormerForMaskedLM, RoFormerForMultipleChoice,
    RoFormerForQuestionAnswering, RoFormerForSequenceClassification, RoFormerForTokenClassification,
    RoFormerModel, TaskModel,
};

/// bf16's bounds against transformers' f32 on these fixtures (random weights of std 0.2 to 0.5,
/// harder on rounding than trained ones): max abs, and relative (‖Δ‖ / ‖reference‖). bf16 keeps 8
/// bits of mantissa, so about 4e-3 of each input and weight is lost before the f32 sums. Measured
/// over the 97 outputs checked here and in families.rs (v2, RoPE scaling) (2026-11-26, the 2-core
/// AMX Xeon), the same at amx, avx512-bf16, avx512-vnni and portable: the worst is the masked LM's
/// logits on its longest case, 6.2e-1 max abs and 3.2e-2 relative; the other heads' outputs stay
/// within 2.0e-1 and 2.6e-2, the hidden states within 1.2e-1 and 1.3e-2, v2 and RoPE scaling
/// within 3.8e-1 and 2.2e-2. The bounds leave about 1.6× the worst.
pub(crate) const BF16: (f64, f64) = (1.0, 5e-2);

/// The precisions each fixture runs in: f32 everywhere, bf16 where the fused CPU engine runs (not
/// on a GPU, nor under `ROFORMER_ENGINE=candle`, whose engine has no bf16 products).
pub(crate) fn precisions() -> Vec<Quantization> {
    if !on_cpu() {
        not_run_here(format!("the bf16 fixtures on {:?}: bf16 runs on the CPU only", device().location()));
        vec![Quantization::None]
    } else if std::env::var("ROFORMER_ENGINE").is_ok_and(|e| e.trim() == "candle") {
        not_run_here(
            "the bf16 fixtures: ROFORMER_ENGINE=candle chose Candle's engine, and bf16 is the fused one's",
        );
        vec![Quantization::None]
    } else {
        vec![Quantization::None, Quantization::Bf16]
    }
}

/// A fixture's model in `precision`.
pub(crate) fn load<M: TaskModel>(name: &str, precision: Quantization) -> M {
    in_precision(load_dir(model_fixture(name), DType::F32, device()).unwrap(), precision)
}

/// `model`, quantized to `precision` unless that is f32.
pub(crate) fn in_precision<M: TaskModel>(mut model: M, precision: Quantization) -> M {
    if precision != Quantization::None {
        model.quantize(precision).unwrap();
    }
    model
}

/// f32 within the project's parity bound; bf16 within [`BF16`], and not exactly (which would mean it
/// did not run).
pub(crate) fn check(what: &str, precision: Quantization, ours: &Tensor, reference: &Tensor) {
    if precision == Quantization::None {
        return assert_close(what, ours, reference);
    }
    let (abs, rel) = diffs(ours, reference);
    if std::env::var_os("ROFORMER_PRINT_DIFFS").is_some() {
        eprintln!("{what} {precision}: max abs {abs:.2e}, rel {rel:.2e}");
    }
    assert!(rel > 0.0, "{what}: {precision} gave the f32 answers exactly, so it did not run");
    assert!(
        abs <= BF16.0 && rel <= BF16.1,
        "{what} {precision}: max abs {abs:.3e} (bound {}), relative {rel:.3e} (bound {})",
        BF16.0,
        BF16.1
    );
}

fn inputs<'a>(reference: &'a Reference, case: &str) -> Inputs<'a> {
    Inputs {
        input_ids: reference.tensor(&format!("{case}.input_ids")),
        token_type_ids: reference.get(&format!("{case}.token_type_ids")),
        attention_mask: reference.get(&format!("{case}.attention_mask")),
    }
}

fn check_base(folder: &str) {
    let reference = Reference::load("base");
    for precision in precisions() {
        let model: RoFormerModel = load(folder, precision);
        let cases = reference.cases();
        assert_eq!(
            cases,
            ["batch", "beyond_max", "left_padded", "longest", "mask_holes", "no_mask", "single_token"]
        );
        for case in cases {
            let states = model.forward_hidden_states(inputs(&reference, &case)).unwrap();
            assert_eq!(states.len(), 3);
            // The embeddings (state 0) are f32 in every precision.
            for (i, state) in states.iter().enumerate().skip(usize::from(precision != Quantization::None)) {
                check(
                    &format!("{folder} {case} hidden_states.{i}"),
                    precision,
                    state,
                    reference.tensor(&format!("{case}.hidden_states.{i}")),
                );
            }
            let last = model.forward(inputs(&reference, &case)).unwrap();
            check(
                &format!("{folder} {case} last_hidden_state"),
                precision,
                &last,
                reference.tensor(&format!("{case}.last_hidden_state")),
            );
        }
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
        for precision in precisions() {
            let model: RoFormerForSequenceClassification = load(name, precision);
            for case in reference.cases() {
                let logits = model.forward(inputs(&reference, &case)).unwrap();
                check(
                    &format!("{name} {case}"),
                    precision,
                    &logits,
                    reference.tensor(&format!("{case}.logits")),
                );
            }
        }
    }
}

#[test]
fn token_classification_head() {
    let reference = Reference::load("tokcls");
    for precision in precisions() {
        let model: RoFormerForTokenClassification = load("tokcls", precision);
        for case in reference.cases() {
            let logits = model.forward(inputs(&reference, &case)).unwrap();
            check(&format!("tokcls {case}"), precision, &logits, reference.tensor(&format!("{case}.logits")));
        }
    }
}

#[test]
fn masked_lm_head_with_tied_decoder_and_projection() {
    let reference = Reference::load("mlm");
    for precision in precisions() {
        let model: RoFormerForMaskedLM = load("mlm", precision);
        for case in reference.cases() {
            let logits = model.forward(inputs(&reference, &case)).unwrap();
            check(&format!("mlm {case}"), precision, &logits, reference.tensor(&format!("{case}.logits")));
        }
    }
}

#[test]
fn causal_lm_masks_the_future() {
    // transformers' RoFormerForCausalLM (is_decoder) on the same head.
    let reference = Reference::load("causal_lm");
    for precision in precisions() {
        let model: RoFormerForCausalLM = load("causal_lm", precision);
        for case in reference.cases() {
            let logits = model.forward(inputs(&reference, &case)).unwrap();
            check(
                &format!("causal_lm {case}"),
                precision,
                &logits,
                reference.tensor(&format!("{case}.logits")),
            );
        }
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
    for precision in precisions() {
        let model: RoFormerForQuestionAnswering = load("qa", precision);
        assert!(model.roformer().config().rotary_value);
        for case in reference.cases() {
            let (start, end) = model.forward(inputs(&reference, &case)).unwrap();
            check(
                &format!("qa {case} start"),
                precision,
                &start,
                reference.tensor(&format!("{case}.start_logits")),
            );
            check(
                &format!("qa {case} end"),
                precision,
                &end,
                reference.tensor(&format!("{case}.end_logits")),
            );
        }
    }
}

#[test]
fn multiple_choice_head() {
    let reference = Reference::load("multiple_choice");
    for precision in precisions() {
        let model: RoFormerForMultipleChoice = load("multiple_choice", precision);
        let logits = model.forward(inputs(&reference, "batch")).unwrap();
        check("multiple_choice", precision, &logits, reference.tensor("batch.logits"));
    }
}

#[test]
fn sim_checkpoint_pooler() {
    let reference = Reference::load("sim_pooler");
    for precision in precisions() {
        let model: RoFormerModel = load("sim_pooler", precision);
        let last = model.forward(inputs(&reference, "batch")).unwrap();
        check("sim last_hidden_state", precision, &last, reference.tensor("batch.last_hidden_state"));
        let pooled = model.pooler().expect("pooler loaded").forward(&last).unwrap();
        check("sim pooler_output", precision, &pooled, reference.tensor("batch.pooler_output"));
    }
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
