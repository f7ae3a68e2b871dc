//! Host-wide counters, as [`Host::stats`](crate::Host::stats) reports them.

use horde_crypto::DropCounters;

/// Host-wide counters.
#[derive(Debug, Clone, Default)]
pub struct HostStats {
    /// Datagrams received on every interface.
    pub datagrams_in: u64,
    /// Datagrams sent.
    pub datagrams_out: u64,
    /// Bytes received (whole UDP payloads).
    pub bytes_in: u64,
    /// Bytes sent (whole UDP payloads).
    pub bytes_out: u64,
    /// Datagrams dropped by the secure layer, by reason (garbage, replay, bad key...).
    pub dropped: DropCounters,
    /// Datagrams the kernel dropped at the data sockets before the driver read them: those
    /// that can belong to no live session or pending handshake (empty, too short, an
    /// undefined type, or a receiver index not in use here), refused by a socket filter so
    /// that a flood of them never wakes the driver, and any that found a receive buffer
    /// full. Not counted in `datagrams_in`.
    pub kernel_dropped: u64,
    /// Authenticated datagrams for a session that no longer exists or a service nobody
    /// listens on.
    pub unroutable: u64,
    /// Hellos for a service this host does not serve, answered with a refusal.
    pub services_refused: u64,
    /// Sends the operating system refused (no route, ICMP errors, full buffers).
    pub send_errors: u64,
    /// Times the channel pool manager took an interface out of service (device gone,
    /// down, without carrier or without its address) and closed its socket.
    pub interfaces_down: u64,
    /// Times it bound such an interface's socket again.
    pub interfaces_up: u64,
    /// Channels removed because their interface went down or was removed.
    pub channels_removed: u64,
    /// Channels added again when their interface came back.
    pub channels_restored: u64,
    /// Whether each interface's socket is open now, in interface order.
    pub interfaces_open: Vec<bool>,
    /// Sessions ended because a new session from the same peer key to the same service
    /// replaced them.
    pub sessions_replaced: u64,
    /// Accepted connections closed at once because the listener's backlog was full.
    pub backlog_refused: u64,
    /// Sessions a persistent connection opened again after its old one died.
    pub reconnects: u64,
    /// Sessions removed after they ended (closed, replaced, timed out).
    pub sessions_removed: u64,
    /// `sendmmsg` calls that sent something.
    pub send_calls: u64,
    /// Messages among what they sent that carried several datagrams with UDP GSO.
    pub gso_messages: u64,
    /// `recvmmsg` calls that returned datagrams.
    pub recv_calls: u64,
    /// Reads that returned a GRO train of several datagrams.
    pub gro_reads: u64,
    /// Datagrams the handshake worker read from the handshake sockets (initiations that
    /// the kernel steered away from the data path); also counted in `datagrams_in`.
    pub handshake_datagrams_in: u64,
    /// Datagrams sealed on the sealing worker thread ([`HostConfig::seal_worker`]).
    pub sealed_off_thread: u64,
    /// Datagrams the driver sealed itself while a sealing worker runs: batches too small
    /// to be worth a hand-off, and batches sealed while the worker was behind.
    pub sealed_on_driver: u64,
    /// Chunks allocated for decrypted payloads.
    pub plaintext_chunks: u64,
    /// Used-up chunks used again because nothing held their payloads any more.
    pub plaintext_chunks_reused: u64,
}
