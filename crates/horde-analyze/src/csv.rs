//! CSV time series: a header line of column names, then one row of numbers per line.
//! Empty cells are missing values (NaN). `#` starts a comment line. Anything else that is
//! not a number is an error naming file, line and column.

use std::path::Path;

use crate::error::AnalyzeError;

/// A numeric table read from CSV.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Column names, in file order.
    pub columns: Vec<String>,
    /// One vector per column; missing cells are NaN.
    pub data: Vec<Vec<f64>>,
    /// Where it came from (for messages).
    pub name: String,
}

impl Table {
    /// Read and parse a file.
    pub fn read(path: &Path) -> Result<Table, AnalyzeError> {
        let name = path.display().to_string();
        let text =
            horde_config::input::read_to_string(path, horde_config::input::Kind::MEASUREMENTS)
                .map_err(|source| AnalyzeError::Io {
                    file: name.clone(),
                    source,
                })?;
        Table::parse(&name, &text)
    }

    /// Parse CSV text; `name` labels errors.
    pub fn parse(name: &str, text: &str) -> Result<Table, AnalyzeError> {
        let err = |line: usize, col: usize, message: String| AnalyzeError::Csv {
            file: name.to_string(),
            line,
            col,
            message,
        };
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim_end_matches('\r')))
            .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
        let Some((hline, header)) = lines.next() else {
            return Err(err(1, 1, "empty file: expected a header line".into()));
        };
        let columns: Vec<String> = header.split(',').map(|c| c.trim().to_string()).collect();
        for (i, c) in columns.iter().enumerate() {
            if c.is_empty() {
                return Err(err(hline, i + 1, "empty column name".into()));
            }
            if columns[..i].contains(c) {
                return Err(err(hline, i + 1, format!("column `{c}` appears twice")));
            }
        }
        let mut data = vec![Vec::new(); columns.len()];
        for (line, row) in lines {
            let cells: Vec<&str> = row.split(',').collect();
            if cells.len() != columns.len() {
                return Err(err(
                    line,
                    cells.len().min(columns.len()) + 1,
                    format!(
                        "expected {} fields as in the header, found {}",
                        columns.len(),
                        cells.len()
                    ),
                ));
            }
            for (i, cell) in cells.iter().enumerate() {
                let cell = cell.trim();
                let v = if cell.is_empty() {
                    f64::NAN
                } else {
                    match cell.parse::<f64>() {
                        Ok(v) if v.is_finite() => v,
                        _ => {
                            return Err(err(
                                line,
                                i + 1,
                                format!(
                                    "`{cell}` in column `{}` is not a finite number",
                                    columns[i]
                                ),
                            ))
                        }
                    }
                };
                data[i].push(v);
            }
        }
        Ok(Table {
            columns,
            data,
            name: name.to_string(),
        })
    }

    /// The values of column `name`.
    pub fn column(&self, name: &str) -> Result<&[f64], AnalyzeError> {
        match self.columns.iter().position(|c| c == name) {
            Some(i) => Ok(&self.data[i]),
            None => Err(AnalyzeError::NoColumn {
                file: self.name.clone(),
                column: name.to_string(),
                available: self.columns.join(", "),
            }),
        }
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.data.first().map_or(0, Vec::len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_numbers_and_missing_cells() {
        let t = Table::parse("t.csv", "# trace\ntime,rate\n0,1.5\n1,\n2,3e1\n").unwrap();
        assert_eq!(t.columns, ["time", "rate"]);
        assert_eq!(t.column("time").unwrap(), [0.0, 1.0, 2.0]);
        let r = t.column("rate").unwrap();
        assert_eq!((r[0], r[2]), (1.5, 30.0));
        assert!(r[1].is_nan());
        assert_eq!(t.rows(), 3);
    }

    #[test]
    fn errors_name_file_line_and_column() {
        let e = Table::parse("a.csv", "t,x\n0,1\n1,abc\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "a.csv:3:2: `abc` in column `x` is not a finite number"
        );
        let e = Table::parse("a.csv", "t,x\n0,1,2\n").unwrap_err();
        assert!(
            e.to_string().starts_with("a.csv:2:3: expected 2 fields"),
            "{e}"
        );
        let e = Table::parse("a.csv", "t,x\n0\n").unwrap_err();
        assert!(e.to_string().starts_with("a.csv:2:2:"), "{e}");
        let e = Table::parse("a.csv", "t,t\n").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("a.csv:1:2: column `t` appears twice"),
            "{e}"
        );
        let e = Table::parse("a.csv", "\n\n").unwrap_err();
        assert!(e.to_string().starts_with("a.csv:1:1: empty file"), "{e}");
        let e = Table::parse("a.csv", "t\n")
            .unwrap()
            .column("y")
            .unwrap_err();
        assert!(e.to_string().contains("no column `y`"), "{e}");
        let e = Table::parse("a.csv", "t\ninf\n").unwrap_err();
        assert!(e.to_string().starts_with("a.csv:2:1:"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_arbitrary_text(s in "[0-9a-z,.#\\n\\r -]{0,200}") {
            let _ = Table::parse("p.csv", &s);
        }

        #[test]
        fn round_trips_numbers(rows in proptest::collection::vec((-1e6f64..1e6, -1e6f64..1e6), 1..50)) {
            let mut text = String::from("a,b\n");
            for (a, b) in &rows {
                text.push_str(&format!("{a},{b}\n"));
            }
            let t = Table::parse("p.csv", &text).unwrap();
            let a: Vec<f64> = rows.iter().map(|r| r.0).collect();
            proptest::prop_assert_eq!(t.column("a").unwrap(), &a[..]);
        }
    }
}
