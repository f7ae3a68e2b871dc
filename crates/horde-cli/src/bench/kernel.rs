//! `horde bench links --kernel`: every contender over the same emulated IP links, one
//! after another in one invocation, in the manner of Pantheon. The links are a `horde
//! shell` built from the scenario's channels (a fresh one per contender, so each starts
//! at the beginning of the same traces); the contenders are Horde (`horde send` inside
//! the shell, `horde recv` on the host), kernel TCP with one flow per link, and MPTCP
//! with one subflow per link, each under cubic and bbr. Goodput is counted by the
//! receiving end over the same window; delay and loss come from the shell's packet log
//! for all of them alike.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use horde_sim::scenario::Scenario;

use super::horde_peer::HordeFiles;
use super::shell_log;
use super::shell_run::{check_interrupt, ShellRun, ShellSpec};
use super::tcp_sink::TcpSink;
use super::{capacity_mbps, Row, TempDir};

/// The kernel's congestion controllers every kernel contender runs, set per socket.
const KERNEL_CCS: [&str; 2] = ["cubic", "bbr"];
/// A kernel flow sends until it is stopped; this is "forever".
const ENDLESS_BYTES: u64 = 1 << 50;
/// How long a contender may take to set up its links and connect.
const CONNECT_LIMIT: Duration = Duration::from_secs(20);
/// How long Horde may take after its run to drain, close and report.
const HORDE_DRAIN: Duration = Duration::from_secs(20);

/// One contender: what it is and which controller it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Contender {
    Horde(String),
    Tcp(&'static str),
    Mptcp(&'static str),
}

impl Contender {
    fn mode(&self) -> &'static str {
        match self {
            Contender::Horde(_) => "horde",
            Contender::Tcp(_) => "tcp",
            Contender::Mptcp(_) => "mptcp",
        }
    }

    fn cc(&self) -> &str {
        match self {
            Contender::Horde(cc) => cc,
            Contender::Tcp(cc) | Contender::Mptcp(cc) => cc,
        }
    }

    fn describe(&self, links: usize) -> String {
        match self {
            Contender::Horde(cc) => format!("Horde ({cc}) over {links} channels"),
            Contender::Tcp(cc) => format!("kernel TCP ({cc}), one flow per link"),
            Contender::Mptcp(cc) => format!("MPTCP ({cc}), one subflow per link"),
        }
    }
}

/// Horde under each of `horde_ccs`, then TCP and MPTCP under each kernel controller.
pub fn contenders(horde_ccs: &[String]) -> Vec<Contender> {
    let mut all: Vec<Contender> = horde_ccs.iter().cloned().map(Contender::Horde).collect();
    all.extend(KERNEL_CCS.iter().map(|cc| Contender::Tcp(cc)));
    all.extend(KERNEL_CCS.iter().map(|cc| Contender::Mptcp(cc)));
    all
}

/// Root, the tools and the kernel features the runs need, checked before any of them.
pub fn preflight(links: usize) -> Result<()> {
    if !horde_emu::sys::is_root() {
        bail!(
            "horde bench links --kernel needs root (horde shell creates a network namespace \
             and TUN devices, and MPTCP endpoints); run it with sudo"
        );
    }
    for (tool, args, package) in [
        ("ip", &["-V"][..], "iproute2"),
        ("sh", &["-c", "true"][..], "a POSIX shell"),
    ] {
        let ok = std::process::Command::new(tool)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            bail!("horde bench links --kernel needs `{tool}` ({package}) on the PATH");
        }
    }
    let mptcp = std::fs::read_to_string("/proc/sys/net/mptcp/enabled");
    if !mptcp.is_ok_and(|v| v.trim() == "1") {
        bail!(
            "MPTCP is not enabled on this host: sysctl -w net.mptcp.enabled=1 (kernel 5.6 or \
             later)"
        );
    }
    let available = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default();
    for cc in KERNEL_CCS {
        if !available.split_whitespace().any(|a| a == cc) {
            bail!(
                "the kernel's TCP congestion control {cc} is not available (have: {}); \
                 load it with `modprobe tcp_{cc}`",
                available.trim()
            );
        }
    }
    if links > 3 {
        eprintln!(
            "note: the host's `ip mptcp limits` (2 extra subflows by default) may refuse \
             MPTCP subflows beyond the third link"
        );
    }
    Ok(())
}

