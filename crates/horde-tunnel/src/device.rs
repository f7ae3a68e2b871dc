//! The tunnel's TUN device: created with `horde-emu`'s [`TunDevice`], given its MTU,
//! addresses and routes with iproute2, and read asynchronously on the tokio runtime.
//! Closing it (drop) removes the interface with its addresses and routes. With offloads
//! (the default when the kernel has them) every read starts with a `virtio_net_hdr` and
//! may be a TCP super packet, which [`crate::forward::from_tun`] cuts into IP packets.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::process::Command;

use crate::Prefix;
use anyhow::{bail, Context, Result};
use horde_emu::{PacketPort, TunDevice};
use tokio::io::unix::AsyncFd;

struct Fd(TunDevice);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.raw_fd()
    }
}

pub struct Tun {
    fd: AsyncFd<Fd>,
    name: String,
    /// Why offloads were asked for but not had: the kernel's refusal.
    offloads_refused: Option<String>,
}

impl Tun {
    /// Create `name` in this network namespace, up, with `mtu`, `addresses` and
    /// `routes` into it, with TUN offloads if `offloads` asks for them and the kernel
    /// has them (without them otherwise). Needs `CAP_NET_ADMIN`.
    pub fn open(
        name: &str,
        mtu: u32,
        addresses: &[Prefix],
        routes: &[Prefix],
        offloads: bool,
    ) -> Result<Tun> {
        let (dev, refused) = TunDevice::create_preferring_offloads(name, offloads)
            .with_context(|| format!("create TUN device {name}"))?;
        let offloads_refused = refused.map(|e| e.to_string());
        if addresses.iter().chain(routes).any(|p| p.addr.is_ipv6()) {
            // A namespace may have IPv6 off by default; this device needs it.
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6"), "0");
        }
        ip(&["link", "set", "dev", name, "mtu", &mtu.to_string(), "up"])?;
        for a in addresses {
            let a = a.to_string();
            let mut args = vec!["addr", "add", &a, "dev", name];
            if a.contains(':') {
                args.push("nodad"); // a point-to-point tunnel has no one to collide with
            }
            ip(&args)?;
        }
        for r in routes {
            ip(&["route", "replace", &r.to_string(), "dev", name])?;
        }
        // SAFETY: `Fd` owns the descriptor, which stays open for as long as it lives.
        let fd = unsafe { AsyncFd::register(Fd(dev)) }
            .map_err(|e| anyhow::anyhow!("register the TUN device with the runtime: {e}"))?;
        Ok(Tun {
            fd,
            name: name.to_string(),
            offloads_refused,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether reads start with a `virtio_net_hdr` (see [`crate::offload`]).
    pub fn offloads(&self) -> bool {
        self.fd.get_ref().0.offloads()
    }

    /// Offloads were asked for but the kernel refused them, for this reason.
    pub fn offloads_refused(&self) -> Option<&str> {
        self.offloads_refused.as_deref()
    }

    /// The next read from the device: a packet the kernel routed into the tunnel, after a
    /// `virtio_net_hdr` with offloads.
    pub async fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|fd| fd.get_ref().0.recv(buf).map(|(n, _)| n)) {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }

    /// Hand `bytes` to the kernel as they are (with offloads, a `virtio_net_hdr` and its
    /// packet).
    pub fn send_raw(&self, bytes: &[u8]) -> io::Result<()> {
        self.fd.get_ref().0.write_raw(bytes)
    }

    /// Hand a packet to the kernel, as if it arrived on the device (after a header that
    /// asks for nothing, with offloads).
    pub fn send(&self, packet: &[u8]) -> io::Result<()> {
        self.fd.get_ref().0.send(packet, None)
    }
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("run `ip` (iproute2 must be installed)")?;
    if !out.status.success() {
        bail!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}
