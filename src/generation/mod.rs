//! Text generation for causal-LM checkpoints: a key-value cache (the runtime's `kv_cache`: the
//! source runs once, then one token per step), several samples of one source decoded together as
//! one batch, and greedy, temperature, top-k and top-p sampling from a seed.
//!
//! junnyu's sim checkpoints generate as UniLM does ([`GenerationMode::SourceThenTarget`]): the
//! source `[CLS] text [SEP]` (token type 0) attends to itself in both directions, and each
//! generated token (token type 1, positions continuing after the source) attends to the whole
//! source and to the generated tokens before it. Other `RoFormerForCausalLM` checkpoints decode
//! causally ([`GenerationMode::Causal`]). A plain causal mask, token type 0 on generated tokens,
//! or a bidirectional recompute would each give other tokens than the sim checkpoints' own code.

pub(crate) mod causal_lm;

use candle_core::{DType, Tensor};

use crate::error::{Error, Result};
use crate::generation::causal_lm::{GenerationMode, RoFormerForCausalLM};
use crate::model::layers::SplitMix64;
use crate::model::task::TaskModel;
use crate::runtime::scores::argmax;

/// How the next token is picked from the scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// The highest score (the first on ties), as transformers' `do_sample=False`.
    Greedy,
    /// Drawn from softmax(scores / `temperature`), restricted to the `top_k` best tokens (all
    /// when `None`) and then to the smallest set of them holding `top_p` of the probability, in
    /// transformers' order (temperature, top-k, top-p).
    Sample {
        /// Above 0; 1 leaves the scores as they are.
        temperature: f32,
        /// At least 1, or `None` for no limit.
        top_k: Option<usize>,
        /// In (0, 1]; 1 keeps every token.
        top_p: f32,
    },
}

/// What [`RoFormerForCausalLM::generate`] does: how many tokens, how many samples, how they are
/// picked, and when a sample ends.
#[derive(Debug, Clone, PartialEq)]
pub struct GenerationOptions {
    max_new_tokens: usize,
    num_samples: usize,
    sampling: Sampling,
    seed: u64,
    eos_token_id: Option<u32>,
    mode: Option<GenerationMode>,
}

impl Default for GenerationOptions {
    /// One greedy sample of up to 32 new tokens, seed 0, no end token, the checkpoint's mode.
    fn default() -> Self {
        Self {
            max_new_tokens: 32,
            num_samples: 1,
            sampling: Sampling::Greedy,
            seed: 0,
            eos_token_id: None,
            mode: None,
        }
    }
}

impl GenerationOptions {
    /// At most this many new tokens per sample (the end token included).
    pub fn with_max_new_tokens(mut self, max_new_tokens: usize) -> Self {
        self.max_new_tokens = max_new_tokens;
        self
    }

    /// Decodes this many samples of the source together, as one batch.
    pub fn with_num_samples(mut self, num_samples: usize) -> Self {
        self.num_samples = num_samples;
        self
    }

    /// How each token is picked.
    pub fn with_sampling(mut self, sampling: Sampling) -> Self {
        self.sampling = sampling;
        self
    }

    /// The seed of sampling: the same seed, source and options give the same samples.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// A sample ends when it generates this token, which its output leaves out. The sim
    /// checkpoints' configs name none: their tokenizers' `[SEP]` ends them.
    pub fn with_eos_token_id(mut self, eos_token_id: u32) -> Self {
        self.eos_token_id = Some(eos_token_id);
        self
    }

    /// Overrides the checkpoint's mode (see [`RoFormerForCausalLM::generation_mode`]).
    pub fn with_mode(mut self, mode: GenerationMode) -> Self {
        self.mode = Some(mode);
        self
    }

    /// The number of samples per source.
    pub fn num_samples(&self) -> usize {
        self.num_samples
    }

    /// The token that ends a sample, if any.
    pub fn eos_token_id(&self) -> Option<u32> {
        self.eos_token_id
    }

