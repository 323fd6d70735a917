//! GLUE-format TSV input.

use std::io::BufRead;

use anyhow::{anyhow, bail, Context, Result};

use super::glue::{Column, Columns};

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
    let file = std::fs::File::open(path).with_context(|| format!("opening {path}"))?;
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
    let io_error = |line: usize, e: std::io::Error| anyhow!("{source}:{line}: {e}");
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
                None if required => Err(anyhow!("{source}:1: no column `{name}` in the header {header:?}")),
                None => Ok(None),
            },
            Column::Name(name) => {
                bail!("{source}: column `{name}` is named, but the file has no header line; give its position instead")
            }
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
            bail!("{source}:{number}: {message}");
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
