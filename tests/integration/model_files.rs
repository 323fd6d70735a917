//! Model folders held in memory, and the SST-2 model built into the crate: they must load exactly
//! as the same folder on disk, and fail with errors naming the file at fault.

use std::borrow::Cow;
use std::path::Path;

use roformer::{Error, ModelFiles, PipelineOptions, SentenceEncoder, TextClassifier};

use crate::support::fixture;

/// Every file under `dir`, by its `/`-separated path inside it.
fn read_folder(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let name = path.strip_prefix(root).unwrap().to_str().unwrap().replace('\\', "/");
                out.push((name, std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out
}

#[cfg(feature = "bundled-sst2")]
const SENTENCES: [&str; 4] =
    ["a gorgeous , witty movie .", "not good at all", "it 's a charming and often affecting journey .", ""];

#[cfg(feature = "bundled-sst2")]
#[test]
fn the_built_in_model_gives_the_same_logits_as_its_folder_on_disk() -> roformer::Result<()> {
    let disk = TextClassifier::from_pretrained(concat!(env!("CARGO_MANIFEST_DIR"), "/models/roformer-sst2"))?;
    let bundled = TextClassifier::bundled()?;
    let (want, got) = (disk.classify(&SENTENCES)?, bundled.classify(&SENTENCES)?);
    assert_eq!(got.len(), SENTENCES.len());
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w.logits, g.logits);
        assert_eq!(w.label, g.label);
    }
    assert_eq!(got[0].label, crate::bundled_model::label_of(SENTENCES[0]));
    assert_eq!(got[1].label, crate::bundled_model::label_of(SENTENCES[1]));
    assert_eq!(bundled.path(), Path::new("bundled:roformer-sst2"));
    Ok(())
}

#[cfg(feature = "bundled-sst2")]
#[test]
fn the_built_in_model_takes_options_like_any_folder() -> roformer::Result<()> {
    let int8 = PipelineOptions::default().with_quantization(roformer::Quantization::Int8).with_threads(1);
    let classifier = TextClassifier::bundled_with(int8)?;
    // int8 keeps transformers' f32 labels on these two clear cases.
    let labels = classifier.classify(&SENTENCES[..2])?;
    assert_eq!(labels[0].label, crate::bundled_model::label_of(SENTENCES[0]));
    assert_eq!(labels[1].label, crate::bundled_model::label_of(SENTENCES[1]));
    let zero = TextClassifier::bundled_with(PipelineOptions::default().with_batch_size(0));
    assert!(matches!(zero, Err(Error::InvalidOption { option, .. }) if option == "batch_size"));
    Ok(())
}

#[test]
fn a_sentence_transformers_folder_in_memory_encodes_as_on_disk() -> roformer::Result<()> {
    let dir = fixture("sentence_transformers/st6_cls_dense");
    let files = ModelFiles::from_memory("st6", read_folder(&dir))?;
    let texts = ["a great film", "the movie was terrible"];
    let options = || PipelineOptions::default().with_prompt_name("query");
    let want = SentenceEncoder::from_pretrained_with(&dir, options())?.encode(&texts)?;
    let got = SentenceEncoder::from_files(&files, options())?.encode(&texts)?;
    assert_eq!(want, got);
    Ok(())
}

#[test]
fn a_cross_encoder_in_memory_keeps_its_activation() -> roformer::Result<()> {
    let dir = fixture("sentence_transformers/cross_encoder");
    let files = ModelFiles::from_memory("ce", read_folder(&dir))?;
    let pairs = [("a good movie", "a great film"), ("a good movie", "the cat sat")];
    let want = roformer::Reranker::from_pretrained(&dir)?.predict(&pairs)?;
    let got = roformer::Reranker::from_classifier(TextClassifier::from_files(&files, Default::default())?)?
        .predict(&pairs)?;
    assert_eq!(want, got);
    Ok(())
}

/// A weight file held "elsewhere", as a page's JavaScript buffer is, counting the bytes read.
struct Elsewhere {
    bytes: Vec<u8>,
    read: std::sync::atomic::AtomicU64,
}

