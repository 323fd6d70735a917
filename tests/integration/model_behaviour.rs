//! Reduced precision, the rotary cache, extrapolation and the errors of bad configs and checkpoints.

use std::path::Path;

use crate::support::{assert_within, device, model_fixture, Reference, Scratch};
use candle_core::{DType, Device, Tensor};
use roformer::{
    load_dir, Checkpoint, Config, Error, Inputs, RoFormerForSequenceClassification, RoFormerModel,
};

fn batch_inputs(reference: &Reference) -> Inputs<'_> {
    Inputs {
        input_ids: reference.tensor("batch.input_ids"),
        token_type_ids: reference.get("batch.token_type_ids"),
        attention_mask: reference.get("batch.attention_mask"),
    }
}

#[test]
fn half_precision_stays_within_stated_bounds() {
    // f16 carries 11 significant bits and bf16 8. Through two layers with weights of std 0.3
    // (hidden values up to ~4) we measured 1e-3 relative in f16 and 2e-2 in bf16; transformers
    // itself, run in bf16 on this fixture, lands 0.13 max abs and 1.5e-2 relative from f32.
    // On aarch64 CPUs with FP16 arithmetic, the gemm crate under candle multiplies f16 natively
    // and sums in f16 as well, where x86 widens to f32: under qemu we measured 4.5e-2 max abs and
    // 5.6e-3 relative there, still inside bf16's bounds. On CUDA, Candle's softmax, norms and
    // activations compute in f16 as well (cuBLAS sums the products in f32): on an H100 we measured
    // 3.3e-2 max abs and 2.5e-3 relative (scripts/checks/gpu_check.sh prints it beside
    // transformers' own f16 on the same GPU).
    let reference = Reference::load("base");
    let expected = reference.tensor("batch.last_hidden_state");
    let f16_in_f16 = (cfg!(target_arch = "aarch64") && device().is_cpu()) || device().is_cuda();
    let f16 = if f16_in_f16 { (6e-2, 8e-3) } else { (2e-2, 2e-3) };
    for (dtype, max_abs, max_rel) in [(DType::F16, f16.0, f16.1), (DType::BF16, 3e-1, 3e-2)] {
        let model: RoFormerModel = load_dir(model_fixture("base"), dtype, device()).unwrap();
        let out = model.forward(batch_inputs(&reference)).unwrap();
        assert_eq!(out.dtype(), dtype);
        assert_within(&format!("{dtype:?}"), &out, expected, max_abs, max_rel);
    }
}

#[test]
fn extrapolation_matches_a_longer_config() {
    // `beyond_max` is longer than this config's max_position_embeddings; transformers computed it
    // with the same weights under a config four times as long.
    let reference = Reference::load("base");
    let model: RoFormerModel = load_dir(model_fixture("base"), DType::F32, device()).unwrap();
    let ids = reference.tensor("beyond_max.input_ids");
    assert!(ids.dim(1).unwrap() > model.config().max_position_embeddings);
    let inputs = Inputs {
        input_ids: ids,
        token_type_ids: reference.get("beyond_max.token_type_ids"),
        attention_mask: reference.get("beyond_max.attention_mask"),
    };
    let out = model.forward(inputs).unwrap();
    crate::support::assert_close("beyond max", &out, reference.tensor("beyond_max.last_hidden_state"));
}

fn config_error(json: &str) -> (String, String) {
    match Config::from_json(json) {
        Err(Error::Config { field, message, .. }) => (field, message),
        other => panic!("expected a config error for {json}, got {other:?}"),
    }
}

