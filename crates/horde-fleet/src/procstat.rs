//! A process's resident memory and CPU time, from `/proc`.

use anyhow::{Context, Result};

/// Resident memory of process `pid`, kB (VmRSS).
pub fn rss_kb(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("{path} has no VmRSS line"))
}

/// CPU time process `pid` has used (user + system), seconds.
pub fn cpu_s(pid: u32) -> Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_cpu_ticks(&stat)
        .map(|t| t as f64 / clock_ticks())
        .with_context(|| format!("{path}: no utime and stime fields"))
}

/// utime + stime of a `/proc/PID/stat` line: fields 14 and 15, counted after the
/// command name (which may hold spaces and parentheses, so from its last `)`).
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf reads a constant of the system.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// The machine's load averages, as `/proc/loadavg` gives them (1, 5, 15 min).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_read_past_a_command_name_with_spaces() {
        let line = "42 (my (odd) cmd) S 1 42 42 0 -1 4194560 100 0 0 0 17 5 0 0 20 0 1 0";
        assert_eq!(parse_cpu_ticks(line), Some(22));
        assert_eq!(parse_cpu_ticks("garbage"), None);
    }

    #[test]
    fn this_process_is_seen() {
        let me = std::process::id();
        assert!(rss_kb(me).unwrap() > 0);
        assert!(cpu_s(me).unwrap() >= 0.0);
    }
}
