//! Scenario errors, located as `FILE:line:col: message`.

use std::fmt;
use std::ops::Range;

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