#[test]
fn invalid_configs_name_the_field() {
    let (field, _) = config_error(r#"{"hidden_size": 30, "num_attention_heads": 4}"#);
    assert_eq!(field, "num_attention_heads");
    let (field, message) = config_error(r#"{"hidden_size": 36, "num_attention_heads": 4}"#);
    assert_eq!(field, "num_attention_heads");
    assert!(message.contains("even"), "{message}");
    let (field, message) = config_error(r#"{"hidden_act": "gelu_magic"}"#);
    assert_eq!(field, "hidden_act");
    assert!(message.contains("gelu_magic"), "{message}");
    assert_eq!(config_error(r#"{"num_hidden_layers": 0}"#).0, "num_hidden_layers");
    assert_eq!(config_error(r#"{"num_attention_heads": 0}"#).0, "num_attention_heads");
    assert_eq!(config_error(r#"{"hidden_size": "big"}"#).0, "hidden_size");
    assert_eq!(config_error(r#"{"id2label": {"0": "a", "5": "b"}}"#).0, "id2label");
    let (field, message) = config_error(r#"{"hidden_size": 64,"#);
    assert_eq!(field, "");
    assert!(message.contains("EOF"), "{message}");
}

#[test]
fn config_defaults_and_extras() {
    let c = Config::from_json("{}").unwrap();
    assert_eq!((c.vocab_size, c.hidden_size, c.max_position_embeddings), (50000, 768, 1536));
    assert_eq!(c.embedding_size(), 768);
    assert_eq!(c.num_labels(), 2);
    assert_eq!(c.label(1), "LABEL_1");
    let real = Config::from_file(crate::support::fixture("vocab/roformer_chinese_base/config.json")).unwrap();
    assert_eq!(real.max_position_embeddings, 512);
    assert_eq!(real.architectures.as_deref(), Some(&["RoFormerForMaskedLM".to_string()][..]));
    let sim = Config::from_file(model_fixture("sim_pooler").join("config.json")).unwrap();
    assert_eq!(sim.pooler_activation(), roformer::Activation::Linear);
    assert!(sim.use_bias());
    // Unknown keys survive a save.
    let again = Config::from_json(&sim.to_json()).unwrap();
    assert_eq!(again, sim);
}

fn scratch_of(fixture: &str, tag: &str) -> Scratch {
    Scratch::copy_of(&model_fixture(fixture), tag)
}

fn load_seqcls(dir: &Path) -> Result<RoFormerForSequenceClassification, Error> {
    load_dir(dir, DType::F32, &Device::Cpu)
}

#[test]
fn missing_tensor_is_named() {
    let scratch = scratch_of("seqcls", "missing");
    scratch.edit_weights(|t| {
        t.remove("roformer.encoder.layer.1.attention.self.key.weight").unwrap();
    });
    match load_seqcls(scratch.path()) {
        Err(Error::MissingTensor { path, tensor }) => {
            assert_eq!(tensor, "roformer.encoder.layer.1.attention.self.key.weight");
            assert!(path.ends_with("model.safetensors"));
        }
        other => panic!("expected MissingTensor, got {other:?}"),
    }
}

#[test]
fn head_missing_from_an_encoder_checkpoint_is_named() {
    let err = load_dir::<RoFormerForSequenceClassification>(model_fixture("base"), DType::F32, &Device::Cpu)
        .unwrap_err();
    assert!(
        matches!(&err, Error::MissingTensor { tensor, .. } if tensor == "classifier.dense.weight"),
        "{err}"
    );
}

#[test]
fn wrong_shape_is_named() {
    let scratch = scratch_of("seqcls", "shape");
    scratch.edit_weights(|t| {
        let w = t["classifier.out_proj.weight"].narrow(0, 0, 2).unwrap();
        t.insert("classifier.out_proj.weight".into(), w);
    });
    match load_seqcls(scratch.path()) {
        Err(Error::ShapeMismatch { tensor, expected, found, .. }) => {
            assert_eq!(tensor, "classifier.out_proj.weight");
            assert_eq!((expected, found), (vec![3, 64], vec![2, 64]));
        }
        other => panic!("expected ShapeMismatch, got {other:?}"),
    }
}

#[test]
fn truncated_and_corrupt_files_are_named() {
    let scratch = scratch_of("seqcls", "truncated");
    let file = scratch.path().join("model.safetensors");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let err = load_seqcls(scratch.path()).unwrap_err();
    assert!(matches!(&err, Error::Checkpoint { path, .. } if path == &file), "{err}");

    std::fs::write(&file, b"definitely not a safetensors file").unwrap();
    let err = load_seqcls(scratch.path()).unwrap_err();
    assert!(matches!(&err, Error::Checkpoint { path, .. } if path == &file), "{err}");

    let scratch = scratch_of("base_bin", "bin");
    let file = scratch.path().join("pytorch_model.bin");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() - 200]).unwrap();
    let err = load_dir::<RoFormerModel>(scratch.path(), DType::F32, &Device::Cpu).unwrap_err();
    assert!(matches!(&err, Error::Checkpoint { path, .. } if path == &file), "{err}");
}

#[test]
fn malformed_config_and_missing_files_are_named() {
    let scratch = scratch_of("seqcls", "config");
    let config = scratch.path().join("config.json");
    std::fs::write(&config, r#"{"hidden_size": 64, "num_attention_heads": "four"}"#).unwrap();
    match load_seqcls(scratch.path()) {
        Err(Error::Config { path, field, .. }) => {
            assert_eq!(path.as_deref(), Some(config.as_path()));
            assert_eq!(field, "num_attention_heads");
        }
        other => panic!("expected a config error, got {other:?}"),
    }
    std::fs::remove_file(scratch.path().join("model.safetensors")).unwrap();
    let err = Checkpoint::open(scratch.path()).unwrap_err();
    assert!(err.to_string().contains("no weights found"), "{err}");

    let scratch = scratch_of("base_sharded", "shard");
    std::fs::remove_file(scratch.path().join("model-00003-of-00009.safetensors")).unwrap();
    let err = load_dir::<RoFormerModel>(scratch.path(), DType::F32, &Device::Cpu).unwrap_err();
    assert!(err.to_string().contains("model-00003-of-00009.safetensors"), "{err}");
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let model: RoFormerModel = load_dir(model_fixture("base"), DType::F32, &Device::Cpu).unwrap();
    let ids = Tensor::new(&[[1u32, 2, 3]], &Device::Cpu).unwrap();
    let short_mask = Tensor::new(&[[1u32, 1]], &Device::Cpu).unwrap();
    assert!(model.forward(Inputs::new(&ids).with_attention_mask(&short_mask)).is_err());
    let empty = Tensor::zeros((1, 0), DType::U32, &Device::Cpu).unwrap();
    assert!(model.forward(Inputs::new(&empty)).is_err());
    let out_of_vocab = Tensor::new(&[[1u32, 100_000]], &Device::Cpu).unwrap();
    assert!(model.forward(Inputs::new(&out_of_vocab)).is_err());
}
