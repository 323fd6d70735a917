//! The library's surface as a user meets it: the README's pipeline program, run on local folders.

use roformer::{cosine_similarity, FillMask, PipelineOptions, Pooling, SentenceEncoder, TextClassifier};

#[test]
fn the_readme_pipeline_program_runs() -> roformer::Result<()> {
    let fixture = |name: &str| crate::support::fixture(&format!("pipelines/{name}"));
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/roformer-sst2");
    let texts = vec!["a great film".to_string(), "the movie was terrible".to_string()];

    let classifier = TextClassifier::from_pretrained(model)?;
    let predictions = classifier.classify(&["a gorgeous , witty movie .", "not good at all"])?;
    let pairs = classifier.classify_pairs(&[("good fun", "a delight")])?;
    let options = PipelineOptions::default()
        .with_batch_size(8)
        .with_max_length(64)
        .with_pooling(Pooling::Mean)
        .with_normalize(true);
    let encoder = SentenceEncoder::from_pretrained_with(fixture("sim"), options)?;
    let embeddings: Vec<Vec<f32>> = encoder.encode(&texts)?;
    let similarity = cosine_similarity(&embeddings[0], &embeddings[1]);
    let candidates = FillMask::from_pretrained(fixture("mlm"))?.fill(&["the [MASK] is here ."], 5)?;

    let label_of = crate::bundled_model::label_of;
    assert_eq!(
        [predictions[0].label.as_str(), predictions[1].label.as_str()],
        [label_of("a gorgeous , witty movie ."), label_of("not good at all")]
    );
    assert_eq!(pairs.len(), 1);
    assert_eq!(embeddings.len(), 2);
    assert!(similarity.is_finite() && similarity.abs() <= 1.0 + 1e-6);
    assert_eq!((candidates.len(), candidates[0].len(), candidates[0][0].len()), (1, 1, 5));
    Ok(())
}
