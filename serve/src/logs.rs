//! The server's log lines on stderr, as text or (`--json-output`) one JSON object per line:
//! `{"timestamp", "level", "target", "fields": {"message"}}`, as TEI's tracing subscriber writes
//! them. The library's warnings (through the `log` crate) come out the same way.
//!
//! stdout carries one line, for scripts, once the server accepts connections: `listening on
//! ADDRESS`, or under `--json-output` the JSON log line that says so, the address in
//! `fields.address` (the same line goes to stderr).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

static JSON: AtomicBool = AtomicBool::new(false);

struct Logger;

static LOGGER: Logger = Logger;

/// Installs the logger (before anything logs), at `info` for the server and `warn` for the rest.
pub fn install() {
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}

/// Switches to JSON lines.
pub fn set_json(json: bool) {
    JSON.store(json, Ordering::Relaxed);
}

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.level() <= log::Level::Warn || metadata.target().starts_with("roformer_serve")
    }

    fn log(&self, record: &log::Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = line(record.level(), record.target(), &record.args().to_string(), None);
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }

    fn flush(&self) {}
}

/// Says that the server accepts connections on `address`: its line on stdout, then the same as a
/// log line on stderr (`listening on ADDRESS`, or under `--json-output` one JSON line for both,
/// with `fields.address`).
pub fn listening(address: SocketAddr) -> std::io::Result<()> {
    let message = format!("listening on {address}");
    let address = address.to_string();
    let logged = line(log::Level::Info, env!("CARGO_CRATE_NAME"), &message, Some(&address));
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", if JSON.load(Ordering::Relaxed) { &logged } else { &message })?;
    stdout.flush()?;
    let _ = writeln!(std::io::stderr().lock(), "{logged}");
    Ok(())
}

/// One log line: `level: message`, or under `--json-output` the JSON object, with the address
/// in `fields` when one is given.
fn line(level: log::Level, target: &str, message: &str, address: Option<&str>) -> String {
    if JSON.load(Ordering::Relaxed) {
        let mut fields = serde_json::json!({"message": message});
        if let Some(address) = address {
            fields["address"] = address.into();
        }
        serde_json::json!({
            "timestamp": timestamp(),
            "level": level.as_str(),
            "target": target,
            "fields": fields,
        })
        .to_string()
    } else {
        format!("{}: {message}", level.as_str().to_lowercase())
    }
}

/// Now, in RFC 3339 (UTC, microseconds), without a date crate.
fn timestamp() -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let (secs, micros) = (now.as_secs(), now.subsec_micros());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates_are_the_calendar_s() {
        assert_eq!(super::civil_from_days(0), (1970, 1, 1));
        assert_eq!(super::civil_from_days(20_783), (2026, 11, 26));
        assert_eq!(super::civil_from_days(11_016), (2000, 2, 29));
    }
}
