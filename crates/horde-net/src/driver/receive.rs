//! Receiving: datagrams from the sockets into the host (initiations too: the host checks
//! them and makes jobs for the handshake worker), and the kernel filter that keeps datagrams for indices not
//! in use from waking the driver at all.

use super::*;

impl Driver {
    /// Read every socket until it is empty or has given `RECV_BATCH` datagrams, many per
    /// `recvmmsg` and, with GRO, many per buffer.
    pub(super) fn receive_all(&mut self) {
        // Taken out so that the datagrams can be handled while they are borrowed.
        let mut bufs = std::mem::take(&mut self.recv_bufs);
        for i in 0..self.sockets.len() {
            let mut read = 0;
            while read < RECV_BATCH {
                let Some(s) = &self.sockets[i] else { break };
                let mut chunks = bufs.chunks_mut(MAX_DATAGRAM);
                let mut slices: [IoSliceMut<'_>; RECV_SLOTS] = std::array::from_fn(|_| {
                    IoSliceMut::new(chunks.next().expect("RECV_SLOTS chunks"))
                });
                let mut meta = [RecvMeta::default(); RECV_SLOTS];
                let n = match s.try_recv(&mut slices, &mut meta) {
                    Ok(n) => n,
                    // WouldBlock, or e.g. ICMP port unreachable surfaced on a later read.
                    Err(_) => break,
                };
                self.stats.recv_calls += 1;
                let now = self.now();
                for (slot, m) in meta[..n].iter().enumerate() {
                    let data = &bufs[slot * MAX_DATAGRAM..slot * MAX_DATAGRAM + m.len];
                    let stride = m.stride.max(1);
                    if m.len > stride {
                        self.stats.gro_reads += 1;
                    }
                    // An empty datagram has no chunk, but it was received all the same: it
                    // is counted, and dropped with a reason, like any other.
                    let empty: &[&[u8]] = if data.is_empty() { &[&[]] } else { &[] };
                    for d in data.chunks(stride).chain(empty.iter().copied()) {
                        read += 1;
                        self.stats.datagrams_in += 1;
                        self.stats.bytes_in += d.len() as u64;
                        self.on_datagram(i, m.addr, d, now);
                    }
                }
            }
        }
        self.recv_bufs = bufs;
    }

    /// Gives the data sockets' kernel filters the indices in use, when they changed (or a
    /// socket is new). Called before each flush, so that the first datagram sent from a new
    /// index (an initiation, a response) goes out only once its answers can come in.
    pub(super) fn refresh_index_filter(&mut self) {
        let generation = self.host.local_indices_generation();
        if self.filtered_indices.is_some() && self.filtered_generation == generation {
            return;
        }
        self.filtered_generation = generation;
        let mut indices: Vec<u32> = self.host.local_indices().collect();
        indices.sort_unstable();
        if self.filtered_indices.as_ref() == Some(&indices) {
            return;
        }
        for s in self.sockets.iter().flatten() {
            if let Err(e) = s.set_index_filter(&indices) {
                // Without the filter the driver still drops them, one by one.
                tracing::debug!(error = %e, "no kernel filter on a data socket");
            }
        }
        self.filtered_indices = Some(indices);
    }

    /// What the kernel dropped at the data sockets, open and closed.
    pub(super) fn kernel_dropped(&self) -> u64 {
        self.sockets
            .iter()
            .flatten()
            .map(ChannelSocket::kernel_drops)
            .fold(self.kernel_dropped_closed, u64::saturating_add)
    }

    pub(super) fn on_datagram(
        &mut self,
        iface: usize,
        src: SocketAddr,
        data: &[u8],
        now: Duration,
    ) {
        match self.host.handle_datagram(now, iface, src, data) {
            Inbound::Handled => {}
            Inbound::LegacyHandshake => self.handshakes.on_legacy(src, &mut self.stats.dropped),
        }
    }
}
