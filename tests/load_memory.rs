//! What loading a model costs in memory, counted by this binary's allocator (no clock, no RSS):
//! the loader's largest live heap against what the loaded model keeps, at f32, int8 and bf16,
//! from a file on disk and from a folder in memory.
//!
//! The loader maps nothing: a weight file is read tensor by tensor into heap buffers, so the
//! heap counted here is all the loader holds. (A memory map's touched pages would not show
//! here; `scripts/bench/bench_memory.sh` measures the resident peak.) It is its own test binary,
//! one test, so that no other test's allocations land in the counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use candle_core::{DType, Device};
use candle_nn::{VarBuilder, VarMap};
use roformer::{Checkpoint, Config, ModelFiles, Quantization, RoFormerModel};

/// The system allocator, counting the bytes live now and the most live since the last reset.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to `System` unchanged; the counters are only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's promise about `layout` is `System::alloc`'s.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `alloc` with this `layout`, as the caller promises.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Heap bytes: (largest live during `f`, live after it with its result kept), over the live bytes
/// before it.
fn heap_cost<T>(f: impl FnOnce() -> T) -> (T, usize, usize) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let value = f();
    let (peak, after) = (PEAK.load(Ordering::Relaxed), LIVE.load(Ordering::Relaxed));
    (value, peak - before, after.saturating_sub(before))
}

const MIB: f64 = 1024.0 * 1024.0;

#[test]
fn loading_holds_what_the_model_keeps_and_one_layer_more() {
    // Shaped like a base model, smaller: the encoder's layers are most of the file, as there.
    let config = Config::from_json(
        r#"{"vocab_size": 3000, "hidden_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8,
            "intermediate_size": 2048, "initializer_range": 0.2}"#,
    )
    .unwrap();
    let dir = std::env::temp_dir().join(format!("roformer-load-memory-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("model.safetensors");
    {
        let weights = VarMap::new();
        let vb = VarBuilder::from_varmap(&weights, DType::F32, &Device::Cpu);
        RoFormerModel::load(vb, &config).unwrap();
        weights.save(&file).unwrap();
    }
    let file_bytes = std::fs::metadata(&file).unwrap().len() as usize;
    // The largest weight read at once: the feed-forward's (intermediate, hidden) matrix.
    let largest = config.intermediate_size * config.hidden_size * 4;
    let on_disk = ModelFiles::from_dir(&dir);
    let in_memory =
        ModelFiles::from_memory("in-memory", [("model.safetensors", std::fs::read(&file).unwrap())]).unwrap();

    for (source, files) in [("disk", &on_disk), ("memory", &in_memory)] {
        for precision in [Quantization::None, Quantization::Int8, Quantization::Bf16] {
            let mut config = config.clone();
            config.quantization = precision;
            let (model, peak, kept) = heap_cost(|| {
                Checkpoint::from_files(files)
                    .unwrap()
                    .load::<RoFormerModel>(&config, DType::F32, &Device::Cpu)
                    .unwrap()
            });
            println!(
                "{source} {precision}: peak {:.2} MiB, kept {:.2} MiB, file {:.2} MiB, largest weight {:.2} MiB",
                peak as f64 / MIB,
                kept as f64 / MIB,
                file_bytes as f64 / MIB,
                largest as f64 / MIB
            );
            // The weight being converted: as read, and in its packed form.
            assert!(
                peak <= kept + 2 * largest,
                "{source} {precision}: the load peaked at {peak} bytes, more than the {kept} the model keeps \
                 and two of its largest weight ({largest})"
            );
            // What is kept is the precision's own form: the encoder's weights at a quarter (int8)
            // or a half (bf16) of f32, the embeddings (8% of this file) in f32.
            let most = match precision {
                Quantization::None => file_bytes + file_bytes / 20,
                Quantization::Int8 => file_bytes * 35 / 100,
                _ => file_bytes * 60 / 100,
            };
            assert!(
                kept <= most,
                "{source} {precision}: the model keeps {kept} bytes of a {file_bytes}-byte file"
            );
            drop(model);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
