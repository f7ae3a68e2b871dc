//! The network namespace of a `horde shell`, its TUN devices, addresses and routes, set
//! up with iproute2 and torn down on drop.
//!
//! Shell `k` (claimed by creating the namespace `horde-shell-k`) owns the 256 addresses
//! `100.64.0.0 + 256 k` of the shared address space 100.64.0.0/10. Link `i` is the /30
//! at offset `4 i`: `.1` is the host side (`hs{k}h{i}`), `.2` the namespace side
//! (`link{i}`). The host address commands talk to is link 0's host side.

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use horde_emu::TunDevice;

/// Shell indices that fit in 100.64.0.0/10 at 256 addresses each.
const MAX_SHELLS: u32 = 1 << 14;
/// Links that fit in 256 addresses at a /30 each.
pub const MAX_LINKS: usize = 64;
const NETNS_DIR: &str = "/run/netns";
/// First routing table of the per-link source routes.
const TABLE_BASE: usize = 100;

/// One emulated link's devices and addresses.
pub struct LinkDevices {
    /// Namespace side: the command's packets come out of it, released ones go in.
    pub inner: TunDevice,
    /// Host side: released packets go in, the host's replies come out.
    pub outer: TunDevice,
    pub inner_name: String,
    pub inner_addr: Ipv4Addr,
    pub outer_addr: Ipv4Addr,
}

/// A network namespace named `horde-shell-k`, deleted on drop together with every
/// process still in it. The TUN devices disappear when their descriptors close.
pub struct Namespace {
    pub name: String,
    pub index: u32,
}

