//! Autograd against torch's gradients, a short training run that fits its data, and saving.

use candle_core::{DType, Device, Tensor};
use roformer::training::{Example, Target, Trainer};
use roformer::{load_dir, Checkpoint, Config, Encoded, Inputs, RoFormerForSequenceClassification, Tokenizer};

#[test]
fn gradients_match_torch() {
    let dir = crate::support::model_fixture("seqcls");
    let config = Config::from_file(dir.join("config.json")).unwrap();
    let checkpoint = Checkpoint::open(&dir).unwrap();
    let trainer = Trainer::builder(config).init_from(&checkpoint).build(3).unwrap();
    let reference = candle_core::safetensors::load(dir.join("gradients.safetensors"), &Device::Cpu).unwrap();
    let ids = &reference["inputs.input_ids"];
    let inputs = Inputs {
        input_ids: ids,
        token_type_ids: Some(&reference["inputs.token_type_ids"]),
        attention_mask: Some(&reference["inputs.attention_mask"]),
    };
    // Eval mode (no dropout), as the reference; the weights are variables, so every op is differentiable.
    let logits = trainer.model().forward(inputs).unwrap();
    let labels = reference["labels"].to_dtype(DType::U32).unwrap();
    let loss = trainer.loss(&logits, &labels).unwrap();
    let want_loss = reference["loss"].to_vec1::<f32>().unwrap()[0];
    assert!((loss.to_scalar::<f32>().unwrap() - want_loss).abs() < 1e-5);
    let grads = loss.backward().unwrap();
    let vars = trainer.variables();
    let mut checked = 0;
    for (key, want) in &reference {
        let Some(name) = key.strip_prefix("grad.") else { continue };
        let var = vars.get(name).unwrap_or_else(|| panic!("no variable {name}"));
        let got = grads.get(var).unwrap_or_else(|| panic!("no gradient for {name}"));
        crate::support::assert_within(&format!("grad {name}"), got, want, 1e-4, 1e-4);
        checked += 1;
    }
    assert_eq!(checked, 10);
}

fn tiny_config(num_labels: usize) -> Config {
    Config::from_json(&format!(
        r#"{{"vocab_size": 50, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 64, "max_position_embeddings": 32, "num_labels": {num_labels},
            "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}}"#
    ))
    .unwrap()
}

fn example(ids: &[u32], class: usize) -> Example {
    let n = ids.len() + 2;
    let input_ids: Vec<u32> =
        std::iter::once(2).chain(ids.iter().copied()).chain(std::iter::once(3)).collect();
    Example {
        encoding: Encoded {
            input_ids,
            token_type_ids: vec![0; n],
            attention_mask: vec![1; n],
            offsets: vec![(0, 0); n],
            truncated: false,
        },
        target: Target::Class(class),
    }
}

/// Eight sequences whose class depends on which tokens they hold and where.
fn tiny_data() -> Vec<Example> {
    vec![
        example(&[10, 11, 12], 0),
        example(&[12, 11, 10], 1),
        example(&[20, 21], 0),
        example(&[21, 20], 1),
        example(&[30, 31, 32, 33], 0),
        example(&[33, 32, 31, 30], 1),
        example(&[40], 0),
        example(&[41, 42, 43, 44, 45], 1),
    ]
}

#[test]
fn short_training_run_fits_a_handful_of_examples() {
    let data = tiny_data();
    let epochs = 60;
    let mut trainer = Trainer::builder(tiny_config(2))
        .epochs(epochs)
        .batch_size(4)
        .learning_rate(3e-3)
        .seed(7)
        .build(data.len())
        .unwrap();
    let mut epoch_losses = Vec::new();
    for _ in 0..epochs {
        let batches = trainer.batches(&data);
        let mut total = 0.0;
        for batch in &batches {
            total += trainer.train_step(&data, batch).unwrap();
        }
        epoch_losses.push(total / batches.len() as f32);
    }
    let first = epoch_losses[0];
    let last = *epoch_losses.last().unwrap();
    assert!(last < first * 0.2, "loss went from {first} to {last}");
    let logits = trainer.predict(&data, 3).unwrap();
    for (e, row) in data.iter().zip(&logits) {
        let predicted = if row[1] > row[0] { 1 } else { 0 };
        assert_eq!(Target::Class(predicted), e.target, "logits {row:?}");
    }
}

