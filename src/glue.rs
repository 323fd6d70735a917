//! GLUE-style TSV input and the GLUE metrics, shared by `classify` and `finetune`.

use std::io::BufRead;
use std::str::FromStr;

use crate::error::{Error, Result};

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
    type Err = Error;
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
            _ => {
                return Err(Error::Input(format!(
                    "unknown task `{s}` (cola, sst2, mrpc, qqp, stsb, mnli, qnli, rte, wnli)"
                )))
            }
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

/// One input row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// 1-based line number in the file.
    pub line: usize,
    pub text: String,
    pub pair: Option<String>,
    pub label: Option<String>,
}

/// A malformed line, reported instead of read.
#[derive(Debug, Clone, PartialEq)]
pub struct BadLine {
    pub line: usize,
    pub message: String,
}

#[derive(Debug, Clone, Default)]
pub struct Dataset {
    pub rows: Vec<Row>,
    pub skipped: Vec<BadLine>,
    pub has_header: bool,
}

impl Dataset {
    pub fn has_labels(&self) -> bool {
        !self.rows.is_empty() && self.rows.iter().all(|r| r.label.is_some())
    }
}

/// A file to read line by line, or standard input for `-`.
pub fn open_input(path: &str) -> Result<Box<dyn BufRead>> {
    if path == "-" {
        return Ok(Box::new(std::io::BufReader::new(std::io::stdin())));
    }
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    Ok(Box::new(std::io::BufReader::new(file)))
}

/// Every column name of the GLUE files: a first line holding one of them is a header.
const HEADER_NAMES: [&str; 22] = [
    "sentence",
    "label",
    "index",
    "sentence1",
    "sentence2",
    "question",
    "question1",
    "question2",
    "is_duplicate",
    "Quality",
    "#1 String",
    "#2 String",
    "#1 ID",
    "#2 ID",
    "gold_label",
    "score",
    "id",
    "qid1",
    "qid2",
    "genre",
    "text",
    "pair",
];

/// Reads a GLUE-format TSV. Columns named in `columns` need a header; a label column the header
/// lacks (a test file) is taken as absent. A row with too few fields is an error naming its line,
/// or, with `skip_bad_lines`, is reported in `skipped` and left out.
pub fn read_tsv(
    reader: impl BufRead,
    source: &str,
    columns: &Columns,
    skip_bad_lines: bool,
) -> Result<Dataset> {
    let mut lines = reader.lines().enumerate().peekable();
    let io_error = |line: usize, e: std::io::Error| Error::Input(format!("{source}:{line}: {e}"));
    let first = match lines.peek() {
        Some((_, Ok(l))) => l.trim_start_matches('\u{feff}').to_string(),
        // An unreadable first line is reported, with its number, by the loop below.
        Some((_, Err(_))) => String::new(),
        None => return Ok(Dataset::default()),
    };
    let header: Vec<String> = first.split('\t').map(|f| f.trim().to_string()).collect();
    let has_header = header.iter().any(|f| HEADER_NAMES.contains(&f.as_str()));
    if has_header {
        lines.next();
    }
    let position = |column: &Column, required: bool| -> Result<Option<usize>> {
        match column {
            Column::Index(i) => Ok(Some(*i)),
            Column::Name(name) if has_header => match header.iter().position(|h| h == name) {
                Some(i) => Ok(Some(i)),
                None if required => {
                    Err(Error::Input(format!("{source}:1: no column `{name}` in the header {header:?}")))
                }
                None => Ok(None),
            },
            Column::Name(name) => Err(Error::Input(format!(
                "{source}: column `{name}` is named, but the file has no header line; give its position instead"
            ))),
        }
    };
    let text = position(&columns.text, true)?.expect("required");
    let pair = match &columns.pair {
        Some(c) => position(c, true)?,
        None => None,
    };
    let label = match &columns.label {
        Some(c) => position(c, false)?,
        None => None,
    };
    let needed = [Some(text), pair, label].into_iter().flatten().max().unwrap_or(0) + 1;

    let mut data = Dataset { has_header, ..Default::default() };
    for (i, line) in lines {
        let number = i + 1;
        let line = line.map_err(|e| io_error(number, e))?;
        let line = line.strip_suffix('\r').unwrap_or(&line);
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() < needed {
            let message = format!("expected at least {needed} tab-separated fields, found {}", fields.len());
            if skip_bad_lines {
                data.skipped.push(BadLine { line: number, message });
                continue;
            }
            return Err(Error::Input(format!("{source}:{number}: {message}")));
        }
        data.rows.push(Row {
            line: number,
            text: fields[text].to_string(),
            pair: pair.map(|p| fields[p].to_string()),
            label: label.map(|l| fields[l].trim().to_string()),
        });
    }
    Ok(data)
}

pub fn accuracy(predictions: &[usize], labels: &[usize]) -> f64 {
    if labels.is_empty() {
        return 0.0;
    }
    predictions.iter().zip(labels).filter(|(p, l)| p == l).count() as f64 / labels.len() as f64
}