    /// What [`RoFormerForCausalLM::generate`] would refuse in these options alone, whatever the
    /// source: so that a program can check its flags before it loads a model.
    pub fn validate(&self) -> Result<()> {
        let bad = |option: &str, message: String| Err(Error::option(option, message));
        if self.num_samples == 0 {
            return Err(Error::at_least_one("num_samples"));
        }
        if self.max_new_tokens == 0 {
            return Err(Error::at_least_one("max_new_tokens"));
        }
        if let Sampling::Sample { temperature, top_k, top_p } = self.sampling {
            if !(temperature > 0.0 && temperature.is_finite()) {
                return bad(
                    "temperature",
                    format!("temperature {temperature} must be a finite number above 0"),
                );
            }
            if top_k == Some(0) {
                return Err(Error::at_least_one("top_k"));
            }
            if !(top_p > 0.0 && top_p <= 1.0) {
                return bad("top_p", format!("top_p {top_p} must be in (0, 1]"));
            }
        }
        Ok(())
    }

    /// Refuses options that cannot generate from a source of `source_len` tokens.
    fn check(&self, source_len: usize, max_positions: usize) -> Result<()> {
        self.validate()?;
        if source_len == 0 {
            return Err(Error::Input("the source has no tokens".into()));
        }
        if source_len + self.max_new_tokens > max_positions {
            return Err(Error::Input(format!(
                "the source has {source_len} tokens: with max_new_tokens {} that is {} positions, past the \
                 model's max_position_embeddings {max_positions}; shorten the source or ask for fewer tokens",
                self.max_new_tokens,
                source_len + self.max_new_tokens
            )));
        }
        Ok(())
    }
}

impl RoFormerForCausalLM {
    /// `num_samples` continuations of `source` (token ids, `[CLS] text [SEP]` for the sim
    /// checkpoints), each the generated ids without the end token, in sample order.
    ///
    /// The source runs once; its cache is then copied to every sample, and the samples advance
    /// together, one token per step, until each has generated the end token or
    /// `max_new_tokens`.
    pub fn generate(&self, source: &[u32], options: &GenerationOptions) -> Result<Vec<Vec<u32>>> {
        let model = self.roformer();
        options.check(source.len(), model.config().max_position_embeddings)?;
        if let Some(&id) = source.iter().find(|&&id| id as usize >= model.config().vocab_size) {
            return Err(Error::Input(format!(
                "source token id {id} is past the vocabulary ({} tokens)",
                model.config().vocab_size
            )));
        }
        let mode = options.mode.unwrap_or(self.generation_mode());
        let (n, src) = (options.num_samples, source.len());
        let sees = move |q: usize, k: usize| k <= q || (mode == GenerationMode::SourceThenTarget && k < src);
        let target_type = u32::from(mode == GenerationMode::SourceThenTarget);
        let device = model.device();

        let mut cache = model.kv_cache(1, src + options.max_new_tokens)?;
        let ids = Tensor::new(source, device)?.unsqueeze(0)?;
        let source_logits =
            self.next_token_logits(&model.run_cached(&ids, &ids.zeros_like()?, &cache, sees)?)?;
        cache.select(&vec![0; n])?;
        let mut logits = vec![source_logits[0].clone(); n];

        let mut samplers: Vec<Sampler> =
            (0..n).map(|i| Sampler::new(options.sampling, options.seed, i)).collect();
        let mut outputs = vec![Vec::new(); n];
        let mut done = vec![false; n];
        // The sample each cache row holds: rows of finished samples are dropped in bunches, since
        // each drop copies the whole cache.
        let mut rows: Vec<usize> = (0..n).collect();
        for step in 0..options.max_new_tokens {
            let mut next = Vec::with_capacity(rows.len());
            for (row, &sample) in rows.iter().enumerate() {
                if done[sample] {
                    next.push(0);
                    continue;
                }
                let token = samplers[sample].pick(&logits[row]);
                if Some(token) == options.eos_token_id {
                    done[sample] = true;
                } else {
                    outputs[sample].push(token);
                }
                next.push(token);
            }
            let finished = rows.iter().filter(|&&s| done[s]).count();
            if step + 1 == options.max_new_tokens || finished == rows.len() {
                break;
            }
            if finished * 4 >= rows.len() {
                let keep: Vec<usize> = (0..rows.len()).filter(|&r| !done[rows[r]]).collect();
                cache.select(&keep.iter().map(|&r| r as u32).collect::<Vec<_>>())?;
                next = keep.iter().map(|&r| next[r]).collect();
                rows = keep.iter().map(|&r| rows[r]).collect();
            }
            let ids = Tensor::new(next.as_slice(), device)?.unsqueeze(1)?;
            let types = (ids.ones_like()? * f64::from(target_type))?;
            logits = self.next_token_logits(&model.run_cached(&ids, &types, &cache, sees)?)?;
        }
        Ok(outputs)
    }

