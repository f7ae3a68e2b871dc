//! `horde flow compare`: Linux MPTCP over every emulated link against single-path kernel
//! TCP over each link alone, in one `horde shell` over the same links, as one table.
//!
//! The transfers run one after another inside a single shell (so every run crosses the
//! same emulated devices and models), against a server in this process on the host
//! side. Single-path runs bind the client to one link's address, which policy routing
//! keeps on that link; the MPTCP run uses the shell's path-manager endpoints.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Command as Process, ExitCode, Stdio};

use anyhow::{bail, ensure, Context, Result};
use clap::Args as ClapArgs;
use serde::{Deserialize, Serialize};

use super::{receive, Cc};
use horde_emu::sys::stream_socket;

/// The two-link setup: a fast short link and a slow long one.
const DEFAULT_LINKS: [&str; 2] = ["rate=10mbit,delay=20ms", "rate=5mbit,delay=80ms"];

#[derive(ClapArgs)]
pub struct CompareArgs {
    /// The emulated links (`horde shell --link` syntax); repeat for each. Defaults to
    /// 10 Mbit/s at 20 ms and 5 Mbit/s at 80 ms.
    #[arg(long = "link", value_name = "SPEC", default_values = DEFAULT_LINKS)]
    links: Vec<String>,
    /// Bytes per transfer (the same for every run).
    #[arg(long, default_value_t = 10_000_000)]
    bytes: u64,
    /// Congestion control of every run; the kernel default when absent.
    #[arg(long, value_enum)]
    cc: Option<Cc>,
    /// Seed of the links' random processes and of the payload.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Also write every run's client report and the summary as JSON here.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// The fields of a `horde flow client` report that the table shows.
#[derive(Deserialize, Serialize, Clone)]
struct ClientRun {
    protocol: String,
    cc: String,
    local: String,
    bytes: u64,
    seconds: f64,
    goodput_mbps: f64,
    checksum_ok: bool,
    subflows: usize,
    rtt_ms: Rtt,
}

#[derive(Deserialize, Serialize, Clone)]
struct Rtt {
    p50: f64,
    p95: f64,
}

/// One row: what ran where, and its report.
#[derive(Serialize)]
struct Row {
    path: String,
    run: ClientRun,
}

#[derive(Serialize)]
struct Summary {
    links: Vec<String>,
    bytes: u64,
    rows: Vec<Row>,
    /// 1-based index of the link whose single-path run was fastest.
    best_link: usize,
    best_single_mbps: f64,
    mptcp_mbps: f64,
    mptcp_over_best: f64,
    mptcp_over_sum_of_singles: f64,
}

pub fn run(args: CompareArgs) -> Result<ExitCode> {
    ensure!(
        args.links.len() >= 2,
        "flow compare needs at least two --link (MPTCP over one link is single-path TCP)"
    );
    ensure!(
        horde_emu::sys::is_root(),
        "horde flow compare needs root (horde shell creates a network namespace and TUN devices)"
    );
    ensure!(
        std::fs::read_to_string("/proc/sys/net/mptcp/enabled").is_ok_and(|v| v.trim() == "1"),
        "MPTCP is not enabled on this host (sysctl net.mptcp.enabled=1, kernel 5.6 or later)"
    );
    if args.links.len() > 3 {
        eprintln!(
            "note: the host's `ip mptcp limits` (2 extra subflows by default) may refuse \
             subflows beyond the third link"
        );
    }
    let port = start_server()?;
    let output = run_shell(&args, port)?;
    let runs = parse_runs(&String::from_utf8_lossy(&output.stdout))?;
    ensure!(
        output.status.success() && runs.len() == args.links.len() + 1,
        "horde shell exited with {} after {} of {} transfers",
        output.status,
        runs.len(),
        args.links.len() + 1
    );
    check_protocols(&runs)?;
    let summary = summarize(&args, runs);
    print!("{}", markdown(&summary));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&summary)? + "\n")
            .with_context(|| format!("write {}", path.display()))?;
    }
    let intact = summary.rows.iter().all(|r| r.run.checksum_ok);
    if !intact {
        eprintln!("a transfer arrived corrupted (checksum mismatch)");
    }
    Ok(if intact {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// An MPTCP listener on every host address (so subflows arriving on any link's host
/// side are accepted), serving transfers until the process exits. Returns its port.
fn start_server() -> Result<u16> {
    let any: SocketAddr = "0.0.0.0:0".parse().expect("valid address");
    let socket = stream_socket(any, true).context("create an MPTCP listener")?;
    socket.bind(&any.into()).context("bind the flow server")?;
    socket.listen(16)?;
    let listener: TcpListener = socket.into();
    let port = listener.local_addr()?.port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            if let Err(e) = receive(stream) {
                eprintln!("flow compare: a transfer failed on the server: {e:#}");
            }
        }
    });
    Ok(port)
}

