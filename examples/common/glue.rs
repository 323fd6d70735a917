//! The GLUE tasks: which columns of their TSV files hold texts and labels, and how they are scored.

use std::str::FromStr;

use anyhow::{anyhow, bail, Result};
use roformer::{Classification, Config, ProblemType};

use super::metrics;

/// A GLUE task: which columns hold the texts and the label, and which metric scores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    Cola,
    Sst2,
    Mrpc,
    Qqp,
    Stsb,
    Mnli,
    Qnli,
    Rte,
    Wnli,
}

/// How predictions are scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Accuracy,
    /// F1 of the positive class, and accuracy (MRPC, QQP).
    F1Accuracy,
    /// Matthews correlation (CoLA).
    Matthews,
    /// Pearson and Spearman correlation (STS-B).
    PearsonSpearman,
}

impl FromStr for Task {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.to_ascii_lowercase().replace('-', "").as_str() {
            "cola" => Task::Cola,
            "sst2" => Task::Sst2,
            "mrpc" => Task::Mrpc,
            "qqp" => Task::Qqp,
            "stsb" => Task::Stsb,
            "mnli" => Task::Mnli,
            "qnli" => Task::Qnli,
            "rte" => Task::Rte,
            "wnli" => Task::Wnli,
            _ => bail!("unknown task `{s}` (cola, sst2, mrpc, qqp, stsb, mnli, qnli, rte, wnli)"),
        })
    }
}

impl Task {
    /// Text, pair and label columns by header name; CoLA's train/dev files have no header, so
    /// its columns are also given by position.
    pub fn columns(self) -> Columns {
        let named = |text: &str, pair: Option<&str>, label: &str| Columns {
            text: Column::Name(text.into()),
            pair: pair.map(|p| Column::Name(p.into())),
            label: Some(Column::Name(label.into())),
        };
        match self {
            Task::Cola => Columns { text: Column::Index(3), pair: None, label: Some(Column::Index(1)) },
            Task::Sst2 => named("sentence", None, "label"),
            Task::Mrpc => named("#1 String", Some("#2 String"), "Quality"),
            Task::Qqp => named("question1", Some("question2"), "is_duplicate"),
            Task::Stsb => named("sentence1", Some("sentence2"), "score"),
            Task::Mnli => named("sentence1", Some("sentence2"), "gold_label"),
            Task::Qnli => named("question", Some("sentence"), "label"),
            Task::Rte | Task::Wnli => named("sentence1", Some("sentence2"), "label"),
        }
    }

    pub fn metric(self) -> Metric {
        match self {
            Task::Cola => Metric::Matthews,
            Task::Mrpc | Task::Qqp => Metric::F1Accuracy,
            Task::Stsb => Metric::PearsonSpearman,
            _ => Metric::Accuracy,
        }
    }
}

/// A column by header name or by 0-based position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Column {
    Name(String),
    Index(usize),
}

impl FromStr for Column {
    type Err = std::convert::Infallible;
    /// A number is a position; anything else a header name.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Ok(s.parse::<usize>().map(Column::Index).unwrap_or_else(|_| Column::Name(s.to_string())))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    pub text: Column,
    pub pair: Option<Column>,
    /// Where labels are, if the file has them.
    pub label: Option<Column>,
}

impl Columns {
    /// Columns given one by one win over a task's; with neither, `None`.
    pub fn select(
        task: Option<Task>,
        text: Option<Column>,
        pair: Option<Column>,
        label: Option<Column>,
    ) -> Option<Self> {
        match (task, text) {
            (_, Some(text)) => Some(Columns { text, pair, label }),
            (Some(task), None) => Some(task.columns()),
            (None, None) => None,
        }
    }
}

/// The class id of a label as written in a data file: the config's label2id, else the number.
pub fn label_to_id(label: &str, config: &Config) -> Result<usize> {
    if let Some(id) = config.label2id.as_ref().and_then(|m| m.get(label)) {
        return Ok(*id);
    }
    let id: usize = label
        .parse()
        .map_err(|_| anyhow!("label `{label}` is neither in the model's label2id nor a class number"))?;
    if id >= config.num_labels() {
        bail!("label {id} is out of range for a model with {} labels", config.num_labels());
    }
    Ok(id)
}

/// Scores predictions against the labels of a file with the task's metric (accuracy when no task
/// is given; Pearson and Spearman for a regression model).
pub fn evaluate(
    metric: Option<Metric>,
    config: &Config,
    predictions: &[Classification],
    labels: &[&str],
) -> Result<Vec<(&'static str, f64)>> {
    if config.problem_type() == ProblemType::Regression {
        let gold = labels
            .iter()
            .map(|l| l.parse::<f64>().map_err(|_| anyhow!("label `{l}` is not a number")))
            .collect::<Result<Vec<_>>>()?;
        let predicted: Vec<f64> = predictions.iter().map(|p| p.score as f64).collect();
        return Ok(metrics::regression_scores(&predicted, &gold));
    }
    let gold = labels.iter().map(|l| label_to_id(l, config)).collect::<Result<Vec<_>>>()?;
    let predicted: Vec<usize> = predictions.iter().map(|p| p.label_id).collect();
    Ok(metrics::classification_scores(metric.unwrap_or(Metric::Accuracy), &predicted, &gold))
}
