//! Reading TOML configuration files into typed values, with errors that name the file,
//! line and column (`FILE:line:col: message`), as every Horde input file does.

use std::fmt;
use std::path::Path;

use serde::de::DeserializeOwned;

#[cfg(feature = "checks")]
pub mod checks;
pub mod input;

/// A configuration error located in a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    pub file: String,
    /// 1-based line and column (in characters), when the error has a position.
    pub at: Option<(usize, usize)>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Some((l, c)) => write!(f, "{}:{l}:{c}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

/// 1-based line and column (counting characters) of byte offset `at` in `text`.
pub fn line_col(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = &text[..text.floor_char_boundary(at)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Parse `text` (named `file` in messages).
pub fn parse<T: DeserializeOwned>(text: &str, file: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError {
        file: file.to_string(),
        at: e.span().map(|s| line_col(text, s.start)),
        message: e.message().trim_end().to_string(),
    })
}

/// Read and parse a file.
pub fn load<T: DeserializeOwned>(path: &Path) -> Result<T, ConfigError> {
    let file = path.display().to_string();
    let text = input::read_to_string(path, input::Kind::CONFIG).map_err(|e| ConfigError {
        file: file.clone(),
        at: None,
        message: e.to_string(),
    })?;
    parse(&text, &file)
}

/// The longest time a file or an option may give, in seconds: a year, far beyond any run
/// and far inside what time arithmetic holds, so that a slip such as `1e30` is an error
/// at its value rather than an overflow later.
pub const MAX_SECONDS: f64 = 365.0 * 86_400.0;

/// The highest rate a file may give, in kbit/s: 100 Gbit/s, beyond any path Horde drives,
/// so that a slip such as `1e30` is an error at its value rather than an infinite rate
/// in the arithmetic later.
pub const MAX_KBPS: f64 = 1e8;

/// `value` as a message quotes it: as written for everyday sizes, in exponent form past
/// them, so that a slip such as `1e300` is not echoed as 301 digits.
pub fn shown(value: f64) -> String {
    if value.is_finite() && value != 0.0 && !(1e-6..1e15).contains(&value.abs()) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

/// Problems found in parsed values, each at a key path such as `streams[1].workload.kbps`
/// (see [`locate`]): errors reject the file, warnings are reported and let it load.
#[derive(Debug, Default)]
pub struct Checks {
    errors: Vec<(String, String)>,
    warnings: Vec<(String, String)>,
}

impl Checks {
    pub fn error(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.errors.push((path.into(), message.into()));
    }

    pub fn warn(&mut self, path: impl Into<String>, message: impl Into<String>) {
        self.warnings.push((path.into(), message.into()));
    }

    /// `value` must be a finite number above zero.
    pub fn positive(&mut self, path: impl Into<String>, what: &str, value: f64) {
        if !(value.is_finite() && value > 0.0) {
            self.error(
                path,
                format!("{what} must be a positive number, got {}", shown(value)),
            );
        }
    }

    /// `value` must be a finite number, zero or more.
    pub fn non_negative(&mut self, path: impl Into<String>, what: &str, value: f64) {
        if !(value.is_finite() && value >= 0.0) {
            self.error(
                path,
                format!("{what} must be zero or more, got {}", shown(value)),
            );
        }
    }

    /// `value` (a time in `unit_s` seconds each) must be at most [`MAX_SECONDS`].
    pub fn not_too_long(&mut self, path: impl Into<String>, what: &str, value: f64, unit_s: f64) {
        if value * unit_s > MAX_SECONDS {
            let max = MAX_SECONDS / unit_s;
            self.error(
                path,
                format!(
                    "{what} must be at most {max} (a year), got {}",
                    shown(value)
                ),
            );
        }
    }

    /// `value` must be a finite number in `range`.
    pub fn in_range(
        &mut self,
        path: impl Into<String>,
        what: &str,
        value: f64,
        range: std::ops::RangeInclusive<f64>,
    ) {
        if !(value.is_finite() && range.contains(&value)) {
            self.error(
                path,
                format!(
                    "{what} must be in {}..={}, got {}",
                    range.start(),
                    range.end(),
                    shown(value)
                ),
            );
        }
    }

    /// `value`, a count or a size, must be in `range`.
    pub fn count_in(
        &mut self,
        path: impl Into<String>,
        what: &str,
        value: u64,
        range: std::ops::RangeInclusive<u64>,
    ) {
        if !range.contains(&value) {
            self.error(
                path,
                format!(
                    "{what} must be in {}..={}, got {value}",
                    range.start(),
                    range.end()
                ),
            );
        }
    }

    /// `value` (a rate in kbit/s) must be at most [`MAX_KBPS`].
    pub fn not_too_fast(&mut self, path: impl Into<String>, what: &str, value: f64) {
        if value > MAX_KBPS {
            self.error(
                path,
                format!(
                    "{what} must be at most {MAX_KBPS} kbit/s (100 Gbit/s), got {}",
                    shown(value)
                ),
            );
        }
    }

    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// The errors found so far, as (key path, message), in the order found.
    pub fn errors(&self) -> impl Iterator<Item = (&str, &str)> {
        self.errors.iter().map(|(p, m)| (p.as_str(), m.as_str()))
    }
}

/// A configuration type that can check its own values once parsed.
pub trait Validate {
    fn validate(&self, checks: &mut Checks);
}

/// A parsed and checked configuration, with the warnings it gave.
#[derive(Debug)]
pub struct Checked<T> {
    pub value: T,
    pub warnings: Vec<ConfigError>,
}

/// Parse `text` (named `file` in messages) and check it; the first error (in file
/// order) is returned, located at its value.
pub fn parse_checked<T: DeserializeOwned + Validate>(
    text: &str,
    file: &str,
) -> Result<Checked<T>, ConfigError> {
    let value: T = parse(text, file)?;
    let mut checks = Checks::default();
    value.validate(&mut checks);
    let located = |(path, message): (String, String)| ConfigError {
        file: file.to_string(),
        at: locate(text, &path),
        message,
    };
    let mut errors: Vec<ConfigError> = checks.errors.into_iter().map(located).collect();
    errors.sort_by_key(|e| e.at.unwrap_or((0, 0)));
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    Ok(Checked {
        value,
        warnings: checks.warnings.into_iter().map(located).collect(),
    })
}

/// Read, parse and check a file.
pub fn load_checked<T: DeserializeOwned + Validate>(
    path: &Path,
) -> Result<Checked<T>, ConfigError> {
    let file = path.display().to_string();
    let text = input::read_to_string(path, input::Kind::CONFIG).map_err(|e| ConfigError {
        file: file.clone(),
        at: None,
        message: e.to_string(),
    })?;
    parse_checked(&text, &file)
}

/// Line and column of the value at `path` (`a.b[2].c`; an empty path is the top):
/// the deepest part of the path present in the text, so a missing key points at its
/// table. `None` if the text does not parse or the path names nothing at all.
pub fn locate(text: &str, path: &str) -> Option<(usize, usize)> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let mut item = doc.as_item();
    let mut span = None;
    for seg in segments(path) {
        let next = match seg {
            Segment::Key(k) => item.get(k),
            Segment::Index(i) => item.get(i),
        };
        let Some(next) = next else { break };
        item = next;
        if let Some(s) = item.span() {
            span = Some(s);
        }
    }
    match span {
        Some(s) => Some(line_col(text, s.start)),
        None if path.is_empty() => Some((1, 1)),
        None => None,
    }
}

enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

fn segments(path: &str) -> impl Iterator<Item = Segment<'_>> {
    path.split('.').filter(|p| !p.is_empty()).flat_map(|part| {
        let (key, rest) = part.split_once('[').unwrap_or((part, ""));
        let key = (!key.is_empty()).then_some(Segment::Key(key));
        let idx = rest
            .split('[')
            .filter_map(|i| i.trim_end_matches(']').parse().ok())
            .map(Segment::Index);
        key.into_iter().chain(idx).collect::<Vec<_>>()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_past_everyday_sizes_are_shown_with_an_exponent() {
        let cases = [
            (1e30, "1e30"),
            (-1e300, "-1e300"),
            (4.0e15, "4e15"),
            (1e14, "100000000000000"),
            (2.5, "2.5"),
            (0.0, "0"),
            (-3.0, "-3"),
            (1e-9, "1e-9"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
        ];
        for (value, want) in cases {
            assert_eq!(shown(value), want, "{value}");
        }
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Cfg {
        name: String,
        port: u16,
    }

    #[test]
    fn positions_count_characters_from_one() {
        assert_eq!(line_col("ab\ncé", 0), (1, 1));
        assert_eq!(line_col("ab\ncé", 3), (2, 1));
        assert_eq!(line_col("ab\ncéx", 6), (2, 3));
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let e = parse::<Cfg>("name = \"x\"\nport = 99999\n", "peer.toml").unwrap_err();
        assert_eq!(e.at, Some((2, 8)));
        assert!(e.to_string().starts_with("peer.toml:2:8: "), "{e}");
        let e = parse::<Cfg>("name = \"x\"\nport = 1\nbogus = 2\n", "peer.toml").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("peer.toml:3:1: unknown field `bogus`"),
            "{e}"
        );
        let e = load::<Cfg>(Path::new("/nonexistent/peer.toml")).unwrap_err();
        assert_eq!(e.at, None);
    }

    const NESTED: &str = "a = 1\n[[streams]]\nid = 1\n\n[[streams]]\nid = 2\nworkload = { kind = \"cbr\", kbps = -5 }\nlist = [1, 2, 30]\n";

    #[test]
    fn paths_locate_nested_values() {
        assert_eq!(locate(NESTED, "a"), Some((1, 5)));
        assert_eq!(locate(NESTED, "streams[1].id"), Some((6, 6)));
        assert_eq!(locate(NESTED, "streams[1].workload.kbps"), Some((7, 35)));
        assert_eq!(locate(NESTED, "streams[1].list[2]"), Some((8, 15)));
        // A missing key points at the deepest part that is there.
        assert_eq!(
            locate(NESTED, "streams[1].workload.adu_bytes"),
            Some((7, 12))
        );
        assert_eq!(locate(NESTED, ""), Some((1, 1)));
        assert_eq!(locate("x = [", "x"), None);
    }

    #[derive(Debug, serde::Deserialize)]
    struct Rate {
        kbps: f64,
        #[serde(default)]
        note: Option<String>,
    }

    impl Validate for Rate {
        fn validate(&self, checks: &mut Checks) {
            checks.positive("kbps", "kbps", self.kbps);
            if self.note.is_none() {
                checks.warn("", "no note");
            }
        }
    }

    #[test]
    fn checked_parse_locates_errors_and_keeps_warnings() {
        let e = parse_checked::<Rate>("\nkbps = -100\n", "send.toml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "send.toml:2:8: kbps must be a positive number, got -100"
        );
        let ok = parse_checked::<Rate>("kbps = 5\n", "send.toml").unwrap();
        assert_eq!(ok.value.kbps, 5.0);
        assert_eq!(ok.warnings.len(), 1);
        assert_eq!(ok.warnings[0].to_string(), "send.toml:1:1: no note");
    }
}
