//! The GLUE tasks: which columns of their TSV files hold texts and labels, and how they are scored.

use std::str::FromStr;

use anyhow::{anyhow, bail, Result};
use roformer::{Classification, Config, ProblemType};

use super::metrics;
use super::tsv::Dataset;

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

    /// Whether the task's files start with a header line: all but CoLA's train and dev files.
    pub fn has_header(self) -> bool {
        self != Task::Cola
    }

    /// What the GLUE server expects in a submission's prediction column, in the datasets' class
    /// order; `None` for STS-B, whose predictions are numbers.
    pub fn submission_values(self) -> Option<&'static [&'static str]> {
        match self {
            Task::Cola | Task::Sst2 | Task::Mrpc | Task::Qqp | Task::Wnli => Some(&["0", "1"]),
            Task::Qnli | Task::Rte => Some(&["entailment", "not_entailment"]),
            Task::Mnli => Some(&["entailment", "neutral", "contradiction"]),
            Task::Stsb => None,
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
    /// Columns given one by one win over a task's; with neither, `None`. A pair or label column
    /// with neither a text column nor a task is an error, not ignored.
    pub fn select(
        task: Option<Task>,
        text: Option<Column>,
        pair: Option<Column>,
        label: Option<Column>,
    ) -> Result<Option<Self>> {
        let base = task.map(Task::columns);
        let text = match (text, &base) {
            (Some(text), _) => text,
            (None, Some(base)) => base.text.clone(),
            (None, None) if pair.is_some() || label.is_some() => {
                bail!("--pair-col and --label-col need --text-col (or a --task) to say where the text is")
            }
            (None, None) => return Ok(None),
        };
        Ok(Some(Columns {
            text,
            pair: pair.or_else(|| base.as_ref().and_then(|b| b.pair.clone())),
            label: label.or_else(|| base.as_ref().and_then(|b| b.label.clone())),
        }))
    }

    /// The columns chosen by header name.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        [Some(&self.text), self.pair.as_ref(), self.label.as_ref()].into_iter().flatten().filter_map(|c| {
            match c {
                Column::Name(n) => Some(n.as_str()),
                Column::Index(_) => None,
            }
        })
    }
}

/// How a class is written in a GLUE submission: per class id, the task's value. A class maps to
/// the value its name or number stands for in the model's labels; when the names are not the
/// task's (LABEL_0, ...) and the counts agree, classes map in the datasets' order.
pub fn submission_labels(task: Task, config: &Config) -> Result<Option<Vec<String>>> {
    let Some(values) = task.submission_values() else { return Ok(None) };
    let n = config.num_labels();
    let by_name: Vec<Option<&str>> = (0..n)
        .map(|id| {
            let name = config.label(id);
            values.iter().copied().find(|&v| v == name || label_to_id(v, config).ok() == Some(id))
        })
        .collect();
    if by_name.iter().all(Option::is_some) {
        return Ok(Some(by_name.into_iter().flatten().map(str::to_string).collect()));
    }
    if n == values.len() {
        return Ok(Some(values.iter().map(|v| v.to_string()).collect()));
    }
    bail!(
        "the model has {n} classes, and {task:?} submissions take {} values ({}): use --format jsonl for the model's own labels",
        values.len(),
        values.join(", ")
    )
}

/// Checks every row's label against the model before anything runs, naming the line of a bad one
/// (an error, or a skipped line with `skip`).
pub fn check_labels(data: &mut Dataset, source: &str, config: &Config, skip: bool) -> Result<()> {
    let regression = config.problem_type() == ProblemType::Regression;
    let rows = std::mem::take(&mut data.rows);
    for row in rows {
        let fault = match row.label.as_deref() {
            Some(l) if regression => l.parse::<f64>().err().map(|_| format!("label `{l}` is not a number")),
            Some(l) => label_to_id(l, config).err().map(|e| e.to_string()),
            None => None,
        };
        match fault {
            Some(message) => data.bad_line(source, row.line, message, skip)?,
            None => data.rows.push(row),
        }
    }
    Ok(())
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