/// F1 of class 1 (sklearn's `f1_score` with the default binary average); 0 when undefined.
pub fn f1_binary(predictions: &[usize], labels: &[usize]) -> f64 {
    let (mut tp, mut fp, mut fneg) = (0.0, 0.0, 0.0);
    for (&p, &l) in predictions.iter().zip(labels) {
        match (p == 1, l == 1) {
            (true, true) => tp += 1.0,
            (true, false) => fp += 1.0,
            (false, true) => fneg += 1.0,
            _ => {}
        }
    }
    if tp == 0.0 {
        0.0
    } else {
        2.0 * tp / (2.0 * tp + fp + fneg)
    }
}

/// Matthews correlation coefficient for any number of classes (sklearn's formula); 0 when undefined.
pub fn matthews_corrcoef(predictions: &[usize], labels: &[usize]) -> f64 {
    let classes = predictions.iter().chain(labels).copied().max().map_or(0, |m| m + 1);
    let (mut t, mut p) = (vec![0.0f64; classes], vec![0.0f64; classes]);
    let mut correct = 0.0;
    for (&pr, &l) in predictions.iter().zip(labels) {
        t[l] += 1.0;
        p[pr] += 1.0;
        if pr == l {
            correct += 1.0;
        }
    }
    let s = labels.len() as f64;
    let tp: f64 = t.iter().zip(&p).map(|(a, b)| a * b).sum();
    let cov_ytyp = correct * s - tp;
    let cov_ypyp = s * s - p.iter().map(|x| x * x).sum::<f64>();
    let cov_ytyt = s * s - t.iter().map(|x| x * x).sum::<f64>();
    let denom = (cov_ytyt * cov_ypyp).sqrt();
    if denom == 0.0 {
        0.0
    } else {
        cov_ytyp / denom
    }
}

pub fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let cov: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let (vx, vy): (f64, f64) =
        (x.iter().map(|a| (a - mx).powi(2)).sum(), y.iter().map(|b| (b - my).powi(2)).sum());
    cov / (vx * vy).sqrt()
}

/// Spearman's rank correlation, ties ranked by their average (as scipy does).
pub fn spearman(x: &[f64], y: &[f64]) -> f64 {
    pearson(&ranks(x), &ranks(y))
}

fn ranks(v: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut ranks = vec![0.0; v.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && v[order[j + 1]] == v[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            ranks[k] = rank;
        }
        i = j + 1;
    }
    ranks
}

/// The task's metric, by name, for class predictions.
pub fn classification_scores(
    metric: Metric,
    predictions: &[usize],
    labels: &[usize],
) -> Vec<(&'static str, f64)> {
    match metric {
        Metric::Matthews => vec![("matthews_corr", matthews_corrcoef(predictions, labels))],
        Metric::F1Accuracy => {
            vec![("f1", f1_binary(predictions, labels)), ("accuracy", accuracy(predictions, labels))]
        }
        _ => vec![("accuracy", accuracy(predictions, labels))],
    }
}

/// Pearson and Spearman correlation for regression predictions.
pub fn regression_scores(predictions: &[f64], labels: &[f64]) -> Vec<(&'static str, f64)> {
    vec![("pearson", pearson(predictions, labels)), ("spearman", spearman(predictions, labels))]
}

/// The class id of a label as written in a data file: the config's label2id, else the number.
pub fn label_to_id(label: &str, config: &crate::config::Config) -> Result<usize> {
    if let Some(id) = config.label2id.as_ref().and_then(|m| m.get(label)) {
        return Ok(*id);
    }
    let id: usize = label.parse().map_err(|_| {
        Error::Input(format!("label `{label}` is neither in the model's label2id nor a class number"))
    })?;
    if id >= config.num_labels() {
        return Err(Error::Input(format!(
            "label {id} is out of range for a model with {} labels",
            config.num_labels()
        )));
    }
    Ok(id)
}

/// Scores predictions against the labels of a file with the task's metric (accuracy when no task
/// is given; Pearson and Spearman for a regression model).
pub fn evaluate(
    metric: Option<Metric>,
    config: &crate::config::Config,
    predictions: &[crate::pipelines::Classification],
    labels: &[&str],
) -> Result<Vec<(&'static str, f64)>> {
    if config.problem_type() == crate::config::ProblemType::Regression {
        let gold = labels
            .iter()
            .map(|l| l.parse::<f64>().map_err(|_| Error::Input(format!("label `{l}` is not a number"))))
            .collect::<Result<Vec<_>>>()?;
        let predicted: Vec<f64> = predictions.iter().map(|p| p.score as f64).collect();
        return Ok(regression_scores(&predicted, &gold));
    }
    let gold = labels.iter().map(|l| label_to_id(l, config)).collect::<Result<Vec<_>>>()?;
    let predicted: Vec<usize> = predictions.iter().map(|p| p.label_id).collect();
    Ok(classification_scores(metric.unwrap_or(Metric::Accuracy), &predicted, &gold))
}