impl Namespace {
    /// Claim the first free `horde-shell-k`, starting from a pid-derived `k` so that
    /// concurrent shells rarely collide (creation is atomic, so collisions are safe).
    pub fn create() -> Result<Namespace> {
        let start = std::process::id() % MAX_SHELLS;
        for step in 0..MAX_SHELLS {
            let index = (start + step) % MAX_SHELLS;
            let name = format!("horde-shell-{index}");
            if Path::new(NETNS_DIR).join(&name).exists() {
                continue;
            }
            let out = Command::new("ip")
                .args(["netns", "add", &name])
                .output()
                .context("run `ip` (iproute2 must be installed)")?;
            if out.status.success() {
                return Ok(Namespace { name, index });
            }
            if !Path::new(NETNS_DIR).join(&name).exists() {
                bail!(
                    "ip netns add {name}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
        }
        bail!("every horde-shell namespace index is taken")
    }

    /// Address `offset` of this shell's block.
    fn addr(&self, offset: usize) -> Ipv4Addr {
        let base = u32::from(Ipv4Addr::new(100, 64, 0, 0)) + self.index * 256;
        Ipv4Addr::from(base + offset as u32)
    }

    /// The host-side address of link `i`.
    pub fn outer_addr(&self, i: usize) -> Ipv4Addr {
        self.addr(4 * i + 1)
    }

    /// The namespace-side address of link `i`.
    pub fn inner_addr(&self, i: usize) -> Ipv4Addr {
        self.addr(4 * i + 2)
    }

    /// Loopback up, no reverse-path filtering (replies to a link's address come back on
    /// that link even though the main table routes the host through link 0), no IPv6
    /// chatter on the emulated links.
    pub fn prepare(&self) -> Result<()> {
        self.ip(&["link", "set", "lo", "up"])?;
        self.exec(&[
            "sysctl",
            "-qw",
            "net.ipv4.conf.all.rp_filter=0",
            "net.ipv4.conf.default.rp_filter=0",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ])
    }

    /// Create link `i`: a TUN device moved into the namespace as `link{i}`, a host-side
    /// TUN device, their addresses, and the source route of `link{i}`.
    pub fn add_link(&self, i: usize) -> Result<LinkDevices> {
        let inner_name = format!("link{i}");
        let staging = format!("hs{}n{i}", self.index);
        let outer_name = format!("hs{}h{i}", self.index);
        let inner =
            TunDevice::create(&staging).with_context(|| format!("create TUN device {staging}"))?;
        run(&["ip", "link", "set", "dev", &staging, "netns", &self.name])?;
        self.ip(&["link", "set", "dev", &staging, "name", &inner_name])?;
        let (inner_addr, outer_addr) = (self.inner_addr(i), self.outer_addr(i));
        self.ip(&[
            "addr",
            "add",
            &format!("{inner_addr}/30"),
            "dev",
            &inner_name,
        ])?;
        self.ip(&["link", "set", "dev", &inner_name, "up"])?;
        let outer = TunDevice::create(&outer_name)
            .with_context(|| format!("create TUN device {outer_name}"))?;
        let _ = std::fs::write(
            format!("/proc/sys/net/ipv6/conf/{outer_name}/disable_ipv6"),
            "1",
        );
        run(&[
            "ip",
            "addr",
            "add",
            &format!("{outer_addr}/30"),
            "dev",
            &outer_name,
        ])?;
        run(&["ip", "link", "set", "dev", &outer_name, "up"])?;
        // A socket bound to this link's address leaves through this link.
        let table = (TABLE_BASE + i).to_string();
        self.ip(&[
            "route",
            "add",
            "default",
            "dev",
            &inner_name,
            "table",
            &table,
        ])?;
        self.ip(&[
            "rule",
            "add",
            "from",
            &inner_addr.to_string(),
            "table",
            &table,
            "priority",
            &table,
        ])?;
        Ok(LinkDevices {
            inner,
            outer,
            inner_name,
            inner_addr,
            outer_addr,
        })
    }

    /// TCP route attributes (`initcwnd 2`, `rto_min 1000ms`, ...) on every link, both
    /// ways: the namespace's routes and the host's link routes. Lets kernel TCP be
    /// compared with a stack that starts or times out differently.
    pub fn set_tcp_route_options(&self, links: &[LinkDevices], options: &[String]) -> Result<()> {
        fn joined<'a>(base: &[&'a str], options: &'a [String]) -> Vec<&'a str> {
            base.iter()
                .copied()
                .chain(options.iter().map(String::as_str))
                .collect()
        }
        let first = &links[0].inner_name;
        self.ip(&joined(
            &["route", "change", "default", "dev", first],
            options,
        ))?;
        for (i, l) in links.iter().enumerate() {
            let table = (TABLE_BASE + i).to_string();
            let route = [
                "route",
                "change",
                "default",
                "dev",
                &l.inner_name,
                "table",
                &table,
            ];
            self.ip(&joined(&route, options))?;
            let net = format!("{}/30", Ipv4Addr::from(u32::from(l.outer_addr) & !3));
            let (dev, src) = (format!("hs{}h{i}", self.index), l.outer_addr.to_string());
            run(&joined(
                &[
                    "ip", "route", "change", &net, "dev", &dev, "proto", "kernel", "scope", "link",
                    "src", &src,
                ],
                options,
            ))?;
        }
        Ok(())
    }

    /// Route everything else (the host address included) through link 0.
    pub fn default_route(&self, links: &[LinkDevices]) -> Result<()> {
        self.ip(&["route", "add", "default", "dev", &links[0].inner_name])
    }

    /// MPTCP in the namespace: one subflow endpoint per link beyond the first (the
    /// first subflow already uses link 0), and limits that allow them.
    pub fn configure_mptcp(&self, links: &[LinkDevices]) -> Result<()> {
        let n = links.len().to_string();
        self.exec(&["sysctl", "-qw", "net.mptcp.enabled=1"])?;
        self.ip(&[
            "mptcp",
            "limits",
            "set",
            "subflow",
            &n,
            "add_addr_accepted",
            &n,
        ])?;
        for link in &links[1..] {
            self.ip(&[
                "mptcp",
                "endpoint",
                "add",
                &link.inner_addr.to_string(),
                "dev",
                &link.inner_name,
                "subflow",
            ])?;
        }
        Ok(())
    }

    fn ip(&self, args: &[&str]) -> Result<()> {
        let mut full = vec!["ip", "-n", &self.name];
        full.extend_from_slice(args);
        run(&full)
    }

    fn exec(&self, args: &[&str]) -> Result<()> {
        let mut full = vec!["ip", "netns", "exec", &self.name];
        full.extend_from_slice(args);
        run(&full)
    }

    /// Kill what is left in the namespace (a command's background children) and delete it.
    fn destroy(&self) {
        if let Ok(out) = Command::new("ip")
            .args(["netns", "pids", &self.name])
            .output()
        {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Ok(pid) = pid.parse::<libc::pid_t>() {
                    let _ = horde_emu::sys::kill(pid, libc::SIGKILL);
                }
            }
        }
        if let Err(e) = run(&["ip", "netns", "del", &self.name]) {
            eprintln!("horde shell: cleanup: {e:#}");
        }
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        self.destroy();
    }
}

fn run(args: &[&str]) -> Result<()> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .with_context(|| format!("run {}", args[0]))?;
    if !out.status.success() {
        bail!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