/// Run every contender over `s`'s links for `duration` each.
pub fn run(s: &Scenario, horde_ccs: &[String], duration: Duration) -> Result<Vec<Row>> {
    preflight(s.channels.len())?;
    // Ctrl-C or SIGTERM ends the run through its guards, which stop the shell in progress
    // (and with it the namespace and every process in it) and the receiver.
    horde_emu::sys::catch_stop_signals();
    let channels = s.channels.iter().map(|c| (c.name.as_str(), &c.up, &c.down));
    let links = horde_shell::link_texts(channels, &s.base_dir)?;
    let capacity = capacity_mbps(s, duration)?;
    let work =
        TempDir(std::env::temp_dir().join(format!("horde-bench-kernel-{}", std::process::id())));
    let all = contenders(horde_ccs);
    let mut rows = Vec::new();
    for (n, contender) in all.iter().enumerate() {
        check_interrupt()?;
        eprintln!(
            "[{}/{}] {} for {} s",
            n + 1,
            all.len(),
            contender.describe(links.len()),
            duration.as_secs_f64()
        );
        let dir = work
            .0
            .join(format!("{n}-{}-{}", contender.mode(), contender.cc()));
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let ctx = Run {
            s,
            links: &links,
            dir: &dir,
            duration,
        };
        let (goodput_bytes, declared_loss) = match contender {
            Contender::Horde(cc) => ctx.horde(cc).map(|(b, l)| (b, Some(l))),
            Contender::Tcp(cc) => ctx.kernel(cc, false).map(|b| (b, None)),
            Contender::Mptcp(cc) => ctx.kernel(cc, true).map(|b| (b, None)),
        }
        .with_context(|| contender.describe(links.len()))?;
        let up = shell_log::summarize(&dir.join("log"), links.len(), duration)?;
        let goodput = goodput_bytes * 8.0 / duration.as_secs_f64() / 1e6;
        eprintln!(
            "      {goodput:.2} Mbit/s ({:.0}% of {capacity:.2}), one-way p95 {:.0} ms, loss {:.2}%",
            goodput / capacity * 100.0,
            up.delay_p95_ms,
            up.loss * 100.0
        );
        rows.push(Row {
            mode: contender.mode(),
            cc: contender.cc().to_string(),
            duration_s: duration.as_secs_f64(),
            capacity_mbps: capacity,
            goodput_mbps: goodput,
            utilization: goodput / capacity,
            delay_p50_ms: up.delay_p50_ms,
            delay_p95_ms: up.delay_p95_ms,
            declared_loss,
            actual_loss: up.loss,
            late_acks: None,
            link_mbps: Some(up.link_mbps),
        });
    }
    Ok(rows)
}

/// One contender's run.
struct Run<'a> {
    s: &'a Scenario,
    links: &'a [String],
    dir: &'a Path,
    duration: Duration,
}

impl Run<'_> {
    fn shell(&self, mptcp: bool, script: &str, args: &[String]) -> Result<ShellRun> {
        ShellRun::start(&ShellSpec {
            links: self.links,
            seed: self.s.seed,
            mptcp,
            log_dir: &self.dir.join("log"),
            script,
            args,
            output: &self.dir.join("shell"),
        })
    }

    /// Kernel flows against the TCP sink: one per link, or one MPTCP connection. The
    /// flows run until the sink's window has gone by; then the shell is stopped.
    /// Returns the bytes the sink counted.
    fn kernel(&self, cc: &str, mptcp: bool) -> Result<f64> {
        let sink = TcpSink::start(self.duration)?;
        let client = format!(
            "\"$0\" flow client --connect \"$HORDE_SHELL_HOST:$1\" --bytes {ENDLESS_BYTES} --cc {cc}"
        );
        let script = if mptcp {
            format!("{client} --mptcp &\nwait\n")
        } else {
            (0..self.links.len())
                .map(|i| format!("{client} --bind \"$HORDE_SHELL_LINK{i}\" &\n"))
                .collect::<String>()
                + "wait\n"
        };
        let mut shell = self.shell(mptcp, &script, &[sink.port().to_string()])?;
        let wanted = if mptcp { 1 } else { self.links.len() as u64 };
        let started = std::time::Instant::now();
        while !sink.window_over() {
            check_interrupt()?;
            if let Some(status) = shell.try_wait()? {
                bail!(
                    "the flows ended before the run did ({status}); stderr:{}",
                    shell.stderr_tail()
                );
            }
            if sink.connections() < wanted && started.elapsed() > CONNECT_LIMIT {
                bail!(
                    "{} of {wanted} flows connected within {} s; stderr:{}",
                    sink.connections(),
                    CONNECT_LIMIT.as_secs(),
                    shell.stderr_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        shell.stop()?;
        if sink.connections() < wanted {
            bail!(
                "only {} of {wanted} flows connected; stderr:{}",
                sink.connections(),
                shell.stderr_tail()
            );
        }
        Ok(sink.bytes() as f64)
    }

    /// `horde recv` on the host, `horde send` for `duration` in the shell. Returns the
    /// bytes the receiver got in its first `duration` after accepting the sender, and
    /// the loss the sender declared.
    fn horde(&self, cc: &str) -> Result<(f64, f64)> {
        let files = HordeFiles::create(self.dir)?;
        let limit = CONNECT_LIMIT + self.duration + HORDE_DRAIN;
        let receiver = files.start_receiver(&self.dir.join("recv"), limit)?;
        let script = files.sender_script(self.dir, self.s, cc, self.duration)?;
        let mut shell = self.shell(false, &script, &[])?;
        let status = shell.wait_for(limit)?;
        // 4: the receiver left; anything but 0 here means the run went wrong.
        if !status.success() {
            bail!(
                "horde send ended with {status}; stderr:{}",
                shell.stderr_tail()
            );
        }
        drop(shell);
        let declared = super::horde_peer::declared_loss(&self.dir.join("shell.out"))?;
        let bytes = receiver.finish(Duration::from_secs(10), self.duration)?;
        Ok((bytes, declared))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn horde_runs_first_then_tcp_then_mptcp_under_each_kernel_controller() {
        let all = contenders(&["copa".to_string(), "cubic".to_string()]);
        assert_eq!(
            all,
            vec![
                Contender::Horde("copa".into()),
                Contender::Horde("cubic".into()),
                Contender::Tcp("cubic"),
                Contender::Tcp("bbr"),
                Contender::Mptcp("cubic"),
                Contender::Mptcp("bbr"),
            ]
        );
        assert_eq!(all[3].mode(), "tcp");
        assert_eq!(all[5].cc(), "bbr");
    }
}
