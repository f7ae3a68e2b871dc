//! Diagnostics: every problem is reported as `line:col: message`.

use std::fmt;

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
                line,
                col,
                message: d.message,
            }
        })
        .collect()
}

/// 1-based line and character column of a byte offset (clamped to the source).
pub(crate) fn line_col(source: &str, offset: usize) -> (u32, u32) {
    let mut offset = offset.min(source.len());
    while !source.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &source[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let col = before[line_start..].chars().count() + 1;
    (to_u32(line), to_u32(col))
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
        assert_eq!(line_col(src, 0), (1, 1));
        assert_eq!(line_col(src, 3), (2, 1));
        // 'é' is two bytes; the 'd' after it is column 4.
        assert_eq!(line_col(src, src.find('d').unwrap()), (2, 4));
        assert_eq!(line_col(src, 999), (2, 5));
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
