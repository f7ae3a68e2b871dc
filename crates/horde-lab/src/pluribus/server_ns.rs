//! The wired side of a live PluriBus run: a network namespace of its own that holds the
//! tunnel server, the flow servers and the host side of `horde shell`'s links, so the
//! run touches no address outside it. Dropping the guard kills what is left in it and
//! deletes it.

use std::fs::File;
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use horde_flows::ServerRetransmits;

pub struct ServerNamespace {
    name: String,
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("run ip (iproute2)")?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl ServerNamespace {
    /// A new namespace `horde-plb-PID` with its loopback up.
    pub fn create() -> Result<Self> {
        let name = format!("horde-plb-{}", std::process::id());
        ip(&["netns", "add", &name])?;
        let ns = Self { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// A command that runs `program` inside the namespace.
    pub fn command(&self, program: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }

    /// Whether a network device of this name exists in the namespace.
    pub fn has_device(&self, device: &str) -> bool {
        ip(&["-n", &self.name, "link", "show", device]).is_ok()
    }

    /// Flow-protocol servers listening on `port` (TCP) and, with `mptcp_port`, on that
    /// port with an MPTCP listener, inside the namespace; what their kernels count goes
    /// into `counters`. Errors if the kernel refuses an MPTCP socket.
    pub fn serve_flows(
        &self,
        port: u16,
        mptcp_port: Option<u16>,
        cc: &str,
        counters: ServerRetransmits,
    ) -> Result<()> {
        let netns = File::open(format!("/var/run/netns/{}", self.name))
            .with_context(|| format!("open the namespace {}", self.name))?;
        let cc = cc.to_string();
        let (tx, rx) = std::sync::mpsc::channel();
        // setns changes only the calling thread's namespace; sockets stay in the one they
        // were made in, so the listeners are made on a thread of their own.
        std::thread::spawn(move || {
            let made = if let Err(e) = horde_emu::sys::enter_netns(&netns) {
                Err(anyhow::anyhow!("setns: {e}"))
            } else {
                listeners(port, mptcp_port)
            };
            match made {
                Ok(list) => {
                    let _ = tx.send(Ok(()));
                    for l in list {
                        let (c, cc) = (counters.clone(), cc.clone());
                        std::thread::spawn(move || horde_flows::serve(l, Some(cc), None, c, false));
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(5))
            .context("the flow servers did not start")?
    }
}

fn listeners(port: u16, mptcp_port: Option<u16>) -> Result<Vec<TcpListener>> {
    let mut out =
        vec![TcpListener::bind(("0.0.0.0", port)).with_context(|| format!("bind port {port}"))?];
    if let Some(p) = mptcp_port {
        let addr = SocketAddr::from(([0, 0, 0, 0], p));
        let socket = horde_emu::sys::stream_socket(addr, true).map_err(|e| {
            anyhow::anyhow!(
                "MPTCP is not available: socket(IPPROTO_MPTCP) failed: {e} \
                 (needs a kernel with MPTCP and sysctl net.mptcp.enabled=1; \
                 or leave mptcp out of --modes)"
            )
        })?;
        socket.set_reuse_address(true)?;
        socket
            .bind(&addr.into())
            .with_context(|| format!("bind {addr}"))?;
        socket.listen(256)?;
        out.push(socket.into());
    }
    Ok(out)
}

impl Drop for ServerNamespace {
    fn drop(&mut self) {
        let pids = || -> Vec<i32> {
            Command::new("ip")
                .args(["netns", "pids", &self.name])
                .output()
                .map(|o| {
                    String::from_utf8_lossy(&o.stdout)
                        .split_whitespace()
                        .filter_map(|p| p.parse().ok())
                        .filter(|&p| p != std::process::id() as i32)
                        .collect()
                })
                .unwrap_or_default()
        };
        for (sig, wait) in [(libc::SIGTERM, 1000), (libc::SIGKILL, 200)] {
            let left = pids();
            if left.is_empty() {
                break;
            }
            for pid in left {
                let _ = horde_emu::sys::kill(pid, sig);
            }
            std::thread::sleep(Duration::from_millis(wait));
        }
        let _ = ip(&["netns", "del", &self.name]);
    }
}
