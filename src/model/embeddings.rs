//! Word and token-type embeddings; RoFormer has no absolute position embeddings.

use candle_core::{Module, Tensor};
use candle_nn::{Embedding, Init, VarBuilder};

use crate::error::Result;
use crate::loading::config::Config;
use crate::model::layers::Norm;
use crate::model::pass::Pass;
use crate::runtime::engine::Engine;

#[derive(Debug, Clone)]
pub(crate) struct Embeddings {
    word_embeddings: Embedding,
    token_type_embeddings: Embedding,
    norm: Norm,
    dropout: f64,
}

impl Embeddings {
    /// The word embedding matrix under `vb`, loaded first: the model's engine follows it.
    pub fn load_words(vb: &VarBuilder, config: &Config) -> Result<Tensor> {
        let init = Init::Randn { mean: 0.0, stdev: config.initializer_range };
        Ok(vb.pp("word_embeddings").get_with_hints(
            (config.vocab_size, config.embedding_size()),
            "weight",
            init,
        )?)
    }

    pub fn load(vb: VarBuilder, word: Tensor, config: &Config, engine: Engine) -> Result<Self> {
        let dim = config.embedding_size();
        let init = Init::Randn { mean: 0.0, stdev: config.initializer_range };
        let token_type =
            vb.pp("token_type_embeddings").get_with_hints((config.type_vocab_size, dim), "weight", init)?;
        Ok(Self {
            word_embeddings: Embedding::new(word, dim),
            token_type_embeddings: Embedding::new(token_type, dim),
            norm: Norm::load(vb.pp("LayerNorm"), dim, config, engine)?,
            dropout: config.hidden_dropout_prob,
        })
    }

    /// The word embedding matrix, which the masked-LM decoder shares when the file omits its own.
    pub fn word_embeddings(&self) -> &Tensor {
        self.word_embeddings.embeddings()
    }

    pub fn forward(&self, input_ids: &Tensor, token_type_ids: &Tensor, pass: &Pass) -> Result<Tensor> {
        let words = self.word_embeddings.forward(input_ids)?;
        let types = self.token_type_embeddings.forward(token_type_ids)?;
        let xs = self.norm.forward_residual(&words, &types)?;
        pass.dropout(&xs, self.dropout)
    }
}
