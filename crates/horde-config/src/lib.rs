//! Reading TOML configuration files into typed values, with errors that name the file,
//! line and column (`FILE:line:col: message`), as every Horde input file does.

use std::fmt;
use std::path::Path;

use serde::de::DeserializeOwned;

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
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: file.clone(),
        at: None,
        message: e.to_string(),
    })?;
    parse(&text, &file)
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