    /// The scores of the token after the last position of `hidden` (batch, len, hidden), one
    /// row per sequence.
    fn next_token_logits(&self, hidden: &Tensor) -> Result<Vec<Vec<f32>>> {
        let last = hidden.narrow(1, hidden.dim(1)? - 1, 1)?.squeeze(1)?;
        Ok(self.lm_head(&last)?.to_dtype(DType::F32)?.to_vec2::<f32>()?)
    }
}

/// Picks the tokens of one sample, from its own stream of random numbers: a sample's tokens do
/// not depend on how many samples run beside it.
struct Sampler {
    sampling: Sampling,
    rng: SplitMix64,
    /// Token ids by score, reused across steps.
    order: Vec<u32>,
}

impl Sampler {
    fn new(sampling: Sampling, seed: u64, sample: usize) -> Self {
        // Seeds a sample's stream from (seed, sample) through one SplitMix64 output, so streams
        // of nearby seeds or samples are not shifted copies of each other.
        let stream = SplitMix64::new(seed ^ (sample as u64).wrapping_mul(0xD1B5_4A32_D192_ED03)).next_u64();
        Self { sampling, rng: SplitMix64::new(stream), order: Vec::new() }
    }

    fn pick(&mut self, logits: &[f32]) -> u32 {
        match self.sampling {
            Sampling::Greedy => argmax(logits) as u32,
            Sampling::Sample { temperature, top_k, top_p } => self.sample(logits, temperature, top_k, top_p),
        }
    }

    fn sample(&mut self, logits: &[f32], temperature: f32, top_k: Option<usize>, top_p: f32) -> u32 {
        let t = f64::from(temperature);
        let max = f64::from(logits[argmax(logits)]);
        let weight = |id: u32| ((f64::from(logits[id as usize]) - max) / t).exp();
        let by_score = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]);
        let limit = top_k.unwrap_or(logits.len()).min(logits.len());
        // The probability mass of the candidates: every token, or the top k.
        let mut mass = if limit == logits.len() { (0..logits.len() as u32).map(weight).sum() } else { 0.0 };
        // Top-p needs the best tokens in order, rarely many of them: sort a few hundred, and
        // more only when they hold less than top_p of the mass.
        let mut wanted = if limit < logits.len() { limit } else { limit.min(256) };
        let kept = loop {
            self.order.clear();
            self.order.extend(0..logits.len() as u32);
            if wanted < self.order.len() {
                self.order.select_nth_unstable_by(wanted - 1, by_score);
                self.order.truncate(wanted);
            }
            self.order.sort_unstable_by(by_score);
            if limit < logits.len() {
                mass = self.order.iter().map(|&id| weight(id)).sum();
            }
            // transformers drops a token when the mass ranked above it already reaches top_p.
            let (mut above, mut kept) = (0.0, 0);
            while kept < self.order.len() && above < f64::from(top_p) * mass {
                above += weight(self.order[kept]);
                kept += 1;
            }
            if above >= f64::from(top_p) * mass || wanted == limit {
                break kept;
            }
            wanted = (wanted * 4).min(limit);
        };
        let kept_mass: f64 = self.order[..kept].iter().map(|&id| weight(id)).sum();
        let mut u = self.rng.next_f64() * kept_mass;
        for &id in &self.order[..kept] {
            u -= weight(id);
            if u < 0.0 {
                return id;
            }
        }
        self.order[kept - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_first_best() {
        assert_eq!(argmax(&[0.1, 3.0, -1.0, 3.0]), 1);
        assert_eq!(Sampler::new(Sampling::Greedy, 0, 0).pick(&[0.0, 0.5, 0.2]), 1);
    }

    #[test]
    fn top_k_and_top_p_keep_the_sets_transformers_keeps() {
        // Probabilities 0.5, 0.25, 0.125, 0.125: top_p 0.6 keeps the first two (the mass above
        // the second is 0.5 < 0.6, above the third 0.75), top_p 0.5 the first alone.
        let logits: Vec<f32> = [0.5f64, 0.25, 0.125, 0.125].iter().map(|p| p.ln() as f32).collect();
        let seen = |top_k, top_p| {
            let mut sampler = Sampler::new(Sampling::Sample { temperature: 1.0, top_k, top_p }, 7, 0);
            let mut seen = std::collections::BTreeSet::new();
            for _ in 0..400 {
                seen.insert(sampler.pick(&logits));
            }
            seen.into_iter().collect::<Vec<_>>()
        };
        assert_eq!(seen(None, 0.6), [0, 1]);
        assert_eq!(seen(None, 0.5), [0]);
        assert_eq!(seen(None, 1.0), [0, 1, 2, 3]);
        assert_eq!(seen(Some(3), 1.0).len(), 3);
        // Within the top 2 (2/3, 1/3), top_p 0.7 keeps both.
        assert_eq!(seen(Some(2), 0.7), [0, 1]);
        assert_eq!(seen(Some(1), 1.0), [0]);
    }

    #[test]
    fn sampling_follows_the_probabilities_past_the_first_candidates() {
        // 1000 equal tokens: top_p 0.9 keeps 900 of them, past the first 256 sorted.
        let logits = vec![0.0f32; 1000];
        let mut sampler = Sampler::new(Sampling::Sample { temperature: 1.0, top_k: None, top_p: 0.9 }, 1, 0);
        let picks: std::collections::BTreeSet<u32> = (0..20000).map(|_| sampler.pick(&logits)).collect();
        assert!(picks.len() > 850 && picks.len() <= 900, "{} distinct tokens", picks.len());
    }
}