/// The shell script: one `horde flow client` per run, MPTCP first, stopping at the
/// first failure. `$0` is the horde binary, `$1` the server's port.
fn script(args: &CompareArgs) -> String {
    let mut common = format!(
        "--connect \"$HORDE_SHELL_HOST:$1\" --bytes {} --seed {}",
        args.bytes, args.seed
    );
    if let Some(cc) = args.cc {
        common.push_str(&format!(" --cc {}", cc.name()));
    }
    let mut lines = vec![format!("\"$0\" flow client --mptcp {common} || exit $?")];
    for i in 0..args.links.len() {
        lines.push(format!(
            "\"$0\" flow client --bind \"$HORDE_SHELL_LINK{i}\" {common} || exit $?"
        ));
    }
    lines.join("\n")
}

fn run_shell(args: &CompareArgs, port: u16) -> Result<std::process::Output> {
    let exe = std::env::current_exe().context("find the horde binary")?;
    let mut shell_args = vec![
        "shell".to_string(),
        "--mptcp".into(),
        "--seed".into(),
        args.seed.to_string(),
    ];
    for l in &args.links {
        shell_args.extend(["--link".to_string(), l.clone()]);
    }
    eprintln!(
        "horde {} -- (MPTCP, then TCP on each link; {} bytes each)",
        shell_args.join(" "),
        args.bytes
    );
    // A spinner while the transfers run (a minute or more at the defaults); hidden when
    // stderr is not a terminal.
    let spinner = indicatif::ProgressBar::new_spinner()
        .with_message(format!("{} transfers", args.links.len() + 1));
    spinner.enable_steady_tick(std::time::Duration::from_millis(200));
    let output = Process::new(&exe)
        .args(&shell_args)
        .args(["--", "sh", "-c", &script(args)])
        .arg(&exe)
        .arg(port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .context("run horde shell");
    spinner.finish_and_clear();
    output
}

/// The JSON lines the clients printed, in run order.
fn parse_runs(stdout: &str) -> Result<Vec<ClientRun>> {
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| format!("client report {}: {l}", i + 1))
        })
        .collect()
}

fn summarize(args: &CompareArgs, mut runs: Vec<ClientRun>) -> Summary {
    let mptcp = runs.remove(0);
    let (best, best_run) = runs
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.goodput_mbps.total_cmp(&b.1.goodput_mbps))
        .expect("at least two single-path runs");
    let best_single_mbps = best_run.goodput_mbps;
    let sum: f64 = runs.iter().map(|r| r.goodput_mbps).sum();
    let mptcp_mbps = mptcp.goodput_mbps;
    let mut rows: Vec<Row> = runs
        .into_iter()
        .enumerate()
        .map(|(i, run)| Row {
            path: format!("TCP, link {} only ({})", i + 1, args.links[i]),
            run,
        })
        .collect();
    rows.push(Row {
        path: format!("MPTCP, links 1-{}", args.links.len()),
        run: mptcp,
    });
    Summary {
        links: args.links.clone(),
        bytes: args.bytes,
        rows,
        best_link: best + 1,
        best_single_mbps,
        mptcp_mbps,
        mptcp_over_best: mptcp_mbps / best_single_mbps,
        mptcp_over_sum_of_singles: mptcp_mbps / sum,
    }
}