impl roformer::RangedBytes for Elsewhere {
    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let start = offset as usize;
        let part = self.bytes.get(start..start + buf.len()).ok_or(std::io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(part);
        self.read.fetch_add(buf.len() as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn weights_read_in_ranges_load_as_on_disk_and_are_let_go_after_the_load() -> roformer::Result<()> {
    let dir = fixture("pipelines/cls");
    let weights = std::fs::read(dir.join("model.safetensors")).unwrap();
    let elsewhere = std::sync::Arc::new(Elsewhere { bytes: weights.clone(), read: Default::default() });
    let mut files: Vec<(String, roformer::FileBytes)> = read_folder(&dir)
        .into_iter()
        .filter(|(name, _)| name != "model.safetensors")
        .map(|(name, bytes)| (name, bytes.into()))
        .collect();
    let ranged: std::sync::Arc<dyn roformer::RangedBytes> = elsewhere.clone();
    files.push(("model.safetensors".into(), ranged.into()));
    let files = ModelFiles::from_memory("elsewhere", files)?;
    let texts = ["a great film", "the movie was terrible"];
    let want = TextClassifier::from_pretrained(&dir)?.classify(&texts)?;
    let classifier = TextClassifier::from_files(&files, Default::default())?;
    assert_eq!(want, classifier.classify(&texts)?);
    drop(files);
    // Every tensor read once (the header too), and nothing of the file kept by the loaded model.
    let read = elsewhere.read.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        read <= weights.len() as u64 && read > weights.len() as u64 * 9 / 10,
        "{read} of {}",
        weights.len()
    );
    assert_eq!(
        std::sync::Arc::strong_count(&elsewhere),
        1,
        "the loaded classifier still holds the weight file"
    );
    Ok(())
}

fn sst2_files() -> Vec<(String, Vec<u8>)> {
    read_folder(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/models/roformer-sst2")))
}

fn load_error(files: Vec<(String, Vec<u8>)>) -> Error {
    let files = ModelFiles::from_memory("mem", files).unwrap();
    TextClassifier::from_files(&files, Default::default()).unwrap_err()
}

#[test]
fn an_in_memory_folder_names_the_file_at_fault() {
    let without = |name: &str| sst2_files().into_iter().filter(|(n, _)| n != name).collect::<Vec<_>>();
    let with = |name: &str, bytes: &[u8]| {
        let mut files = without(name);
        files.push((name.to_string(), bytes.to_vec()));
        files
    };

    let e = load_error(without("config.json"));
    assert!(matches!(&e, Error::Io { path, .. } if path == Path::new("mem/config.json")), "{e}");

    let e = load_error(without("model.safetensors"));
    assert!(e.to_string().contains("no weights found"), "{e}");

    let e = load_error(with("model.safetensors", b"not safetensors"));
    assert!(
        matches!(&e, Error::Checkpoint { path, .. } if path == Path::new("mem/model.safetensors")),
        "{e}"
    );

    let mut pickle = without("model.safetensors");
    pickle.push(("pytorch_model.bin".into(), vec![0; 16]));
    let e = load_error(pickle);
    assert!(e.to_string().contains("safetensors, not a PyTorch pickle"), "{e}");

    let e = load_error(without("vocab.txt"));
    assert!(matches!(&e, Error::Vocab { path, .. } if path == Path::new("mem/vocab.txt")), "{e}");

    let e = load_error(with("vocab.txt", b"[PAD]\n[UNK]\n\xff\n"));
    assert!(matches!(&e, Error::Vocab { line: Some(3), .. }), "{e}");

    let e = load_error(with("config.json", b"{\"hidden_size\": "));
    assert!(matches!(&e, Error::Config { path: Some(p), .. } if p == Path::new("mem/config.json")), "{e}");
}

#[test]
fn an_in_memory_folder_refuses_paths_outside_it() {
    for bad in ["../config.json", "/etc/passwd", ""] {
        let e = ModelFiles::from_memory("mem", [(bad, Cow::Borrowed(&b"{}"[..]))]).unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{bad}: {e}");
    }
}