#[cfg(test)]
mod cache_tests {
    use candle_core::{DType, Device, Tensor};

    use crate::generation::causal_lm::RoFormerForCausalLM;
    use crate::model::task::TaskModel;

    /// The scores after each prefix of `tokens`: with the cache (the source once, then one token
    /// per step), or recomputing the whole sequence each time with the same mask.
    fn step_scores(
        model: &RoFormerForCausalLM,
        source: &[u32],
        tokens: &[u32],
        cached: bool,
    ) -> Vec<Vec<f32>> {
        let roformer = model.roformer();
        let src = source.len();
        let sees = move |q: usize, k: usize| k <= q || k < src;
        let types = |n: usize| -> Vec<u32> { (0..n).map(|i| u32::from(i >= src)).collect() };
        let run = |cache: &crate::runtime::kv_cache::KvCache, ids: &[u32], types: &[u32]| {
            let ids = Tensor::new(ids, &Device::Cpu).unwrap().unsqueeze(0).unwrap();
            let types = Tensor::new(types, &Device::Cpu).unwrap().unsqueeze(0).unwrap();
            model
                .next_token_logits(&roformer.run_cached(&ids, &types, cache, sees).unwrap())
                .unwrap()
                .remove(0)
        };
        let all: Vec<u32> = source.iter().chain(tokens).copied().collect();
        let all_types = types(all.len());
        if cached {
            let cache = roformer.kv_cache(1, all.len()).unwrap();
            let mut scores = vec![run(&cache, source, &all_types[..src])];
            for (i, &t) in tokens.iter().enumerate() {
                scores.push(run(&cache, &[t], &all_types[src + i..src + i + 1]));
            }
            scores
        } else {
            (src..=all.len())
                .map(|n| run(&roformer.kv_cache(1, n).unwrap(), &all[..n], &all_types[..n]))
                .collect()
        }
    }

    #[test]
    fn the_cache_gives_the_scores_of_a_full_recompute() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/models/sim_generation");
        let model: RoFormerForCausalLM = crate::model::task::load_dir(dir, DType::F32, &Device::Cpu).unwrap();
        let (source, tokens) = ([2, 21, 40, 57, 18, 3], [30, 30, 8, 101, 7, 215]);
        let cached = step_scores(&model, &source, &tokens, true);
        let full = step_scores(&model, &source, &tokens, false);
        assert_eq!(cached.len(), tokens.len() + 1);
        for (step, (a, b)) in cached.iter().zip(&full).enumerate() {
            let diff =
                crate::runtime::kernels::largest(a.iter().zip(b).map(|(x, y)| f64::from((x - y).abs())));
            assert!(diff < 1e-4, "step {step}: the cached scores differ by {diff}");
        }
        // The recompute is a different computation, not the same one twice: its first pass
        // attends over the source alone, later ones over source and targets with the mask.
        assert_ne!(full[0], full[1]);
    }
}
