//! Sentences per second of the classifier pipeline (tokenize, batch, forward, softmax) on the bundled
//! model, over the tokenizer corpus, on 2 threads as its peer is. `cargo bench --bench classify`;
//! `scripts/bench/bench_classify.py` is the peer.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use roformer::{PipelineOptions, TextClassifier};

fn bench(c: &mut Criterion) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tokenizer/corpus.json");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let texts: Vec<&str> = json["singles"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/models/roformer-sst2");
    let mut group = c.benchmark_group("classify");
    group.sample_size(20);
    group.throughput(Throughput::Elements(texts.len() as u64));
    for batch_size in [1, 32] {
        let classifier = TextClassifier::from_pretrained_with(
            model,
            PipelineOptions::default().with_batch_size(batch_size).with_threads(2),
        )
        .unwrap();
        group.bench_function(format!("batch_{batch_size}"), |b| {
            b.iter(|| classifier.classify(&texts).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
