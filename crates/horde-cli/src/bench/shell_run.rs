//! One contender's `horde shell`: a fresh namespace over the scenario's links (so every
//! contender starts at the beginning of the same traces), with a packet log, running a
//! `sh` script. The shell is a child process; dropping the guard stops it (SIGTERM,
//! which the shell passes on to the script before it deletes its namespace and
//! everything still running in it).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// How long a stopped shell gets to clean up before SIGKILL (it gives its command 2 s).
const STOP_GRACE: Duration = Duration::from_secs(6);

pub struct ShellRun {
    child: Child,
    stderr_path: PathBuf,
}

/// What to run, and where.
pub struct ShellSpec<'a> {
    /// `horde shell --link` values, one per link.
    pub links: &'a [String],
    pub seed: u64,
    pub mptcp: bool,
    /// The packet log directory (`--log`).
    pub log_dir: &'a Path,
    /// The script; `$0` is the horde binary, `$1...` are `args`.
    pub script: &'a str,
    pub args: &'a [String],
    /// The shell's stdout and stderr go to `{output}.out` and `{output}.err`.
    pub output: &'a Path,
}

impl ShellRun {
    pub fn start(spec: &ShellSpec) -> Result<ShellRun> {
        let exe = std::env::current_exe().context("find the horde binary")?;
        let mut cmd = Command::new(&exe);
        cmd.arg("shell")
            .arg("--seed")
            .arg(spec.seed.to_string())
            .arg("--log")
            .arg(spec.log_dir);
        if spec.mptcp {
            cmd.arg("--mptcp");
        }
        for l in spec.links {
            cmd.arg("--link").arg(l);
        }
        cmd.args(["--", "sh", "-c", spec.script])
            .arg(&exe)
            .args(spec.args);
        let stdout_path = spec.output.with_extension("out");
        let stderr_path = spec.output.with_extension("err");
        let create =
            |p: &Path| std::fs::File::create(p).with_context(|| format!("create {}", p.display()));
        cmd.stdin(Stdio::null())
            .stdout(create(&stdout_path)?)
            .stderr(create(&stderr_path)?);
        let child = cmd.spawn().context("start horde shell")?;
        Ok(ShellRun { child, stderr_path })
    }

    /// The shell's exit status, if it has ended.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        Ok(self.child.try_wait()?)
    }

    /// Wait up to `limit` for the shell to end by itself; then stop it.
    pub fn wait_for(&mut self, limit: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            check_interrupt()?;
            std::thread::sleep(Duration::from_millis(50));
        }
        self.stop()
    }

    /// SIGTERM (the shell forwards it and deletes its namespace), SIGKILL if it lingers.
    pub fn stop(&mut self) -> Result<ExitStatus> {
        if let Some(status) = self.child.try_wait()? {
            return Ok(status);
        }
        let _ = horde_emu::sys::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        Ok(self.child.wait()?)
    }

    /// The last lines the shell and its command wrote on stderr, for error messages.
    pub fn stderr_tail(&self) -> String {
        tail(&self.stderr_path, 8)
    }
}

impl Drop for ShellRun {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// An error once SIGINT, SIGTERM or SIGHUP has come (see
/// [`horde_emu::sys::catch_stop_signals`]), so that the guards of the run in progress
/// stop its shell and receiver on the way out.
pub fn check_interrupt() -> Result<()> {
    match horde_emu::sys::stop_signal() {
        Some(signal) => anyhow::bail!("interrupted (signal {signal})"),
        None => Ok(()),
    }
}

/// The last `lines` lines of a file, indented, or a note that it is empty.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    if all.is_empty() {
        return "(nothing on stderr)".into();
    }
    all[all.len().saturating_sub(lines)..]
        .iter()
        .map(|l| format!("\n  {l}"))
        .collect()
}
