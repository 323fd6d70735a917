//! Where a pipeline's work runs: its own rayon thread pool (feature `threads`), or, without the
//! feature, the calling thread's rayon context (on wasm32-unknown-unknown, the calling thread).

use crate::error::{Error, Result};

/// The threads one pipeline runs on, decided once at load.
#[derive(Debug, Clone)]
pub(crate) struct Workers {
    #[cfg(feature = "threads")]
    pool: std::sync::Arc<rayon::ThreadPool>,
}

impl Workers {
    /// A pool of `threads` (default: the CPUs available).
    #[cfg(feature = "threads")]
    pub(crate) fn new(threads: Option<usize>) -> Result<Self> {
        let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("roformer-{i}"))
            .build()
            .map_err(|e| Error::option("threads", format!("cannot start {threads} threads: {e}")))?;
        Ok(Self { pool: std::sync::Arc::new(pool) })
    }

    /// No pool of its own: a thread count other than 1 cannot be honoured, so it is refused.
    #[cfg(not(feature = "threads"))]
    pub(crate) fn new(threads: Option<usize>) -> Result<Self> {
        match threads {
            Some(n) if n > 1 => Err(Error::option(
                "threads",
                format!(
                    "{n} threads need the crate's `threads` feature; this build runs on the calling thread"
                ),
            )),
            _ => Ok(Self {}),
        }
    }

    /// Runs `work` on these threads.
    pub(crate) fn install<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        #[cfg(feature = "threads")]
        return self.pool.install(work);
        #[cfg(not(feature = "threads"))]
        work()
    }
}
