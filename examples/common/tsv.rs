//! GLUE-format TSV input: lines of any ending, a header decided by flags or announced, columns
//! chosen by the user, and bad lines named by number.

use std::io::BufRead;

use anyhow::{anyhow, bail, Context, Result};

use super::glue::{Column, Columns};

/// The longest line read: a longer one is a bad line (a text of a few MB is no sentence, and
/// reading it whole would let one line take all memory).
pub const MAX_LINE_BYTES: usize = 4 << 20;

/// One input row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// 0-based row number among the data lines (header excluded, bad lines counted), so that
    /// skipping a line never renumbers the rows after it; GLUE's `index` column counts the same way.
    pub index: usize,
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

/// Says on stderr which lines of `source` were skipped, and why.
pub fn report_skipped(source: &str, skipped: &[BadLine]) {
    for bad in skipped {
        eprintln!("skipped {source}:{}: {}", bad.line, bad.message);
    }
}

#[derive(Debug, Clone, Default)]
pub struct Dataset {
    pub rows: Vec<Row>,
    pub skipped: Vec<BadLine>,
    pub has_header: bool,
    /// How line 1 was read when no flag or task decided it, for the run to say on stderr.
    pub header_note: Option<String>,
}

impl Dataset {
    pub fn has_labels(&self) -> bool {
        !self.rows.is_empty() && self.rows.iter().all(|r| r.label.is_some())
    }

    /// A bad line: an error naming it, or, when skipping, reported in `skipped`.
    pub fn bad_line(&mut self, source: &str, line: usize, message: String, skip: bool) -> Result<()> {
        if !skip {
            bail!("{source}:{line}: {message}");
        }
        self.skipped.push(BadLine { line, message });
        Ok(())
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

/// Every column name of the GLUE files.
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

/// One line as read: its text, or why it cannot be read.
type Line = std::result::Result<String, String>;

/// Lines ended by `\n`, `\r\n` or a lone `\r`, each at most [`MAX_LINE_BYTES`]. A final line
/// ending is not an empty last line. A NUL byte stops the reading: the input is binary, and a
/// stream such as /dev/zero would otherwise never end a line.
pub struct Lines<R> {
    reader: R,
    source: String,
    number: usize,
    /// The last line ended with `\r`: a `\n` right after it belongs to that ending.
    after_cr: bool,
}

impl<R: BufRead> Lines<R> {
    pub fn new(reader: R, source: &str) -> Self {
        Self { reader, source: source.to_string(), number: 0, after_cr: false }
    }

    /// The next line and its 1-based number; an I/O error or binary input is an error.
    pub fn next_line(&mut self) -> Result<Option<(usize, Line)>> {
        let mut bytes = Vec::new();
        let mut too_long = false;
        let mut any = false;
        loop {
            let buffer = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(anyhow!("{}:{}: {e}", self.source, self.number + 1)),
            };
            if buffer.is_empty() {
                if !any {
                    return Ok(None);
                }
                break;
            }
            let mut start = 0;
            if self.after_cr {
                self.after_cr = false;
                if buffer[0] == b'\n' {
                    start = 1;
                }
            }
            let rest = &buffer[start..];
            let end = rest.iter().position(|&b| b == b'\n' || b == b'\r' || b == 0);
            let take = end.unwrap_or(rest.len());
            if !too_long && bytes.len() + take <= MAX_LINE_BYTES {
                bytes.extend_from_slice(&rest[..take]);
            } else {
                too_long = true;
                bytes.clear();
            }
            any |= take > 0 || end.is_some();
            match end.map(|e| rest[e]) {
                Some(0) => bail!(
                    "{}:{}: a NUL byte: this is binary data, not tab-separated text",
                    self.source,
                    self.number + 1
                ),
                Some(ending) => {
                    self.after_cr = ending == b'\r';
                    self.reader.consume(start + take + 1);
                    break;
                }
                None => self.reader.consume(start + take),
            }
        }
        self.number += 1;
        let line = if too_long {
            Err(format!("longer than {MAX_LINE_BYTES} bytes"))
        } else {
            String::from_utf8(bytes).map_err(|e| format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to()))
        };
        Ok(Some((self.number, line)))
    }
}