#[test]
fn the_schedule_is_planned_by_the_builder() {
    // 1 epoch of 100 examples, batch 1: 100 steps, 10 of warmup. Nothing else to call.
    let mut trainer = Trainer::builder(tiny_config(2))
        .epochs(1)
        .batch_size(1)
        .learning_rate(1.0)
        .warmup_ratio(0.1)
        .build(100)
        .unwrap();
    assert!((trainer.learning_rate() - 0.1).abs() < 1e-9, "step 0 of a 10-step warmup");
    let data = tiny_data();
    let mut rates = Vec::new();
    for i in 0..100 {
        rates.push(trainer.learning_rate());
        trainer.train_step(&data, &[i % data.len()]).unwrap();
    }
    let peak = rates.iter().cloned().fold(0.0, f64::max);
    assert!((peak - 1.0).abs() < 1e-9);
    assert!(rates.windows(2).skip(10).all(|w| w[1] <= w[0]));
    assert!(rates[99] < 0.02);
    assert_eq!(trainer.step(), 100);
}

#[test]
fn each_bad_option_is_refused_by_its_name() {
    use roformer::training::TrainerBuilder;
    type Set = fn(TrainerBuilder) -> TrainerBuilder;
    let cases: [(&str, Set); 9] = [
        ("epochs", |b| b.epochs(0)),
        ("batch_size", |b| b.batch_size(0)),
        ("learning_rate", |b| b.learning_rate(0.0)),
        ("learning_rate", |b| b.learning_rate(f64::INFINITY)),
        ("learning_rate", |b| b.learning_rate(f64::NAN)),
        ("warmup_ratio", |b| b.warmup_ratio(1.0)),
        ("weight_decay", |b| b.weight_decay(-1.0)),
        ("weight_decay", |b| b.weight_decay(f64::NAN)),
        ("max_grad_norm", |b| b.max_grad_norm(f64::NAN)),
    ];
    for (name, set) in cases {
        let error = set(Trainer::builder(tiny_config(2))).build(8).err().expect(name);
        assert!(
            matches!(&error, roformer::Error::InvalidOption { option, .. } if option == name),
            "{name}: {error}"
        );
        assert!(error.to_string().contains(name), "{error}");
    }
    // 0 turns clipping off, as in transformers.
    assert!(Trainer::builder(tiny_config(2)).max_grad_norm(0.0).build(8).is_ok());
}

#[test]
fn trainers_own_their_dropout_and_multi_label_targets_take_any_label_count() {
    // Two trainers with the same seed take the same steps, interleaved or not: neither reseeds
    // the other's dropout.
    let data = tiny_data();
    let run = |interleave: bool| {
        let build = || Trainer::builder(tiny_config(2)).learning_rate(1e-3).seed(5).build(8).unwrap();
        let (mut a, mut b) = (build(), build());
        let mut losses = Vec::new();
        for step in 0..4 {
            let batch = [step, step + 4];
            losses.push(a.train_step(&data, &batch).unwrap());
            if interleave {
                b.train_step(&data, &batch).unwrap();
            }
        }
        losses
    };
    assert_eq!(run(false), run(true));

    // 70 labels: past what a 64-bit mask holds.
    let mut config = tiny_config(70);
    config.problem_type = Some(roformer::ProblemType::MultiLabelClassification);
    let mut trainer = Trainer::builder(config).epochs(120).learning_rate(3e-3).build(2).unwrap();
    let mut multi = tiny_data();
    multi[0].target = Target::Labels(vec![0, 65, 69]);
    multi[6].target = Target::Labels(vec![]);
    let first = trainer.train_step(&multi, &[0, 6]).unwrap();
    for _ in 0..100 {
        trainer.train_step(&multi, &[0, 6]).unwrap();
    }
    // Labels 0, 65 and 69 are positive in one row of the two, every other label in neither: the
    // first settle near logit 0 (probability 1/2), the rest are pushed far down. Labels past 63
    // are seen only if targets are not a 64-bit mask.
    let logits = trainer.predict(&[multi[0].clone(), multi[6].clone()], 2).unwrap();
    for row in &logits {
        for (label, &logit) in row.iter().enumerate() {
            let positive_somewhere = [0, 65, 69].contains(&label);
            assert!(positive_somewhere == (logit > -1.0), "label {label}: logit {logit}");
        }
    }
    assert!(trainer.train_step(&multi, &[0, 6]).unwrap() < first);
    multi[0].target = Target::Labels(vec![70]);
    let err = trainer.train_step(&multi, &[0]).unwrap_err();
    assert!(err.to_string().contains("label id 70 is out of range"), "{err}");
}