fn markdown(s: &Summary) -> String {
    let mut out = String::from(
        "| path | cc | subflows | seconds | goodput Mbit/s | RTT p50 / p95 ms | intact |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in &s.rows {
        out.push_str(&format!(
            "| {} | {} | {} | {:.2} | {:.2} | {:.0} / {:.0} | {} |\n",
            r.path,
            r.run.cc,
            r.run.subflows,
            r.run.seconds,
            r.run.goodput_mbps,
            r.run.rtt_ms.p50,
            r.run.rtt_ms.p95,
            if r.run.checksum_ok { "yes" } else { "NO" },
        ));
    }
    out.push_str(&format!(
        "\nbest single path: link {} at {:.2} Mbit/s; MPTCP {:.2} Mbit/s = {:.2}x the best \
         single path, {:.2}x the sum of the single paths\n",
        s.best_link,
        s.best_single_mbps,
        s.mptcp_mbps,
        s.mptcp_over_best,
        s.mptcp_over_sum_of_singles
    ));
    out
}

/// Refuse reports that do not match the script (MPTCP first, then plain TCP) rather than
/// print a misleading table.
fn check_protocols(runs: &[ClientRun]) -> Result<()> {
    for (i, r) in runs.iter().enumerate() {
        let want = if i == 0 { "mptcp" } else { "tcp" };
        if r.protocol != want {
            bail!("run {} was {}, expected {want}", i + 1, r.protocol);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(protocol: &str, mbps: f64) -> ClientRun {
        ClientRun {
            protocol: protocol.into(),
            cc: "cubic".into(),
            local: "100.64.0.2:1".into(),
            bytes: 1000,
            seconds: 1.0,
            goodput_mbps: mbps,
            checksum_ok: true,
            subflows: 1,
            rtt_ms: Rtt { p50: 1.0, p95: 2.0 },
        }
    }

    fn args() -> CompareArgs {
        CompareArgs {
            links: DEFAULT_LINKS.iter().map(|s| s.to_string()).collect(),
            bytes: 1000,
            cc: None,
            seed: 1,
            json: None,
        }
    }

    #[test]
    fn the_best_single_path_is_the_fastest_link_and_mptcp_is_compared_with_it() {
        let s = summarize(
            &args(),
            vec![run("mptcp", 12.0), run("tcp", 4.0), run("tcp", 8.0)],
        );
        assert_eq!(s.best_link, 2);
        assert_eq!(s.best_single_mbps, 8.0);
        assert_eq!(s.mptcp_over_best, 1.5);
        assert_eq!(s.mptcp_over_sum_of_singles, 1.0);
        assert_eq!(s.rows.last().unwrap().run.protocol, "mptcp");
        assert!(s.rows[0]
            .path
            .contains("link 1 only (rate=10mbit,delay=20ms)"));
        let table = markdown(&s);
        assert!(
            table.contains("best single path: link 2 at 8.00"),
            "{table}"
        );
    }

    #[test]
    fn the_script_runs_mptcp_then_each_link_bound_to_its_address() {
        let text = script(&args());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("--mptcp"));
        assert!(lines[1].contains("--bind \"$HORDE_SHELL_LINK0\""));
        assert!(lines[2].contains("--bind \"$HORDE_SHELL_LINK1\""));
        assert!(lines.iter().all(|l| l.ends_with("|| exit $?")));
    }

    #[test]
    fn garbage_in_a_client_report_is_an_error() {
        assert!(parse_runs("{\"protocol\": 1}\n").is_err());
        assert_eq!(parse_runs("noise\n").unwrap().len(), 0);
        let order = check_protocols(&[run("tcp", 1.0), run("tcp", 1.0)]);
        assert!(order.unwrap_err().to_string().contains("run 1 was tcp"));
        assert!(check_protocols(&[run("mptcp", 1.0), run("tcp", 1.0)]).is_ok());
    }
}
