//! Diagnostics: every problem is reported as `line:col: message`.

use std::fmt;

use horde_config::line_col;

/// One problem in a hose program, at a 1-based line and column (columns count
/// characters, not bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoseError {
    /// 1-based line of the problem.
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
    /// What is wrong, in words.
    pub message: String,
}

impl fmt::Display for HoseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.message)
    }
}

impl std::error::Error for HoseError {}

/// A diagnostic before positions are resolved: byte offset plus message. Turning
/// offsets into line:col only when an error is reported keeps parsing linear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Diag {
    pub offset: u32,
    pub message: String,
}

impl Diag {
    pub fn new(offset: u32, message: impl Into<String>) -> Self {
        Diag {
            offset,
            message: message.into(),
        }
    }
}

/// Resolve diagnostics against their source, sorted by position.
pub(crate) fn resolve(source: &str, mut diags: Vec<Diag>) -> Vec<HoseError> {
    diags.sort_by_key(|d| d.offset);
    diags.dedup();
    diags
        .into_iter()
        .map(|d| {
            let (line, col) = line_col(source, d.offset as usize);
            HoseError {
                line: to_u32(line),
                col: to_u32(col),
                message: d.message,
            }
        })
        .collect()
}

fn to_u32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_count_characters() {
        let src = "ab\ncé d";
        let at = |offset: usize| {
            let e = &resolve(src, vec![Diag::new(offset as u32, "m")])[0];
            (e.line, e.col)
        };
        assert_eq!(at(0), (1, 1));
        assert_eq!(at(3), (2, 1));
        // 'é' is two bytes; the 'd' after it is column 4.
        assert_eq!(at(src.find('d').unwrap()), (2, 4));
        assert_eq!(at(999), (2, 5));
    }

    #[test]
    fn display_is_line_col_message() {
        let e = HoseError {
            line: 3,
            col: 7,
            message: "unknown variable `x`".into(),
        };
        assert_eq!(e.to_string(), "3:7: unknown variable `x`");
    }
}