#[test]
fn a_saved_model_loads_with_the_same_logits() {
    let data = tiny_data();
    let mut trainer = Trainer::builder(tiny_config(2))
        .epochs(2)
        .batch_size(4)
        .learning_rate(1e-3)
        .build(data.len())
        .unwrap();
    for batch in trainer.batches(&data) {
        trainer.train_step(&data, &batch).unwrap();
    }
    let dir = std::env::temp_dir().join(format!("roformer-train-save-{}", std::process::id()));
    let vocab_dir = dir.join("vocab");
    std::fs::create_dir_all(&vocab_dir).unwrap();
    let vocab: String = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        .iter()
        .map(|t| t.to_string())
        .chain((5..50).map(|i| format!("w{i}")))
        .map(|t| t + "\n")
        .collect();
    std::fs::write(vocab_dir.join("vocab.txt"), vocab).unwrap();
    let tokenizer = Tokenizer::from_dir(&vocab_dir).unwrap();
    let out = dir.join("model");
    trainer.save(&out, &tokenizer).unwrap();

    let loaded: RoFormerForSequenceClassification = load_dir(&out, DType::F32, &Device::Cpu).unwrap();
    let saved_config = Config::from_file(out.join("config.json")).unwrap();
    assert_eq!(
        saved_config.architectures.as_deref(),
        Some(&["RoFormerForSequenceClassification".to_string()][..])
    );
    assert_eq!(saved_config.label(1), "LABEL_1");
    assert_eq!(Tokenizer::from_dir(&out).unwrap().vocab_size(), 50);
    let want = trainer.predict(&data, 8).unwrap();
    for (e, want) in data.iter().zip(&want) {
        let ids = Tensor::new(&e.encoding.input_ids[..], &Device::Cpu).unwrap().unsqueeze(0).unwrap();
        let got = loaded.forward(Inputs::new(&ids)).unwrap().squeeze(0).unwrap().to_vec1::<f32>().unwrap();
        for (a, b) in got.iter().zip(want) {
            assert!((a - b).abs() < 1e-5, "{got:?} vs {want:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn transformers_loads_a_model_saved_by_finetune() {
    // scripts/fixtures/make_finetune_fixture.sh: `finetune` saved tests/fixtures/finetune/model, and
    // transformers loaded that folder and wrote its logits.
    let folder = crate::support::fixture("finetune");
    let want: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("transformers_logits.json")).unwrap())
            .unwrap();
    let model = folder.join("model");
    let classifier = roformer::TextClassifier::from_pretrained(&model).unwrap();
    let rows = want["rows"].as_array().unwrap();
    let texts: Vec<&str> = rows.iter().map(|r| r["text"].as_str().unwrap()).collect();
    let ours = classifier.classify(&texts).unwrap();
    for (row, got) in rows.iter().zip(&ours) {
        let ids: Vec<u32> =
            row["input_ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
        assert_eq!(classifier.tokenizer().encode(row["text"].as_str().unwrap()).unwrap().input_ids, ids);
        for (a, b) in got.logits.iter().zip(row["logits"].as_array().unwrap()) {
            assert!(
                (a - b.as_f64().unwrap() as f32).abs() < 1e-4,
                "{:?}: {:?} vs {}",
                row["text"],
                got.logits,
                row["logits"]
            );
        }
    }
    assert_eq!(want["id2label"]["2"], "positive");
}
