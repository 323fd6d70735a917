//! Which files make a model folder, and in which order they are asked for: the Hub client
//! (`crate::loading::hub`) and `ModelFiles::from_fetch` both follow this one plan, so a repo
//! brings the same files whichever of them loads it. The plan does no I/O (one loader blocks on
//! HTTP, the other awaits the caller's fetch): a loader asks for the file the plan names and tells
//! it what came back.

use std::collections::VecDeque;
use std::path::Path;

use crate::error::Result;
use crate::loading::layout::{
    is_shard_index, module_folders, shard_names, MODULE_FILES, OPTIONAL_FILES, TRANSFORMER_CONFIG_FILES,
    WEIGHT_FILES,
};

/// The files to ask for after `config.json`, which a loader fetches first (the Hub client pins
/// the commit it names): the weights (the first of [`WEIGHT_FILES`], an index with its shards),
/// the tokenizer and sentence-transformers files and, where there is a `modules.json`, the
/// Transformer module's settings (the first of [`TRANSFORMER_CONFIG_FILES`]) and the files of
/// each module it names.
pub(crate) struct FilePlan {
    queue: VecDeque<Ask>,
}

/// One file to ask for.
pub(crate) struct Ask {
    file: String,
    role: Role,
}

/// What an answer about a file decides.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// One of the weight files: the first found is the checkpoint.
    Weights,
    /// A shard the index `index` lists: the folder cannot load without it.
    Shard { index: &'static str },
    /// A tokenizer or sentence-transformers file; `modules.json` names the modules' folders.
    Optional,
    /// One name of the Transformer module's settings: the first found is read.
    TransformerConfig,
    /// A file in a module's folder.
    ModuleFile,
}

/// A file the folder cannot load without, which the server does not have.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Missing {
    /// None of the weight files.
    Weights,
    /// A shard the index `index` lists.
    Shard { index: &'static str, shard: String },
}

impl Missing {
    /// The file an error names: the preferred weight file, or the shard.
    pub(crate) fn file(&self) -> &str {
        match self {
            Missing::Weights => WEIGHT_FILES[0],
            Missing::Shard { shard, .. } => shard,
        }
    }
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Missing::Weights => {
                f.write_str("no model.safetensors, shard index, pytorch_model.bin or its index")
            }
            Missing::Shard { index, .. } => write!(f, "listed in {index} but not found"),
        }
    }
}

impl Ask {
    /// The path inside the folder.
    pub(crate) fn file(&self) -> &str {
        &self.file
    }
}

impl FilePlan {
    pub(crate) fn new() -> Self {
        let ask = |role| move |file: &&str| Ask { file: file.to_string(), role };
        let queue =
            WEIGHT_FILES.iter().map(ask(Role::Weights)).chain(OPTIONAL_FILES.iter().map(ask(Role::Optional)));
        Self { queue: queue.collect() }
    }

    /// The next file to ask for; `None` once the folder is complete.
    pub(crate) fn next(&mut self) -> Option<Ask> {
        self.queue.pop_front()
    }

    /// `ask`'s file was found. `contents` gives its bytes and is called only where the plan reads
    /// them (a shard index, `modules.json`); `path` names the file in errors.
    pub(crate) fn found<B: AsRef<[u8]>>(
        &mut self,
        ask: &Ask,
        path: &Path,
        contents: impl FnOnce() -> Result<B>,
    ) -> Result<()> {
        match ask.role {
            Role::Weights => {
                self.queue.retain(|a| a.role != Role::Weights);
                if let Some(index) = WEIGHT_FILES.into_iter().find(|f| *f == ask.file && is_shard_index(f)) {
                    let shards = shard_names(contents()?.as_ref(), path)?;
                    for shard in shards.into_iter().rev() {
                        self.queue.push_front(Ask { file: shard, role: Role::Shard { index } });
                    }
                }
            }
            Role::Optional if ask.file == "modules.json" => {
                let folders = module_folders(contents()?.as_ref(), path)?;
                let settings = TRANSFORMER_CONFIG_FILES
                    .into_iter()
                    .map(|file| Ask { file: file.to_string(), role: Role::TransformerConfig });
                let module_files = folders.iter().flat_map(|folder| {
                    MODULE_FILES
                        .into_iter()
                        .map(move |file| Ask { file: format!("{folder}/{file}"), role: Role::ModuleFile })
                });
                self.queue.extend(settings.chain(module_files));
            }
            Role::TransformerConfig => self.queue.retain(|a| a.role != Role::TransformerConfig),
            Role::Shard { .. } | Role::Optional | Role::ModuleFile => {}
        }
        Ok(())
    }

