//! A block of lines redrawn in place on a terminal, or printed as periodic plain
//! blocks when stdout is a file or a pipe.
//!
//! On a terminal every line is cut to the terminal's width less one column, so no
//! line wraps: the cursor then moves up exactly as many rows as were drawn, and the
//! next frame replaces the last without leaving stale copies behind.

use std::io::{self, IsTerminal, Write};

use crossterm::cursor::{MoveToColumn, MoveUp};
use crossterm::terminal::{self, Clear, ClearType};
use crossterm::QueueableCommand;

/// Width assumed when the terminal does not say.
const FALLBACK_WIDTH: u16 = 80;

pub struct Screen {
    tty: bool,
    /// Rows of the frame on screen now.
    drawn: u16,
}

impl Screen {
    /// Redraw in place when stdout is a terminal.
    pub fn stdout() -> Self {
        Self::new(io::stdout().is_terminal())
    }

    pub fn new(tty: bool) -> Self {
        Self { tty, drawn: 0 }
    }

    /// Show `frame` under `heading`, in place of the previous frame on a terminal.
    pub fn show(&mut self, heading: &str, frame: &str) -> io::Result<()> {
        let mut out = io::stdout().lock();
        if !self.tty {
            write!(out, "--- {heading}\n{frame}")?;
            return out.flush();
        }
        let (cols, rows) = terminal::size().unwrap_or((FALLBACK_WIDTH, u16::MAX));
        let lines = fit(heading, frame, cols, rows);
        if self.drawn > 0 {
            out.queue(MoveUp(self.drawn))?;
        }
        out.queue(MoveToColumn(0))?;
        out.queue(Clear(ClearType::FromCursorDown))?;
        for l in &lines {
            writeln!(out, "{l}")?;
        }
        self.drawn = lines.len() as u16;
        out.flush()
    }
}

/// The heading and the frame's lines, each cut to `cols - 1` characters, at most
/// `rows - 1` of them (a frame taller than the terminal would scroll away).
pub fn fit(heading: &str, frame: &str, cols: u16, rows: u16) -> Vec<String> {
    let width = usize::from(cols.max(2) - 1);
    let height = usize::from(rows.max(2) - 1);
    std::iter::once(heading)
        .chain(frame.lines())
        .take(height)
        .map(|l| l.chars().take(width).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cut_to_the_terminal_and_never_wrap() {
        let long = "x".repeat(100);
        let frame = format!("{long}\nshort\n");
        let lines = fit("heading", &frame, 80, 24);
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], "heading");
        assert_eq!(lines[1].chars().count(), 79);
        assert_eq!(lines[2], "short");
        let lines = fit("h", &frame, 80, 3);
        assert_eq!(lines.len(), 2, "one row is left for the cursor");
    }
}
