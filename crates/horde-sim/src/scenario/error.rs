//! Scenario errors, located as `FILE:line:col: message`.

use std::fmt;
use std::ops::Range;

use horde_config::Checks;
use toml::Spanned;

/// What is wrong with a scenario and where. Displays as `FILE:line:col: message`, or
/// `FILE: message` when the problem has no single place (e.g. a missing section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file name (or the name given to `Scenario::from_str`).
    pub file: String,
    /// 1-based line and column (in characters) of the offending value.
    pub at: Option<(usize, usize)>,
    pub message: String,
}

impl std::error::Error for ScenarioError {}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Some((line, col)) => write!(f, "{}:{line}:{col}: {}", self.file, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

pub(crate) use horde_config::line_col;

/// Builds errors for one source text.
pub(crate) struct Locator<'a> {
    pub(crate) file: &'a str,
    pub(crate) text: &'a str,
}

impl Locator<'_> {
    pub(crate) fn at(&self, span: Range<usize>, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: self.file.to_string(),
            at: Some(line_col(self.text, span.start)),
            message: message.into(),
        }
    }

    pub(crate) fn nowhere(&self, message: impl Into<String>) -> ScenarioError {
        ScenarioError {
            file: self.file.to_string(),
            at: None,
            message: message.into(),
        }
    }

    pub(crate) fn toml(&self, e: &toml::de::Error) -> ScenarioError {
        // toml's own Display adds a multi-line source excerpt; the message alone, with
        // its own line breaks joined, keeps the error on one line like a compiler's.
        let message = e
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        match e.span() {
            Some(span) => self.at(span, message),
            None => self.nowhere(message),
        }
    }

    /// Run checks shared with the other input files ([`crate::checks`]); the first
    /// error is reported at `span`.
    pub(crate) fn checked(
        &self,
        span: Range<usize>,
        run: impl FnOnce(&mut Checks),
    ) -> Result<(), ScenarioError> {
        let mut checks = Checks::default();
        run(&mut checks);
        let first = checks
            .errors()
            .next()
            .map(|(_, message)| message.to_owned());
        first.map_or(Ok(()), |message| Err(self.at(span, message)))
    }

    /// `duration_s` (positive) and `drain_s` (zero or more; `default_drain_s` when
    /// absent), each at most a year so that their sum is a valid clock time.
    pub(crate) fn run_length(
        &self,
        duration_s: &Spanned<f64>,
        drain_s: Option<&Spanned<f64>>,
        default_drain_s: f64,
    ) -> Result<(f64, f64), ScenarioError> {
        let year = |c: &mut Checks, key: &str, value: f64| c.not_too_long(key, key, value, 1.0);
        let d = *duration_s.get_ref();
        self.checked(duration_s.span(), |c| {
            c.positive("duration_s", "duration_s", d);
            year(c, "duration_s", d);
        })?;
        let drain = match drain_s {
            Some(s) => {
                let v = *s.get_ref();
                self.checked(s.span(), |c| {
                    c.non_negative("drain_s", "drain_s", v);
                    year(c, "drain_s", v);
                })?;
                v
            }
            None => default_drain_s,
        };
        Ok((d, drain))
    }
}

#[cfg(test)]
mod tests {
    use super::line_col;

    #[test]
    fn line_and_column_count_characters_from_one() {
        let text = "a = 1\nbé = \"x\"\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 4), (1, 5));
        assert_eq!(line_col(text, 6), (2, 1));
        // After the two-byte 'é', the column still advances by one.
        assert_eq!(line_col(text, 9), (2, 3));
        assert_eq!(line_col(text, 999), (3, 1));
    }
}