    /// `ask`'s file is not there: what the folder then lacks, where it cannot load without it.
    pub(crate) fn missing(&self, ask: &Ask) -> Option<Missing> {
        match ask.role {
            Role::Shard { index } => Some(Missing::Shard { index, shard: ask.file.clone() }),
            Role::Weights if !self.queue.iter().any(|a| a.role == Role::Weights) => Some(Missing::Weights),
            Role::Weights | Role::Optional | Role::TransformerConfig | Role::ModuleFile => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// The files asked for, in order, from a server holding `folder` (each file's contents), and
    /// what the folder lacked, if anything.
    fn follow(folder: &[(&str, &str)]) -> (Vec<String>, Option<Missing>) {
        let folder: BTreeMap<&str, &str> = folder.iter().copied().collect();
        let (mut plan, mut asked) = (FilePlan::new(), Vec::new());
        while let Some(ask) = plan.next() {
            asked.push(ask.file().to_string());
            match folder.get(ask.file()) {
                Some(contents) => {
                    plan.found(&ask, Path::new(ask.file()), || Ok(contents.as_bytes())).unwrap()
                }
                None => {
                    if let Some(missing) = plan.missing(&ask) {
                        return (asked, Some(missing));
                    }
                }
            }
        }
        (asked, None)
    }

    #[test]
    fn a_plain_folder_brings_its_first_weights_and_the_optional_files() {
        let (asked, missing) =
            follow(&[("model.safetensors", ""), ("pytorch_model.bin", ""), ("vocab.txt", "")]);
        assert_eq!(missing, None);
        let expected: Vec<&str> = ["model.safetensors"].into_iter().chain(OPTIONAL_FILES).collect();
        assert_eq!(asked, expected);
    }

    #[test]
    fn a_shard_index_brings_its_shards_next_and_each_is_required() {
        let index = r#"{"weight_map": {"a": "b-2.bin", "b": "b-1.bin", "c": "b-2.bin"}}"#;
        let folder = [("pytorch_model.bin.index.json", index), ("b-1.bin", ""), ("b-2.bin", "")];
        let (asked, missing) = follow(&folder);
        assert_eq!(missing, None);
        let expected: Vec<&str> =
            WEIGHT_FILES.into_iter().chain(["b-1.bin", "b-2.bin"]).chain(OPTIONAL_FILES).collect();
        assert_eq!(asked, expected);

        let (asked, missing) = follow(&folder[..2]);
        let index = "pytorch_model.bin.index.json";
        assert_eq!(missing, Some(Missing::Shard { index, shard: "b-2.bin".into() }));
        assert_eq!(asked.last().map(String::as_str), Some("b-2.bin"));
    }

    #[test]
    fn no_weights_is_missing_once_every_weight_file_was_asked_for() {
        let (asked, missing) = follow(&[("vocab.txt", "")]);
        assert_eq!(missing, Some(Missing::Weights));
        assert_eq!(asked, WEIGHT_FILES);
    }

    #[test]
    fn modules_json_brings_the_first_transformer_settings_and_each_modules_files() {
        let modules = r#"[{"path": ""}, {"path": "1_Pooling"}, {"path": "2_Dense"}]"#;
        let folder = [
            ("model.safetensors", ""),
            ("modules.json", modules),
            ("sentence_roberta_config.json", ""),
            ("sentence_xlnet_config.json", ""),
        ];
        let (asked, missing) = follow(&folder);
        assert_eq!(missing, None);
        let modules = ["1_Pooling", "2_Dense"]
            .into_iter()
            .flat_map(|m| MODULE_FILES.into_iter().map(move |f| format!("{m}/{f}")));
        let expected: Vec<String> = ["model.safetensors"]
            .into_iter()
            .chain(OPTIONAL_FILES)
            .chain(["sentence_bert_config.json", "sentence_roberta_config.json"])
            .map(str::to_string)
            .chain(modules)
            .collect();
        assert_eq!(asked, expected);
    }

    #[test]
    fn a_malformed_index_or_modules_json_is_an_error_naming_it() {
        for (file, contents) in [("model.safetensors.index.json", "{}"), ("modules.json", "[")] {
            let mut plan = FilePlan::new();
            let ask = std::iter::from_fn(|| plan.next()).find(|a| a.file() == file).unwrap();
            let err = plan.found(&ask, Path::new(file), || Ok(contents)).unwrap_err();
            assert!(err.to_string().contains(file), "{err}");
        }
    }
}
