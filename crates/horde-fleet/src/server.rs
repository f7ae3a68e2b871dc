//! The server under test: a real `horde recv --server` process, its files written for
//! the fleet (its key, every vehicle's public key, the session timers), started, killed
//! with SIGKILL and started again on the same address.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use horde_crypto::{Keypair, PublicKey};

/// How to start the server: the program and the arguments before its config file.
#[derive(Debug, Clone)]
pub struct ServerCommand {
    /// The `horde` binary.
    pub program: PathBuf,
}

/// How long a server may take to bind its socket.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The server's files and its running process.
pub struct Server {
    command: ServerCommand,
    config: PathBuf,
    pub addr: SocketAddr,
    /// The longest the server runs, s.
    max_run_s: f64,
    child: Option<Child>,
}

/// What the server's `[session]` timers are.
pub struct ServerTimers {
    pub keepalive_ms: f64,
    pub idle_timeout_ms: f64,
}

impl Server {
    /// Write the server's key and config into `dir`; nothing runs yet.
    pub fn prepare(
        command: ServerCommand,
        dir: &Path,
        key: &Keypair,
        allowed: &[PublicKey],
        timers: &ServerTimers,
        max_run_s: f64,
    ) -> Result<Server> {
        let key_path = dir.join("server.key");
        key.write_file(&key_path)
            .with_context(|| format!("writing {}", key_path.display()))?;
        let addr = free_udp_port()?;
        let mut toml = String::with_capacity(64 * allowed.len() + 512);
        toml.push_str("key_file = \"server.key\"\nidle_timeout_s = 0\nallowed_keys = [\n");
        for k in allowed {
            toml.push_str(&format!("  \"{k}\",\n"));
        }
        toml.push_str("]\n\n[session]\n");
        toml.push_str(&format!(
            "keepalive_ms = {}\nidle_timeout_ms = {}\n\n[[interfaces]]\nbind = \"{addr}\"\n",
            timers.keepalive_ms, timers.idle_timeout_ms
        ));
        let config = dir.join("server.toml");
        std::fs::write(&config, toml).with_context(|| format!("writing {}", config.display()))?;
        Ok(Server {
            command,
            config,
            addr,
            max_run_s,
            child: None,
        })
    }

    /// Start the server and wait until it listens.
    pub fn start(&mut self) -> Result<()> {
        let mut child = Command::new(&self.command.program)
            .arg("recv")
            .arg(&self.config)
            .arg("--server")
            // A server left behind by a generator that was itself killed ends by itself.
            .arg("--duration")
            .arg(self.max_run_s.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", self.command.program.display()))?;
        let stdout = child.stdout.take().context("server stdout")?;
        let (tx, rx) = mpsc::channel();
        // The server prints a line per sender; read them all so that it never blocks.
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("listening on") {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(());
                    }
                }
            }
        });
        let pid = child.id();
        self.child = Some(child);
        if rx.recv_timeout(START_TIMEOUT).is_err() {
            let status = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            self.kill();
            match status {
                Some(s) => bail!("the server (pid {pid}) exited before listening: {s}"),
                None => bail!("the server (pid {pid}) did not listen within {START_TIMEOUT:?}"),
            }
        }
        Ok(())
    }

    /// The running server's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL the server, as a crash would, and reap it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A UDP port free on 127.0.0.1 now.
fn free_udp_port() -> Result<SocketAddr> {
    let s = UdpSocket::bind("127.0.0.1:0").context("finding a free UDP port")?;
    Ok(s.local_addr()?)
}
