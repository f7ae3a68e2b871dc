//! The Linux system calls Horde's commands make outside the UDP runtime, each behind a
//! safe function that returns `io::Result` (or cannot fail): who the process runs as and
//! signals ([`process`], [`signals`]), entering a network namespace ([`netns`]), a TUN
//! device's interface ([`tun`]), and TCP and MPTCP socket options ([`tcp`]). They live
//! here because the emulator, its shell, the tunnel and the flow tools all sit on this
//! crate.

pub mod netns;
pub mod process;
pub mod signals;
pub mod tcp;
pub mod tun;

pub use netns::enter_netns;
pub use process::{interrupt, is_root, kill};
pub use signals::{
    catch_reload_signal, catch_stop_signals, default_sigpipe, interrupted, stop_signal,
    take_reload_request, SigintGuard,
};
pub use tcp::{
    is_mptcp, mptcp_subflow_infos, set_tcp_congestion, stream_socket, tcp_congestion, tcp_info,
};
pub use tun::{open_tun, open_tun_with_offloads, VNET_HDR_LEN};