/// Reads a GLUE-format TSV.
///
/// `header` is the user's (or the task's) word on line 1; without it, line 1 is a header when
/// columns are chosen by name, or chosen by position and every field of line 1 (two or more) is
/// a GLUE column name; `header_note` says which was taken. `columns` is `None` when the user chose none: a
/// one-column file is then read as texts, and a file of several columns is an error listing
/// them. A label column the header lacks (a test file) is taken as absent.
pub fn read_tsv(
    reader: impl BufRead,
    source: &str,
    columns: Option<&Columns>,
    header: Option<bool>,
    skip_bad_lines: bool,
) -> Result<Dataset> {
    let mut lines = Lines::new(reader, source);
    let mut data = Dataset::default();
    let Some((_, first)) = lines.next_line()? else { return Ok(data) };
    let first = first.map_err(|m| anyhow!("{source}:1: {m}"))?;
    let first = first.trim_start_matches('\u{feff}').to_string();
    let fields: Vec<String> = first.split('\t').map(|f| f.trim().to_string()).collect();

    let named = columns.is_some_and(|c| c.names().next().is_some());
    data.has_header = match header {
        Some(h) => h,
        None => {
            // A lone field is too weak a sign: a headerless file of sentences may begin with `text`.
            let h = named
                || (columns.is_some()
                    && fields.len() > 1
                    && fields.iter().all(|f| HEADER_NAMES.contains(&f.as_str())));
            data.header_note = Some(if h {
                format!(
                    "{source}: line 1 taken as the header ({}); pass --no-header to read it as data",
                    fields.join(", ")
                )
            } else {
                format!("{source}: line 1 read as data; pass --header if it is a header")
            });
            h
        }
    };
    let header: Option<&[String]> = data.has_header.then_some(&fields);

    let columns = match columns {
        Some(c) => c.clone(),
        None if fields.len() == 1 => Columns { text: Column::Index(0), pair: None, label: None },
        None => bail!(
            "{source} has {} tab-separated columns ({}): choose the text with --text-col (and --pair-col, \
             --label-col), or give a GLUE --task",
            fields.len(),
            describe_columns(&fields, header.is_some())
        ),
    };
    let position = |column: &Column, required: bool| -> Result<Option<usize>> {
        match (column, header) {
            (Column::Index(i), _) => Ok(Some(*i)),
            (Column::Name(name), Some(header)) => match header.iter().position(|h| h == name) {
                Some(i) => Ok(Some(i)),
                None if required => Err(anyhow!("{source}:1: no column `{name}` in the header {header:?}")),
                None => Ok(None),
            },
            (Column::Name(name), None) => {
                bail!("{source}: column `{name}` is named, but line 1 is read as data (--no-header); give its position instead")
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
    let first_data_line = if data.has_header { 2 } else { 1 };

    // Blank lines are bad only when data follows them: one or more line endings at the end of
    // the file are not rows.
    let mut blanks: Vec<usize> = Vec::new();
    let mut pending = if data.has_header { None } else { Some((1, Ok(first))) };
    loop {
        let (number, line) = match pending.take() {
            Some(l) => l,
            None => match lines.next_line()? {
                Some(l) => l,
                None => break,
            },
        };
        let line = match line {
            Ok(line) => line,
            Err(message) => {
                data.bad_line(source, number, message, skip_bad_lines)?;
                continue;
            }
        };
        if line.trim().is_empty() {
            blanks.push(number);
            continue;
        }
        for blank in std::mem::take(&mut blanks) {
            data.bad_line(source, blank, "blank line".into(), skip_bad_lines)?;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        if fields.len() < needed {
            let message = format!("expected at least {needed} tab-separated fields, found {}", fields.len());
            data.bad_line(source, number, message, skip_bad_lines)?;
            continue;
        }
        data.rows.push(Row {
            index: number - first_data_line,
            line: number,
            text: fields[text].to_string(),
            pair: pair.map(|p| fields[p].to_string()),
            label: label.map(|l| fields[l].trim().to_string()),
        });
    }
    Ok(data)
}

/// Line 1's fields for an error message: `0: sentence, 1: label`, values cut short.
fn describe_columns(fields: &[String], header: bool) -> String {
    let shown: Vec<String> = fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let mut f: String = f.chars().take(24).collect();
            if !header && f.len() < fields[i].len() {
                f.push('…');
            }
            format!("{i}: `{f}`")
        })
        .collect();
    shown.join(", ")
}
