//! Batch tokenization throughput, in tokens per second, for the jieba and the BERT paths.
//! `cargo bench --bench tokenizer`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use roformer::{Padding, Tokenizer, Truncation};

fn corpus() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tokenizer/corpus.json");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    json["singles"].as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

fn bench(c: &mut Criterion) {
    let texts = corpus();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let mut group = c.benchmark_group("encode_batch");
    for vocab in ["roformer_chinese_base", "bert-base-uncased"] {
        let dir = format!("{}/tests/fixtures/vocab/{vocab}", env!("CARGO_MANIFEST_DIR"));
        let mut tok = Tokenizer::from_dir(dir).unwrap();
        tok.set_truncation(Some(Truncation::LongestFirst), Some(512)).unwrap();
        tok.set_padding(Some(Padding::Longest));
        let tokens: usize = tok
            .encode_batch(&texts)
            .unwrap()
            .iter()
            .map(|e| e.attention_mask.iter().sum::<u32>() as usize)
            .sum();
        group.throughput(Throughput::Elements(tokens as u64));
        group.bench_function(vocab, |b| b.iter(|| tok.encode_batch(&texts).unwrap()));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
