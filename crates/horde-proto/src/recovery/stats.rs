//! Per-stream recovery counters, both directions.

/// What a stream's recovery layer did. Sender-side counts are of transmissions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryStats {
    /// Data ADUs transmitted (first copies) and their payload bytes.
    pub data_sent: u64,
    /// Payload bytes of `data_sent`.
    pub data_bytes: u64,
    /// Coded ADUs transmitted (XOR or block parity) and their frame bytes.
    pub coded_sent: u64,
    /// Frame bytes of `coded_sent`.
    pub coded_bytes: u64,
    /// Data ADUs sent again after a loss report.
    pub retransmitted: u64,
    /// Data frames that arrived (first copies).
    pub data_received: u64,
    /// Coded frames that arrived.
    pub coded_received: u64,
    /// Data ADUs rebuilt from coded ones.
    pub recovered: u64,
    /// Data frames that arrived after their ADU was already here.
    pub duplicates: u64,
    /// Frames that failed to parse (dropped).
    pub malformed: u64,
    /// ADUs handed to the application in sequence order.
    pub delivered: u64,
    /// ADUs handed over after the reorder cache had given up waiting for them.
    pub delivered_late: u64,
    /// Sequence numbers the reorder cache skipped that never came.
    pub lost: u64,
    /// Path-estimate reports sent to the peer.
    pub reports_sent: u64,
    /// Path-estimate reports received from the peer.
    pub reports_received: u64,
    /// Data ADUs the peer reported lost that no coded ADU had named when the report came.
    pub lost_uncoded: u64,
    /// Data ADUs the peer reported lost that one or more coded ADUs had named.
    pub lost_coded: u64,
    /// Coded ADUs that arrived and expired undecoded with two or more constituents
    /// missing (XOR cannot rebuild two from one).
    pub coded_undecodable: u64,
    /// Data ADUs rebuilt after the reorder cache had given up on them (delivered late).
    pub recovered_late: u64,
    /// Summed over the ADUs rebuilt in time that released held ones: how long the oldest
    /// held ADU had waited for them, in µs (the stall a late rebuild costs the stream).
    pub recovered_stall_us: u64,
    /// Coded ADUs transmitted on each of channels 0-3, by channel id (where the
    /// redundancy went: a coded ADU on a slow path can arrive after the cache gave its
    /// gap up). Channels above 3 are not counted here.
    pub coded_by_channel: [u64; 4],
    /// OEC: data ADUs that some coded ADU named while they were in W, and the sum of
    /// the times from their queueing to the first coded ADU made over them, in µs.
    pub first_covered: u64,
    /// See `first_covered`.
    pub first_cover_wait_us: u64,
}

impl RecoveryStats {
    /// Add `other`'s counts to these (a stream's counts over several sessions).
    pub fn add(&mut self, other: &RecoveryStats) {
        let RecoveryStats {
            data_sent,
            data_bytes,
            coded_sent,
            coded_bytes,
            retransmitted,
            data_received,
            coded_received,
            recovered,
            duplicates,
            malformed,
            delivered,
            delivered_late,
            lost,
            reports_sent,
            reports_received,
            lost_uncoded,
            lost_coded,
            coded_undecodable,
            recovered_late,
            recovered_stall_us,
            coded_by_channel,
            first_covered,
            first_cover_wait_us,
        } = other;
        self.data_sent += data_sent;
        self.data_bytes += data_bytes;
        self.coded_sent += coded_sent;
        self.coded_bytes += coded_bytes;
        self.retransmitted += retransmitted;
        self.data_received += data_received;
        self.coded_received += coded_received;
        self.recovered += recovered;
        self.duplicates += duplicates;
        self.malformed += malformed;
        self.delivered += delivered;
        self.delivered_late += delivered_late;
        self.lost += lost;
        self.reports_sent += reports_sent;
        self.reports_received += reports_received;
        self.lost_uncoded += lost_uncoded;
        self.lost_coded += lost_coded;
        self.coded_undecodable += coded_undecodable;
        self.recovered_late += recovered_late;
        self.recovered_stall_us += recovered_stall_us;
        for (a, b) in self.coded_by_channel.iter_mut().zip(coded_by_channel) {
            *a += b;
        }
        self.first_covered += first_covered;
        self.first_cover_wait_us += first_cover_wait_us;
    }

    /// Coded bytes sent per data byte sent.
    pub fn coding_overhead(&self) -> f64 {
        if self.data_bytes == 0 {
            0.0
        } else {
            self.coded_bytes as f64 / self.data_bytes as f64
        }
    }

    /// Coded ADUs among all ADUs sent (the paper's Fig. 11 "coded fraction").
    pub fn coded_fraction(&self) -> f64 {
        let all = self.data_sent + self.coded_sent + self.retransmitted;
        if all == 0 {
            0.0
        } else {
            self.coded_sent as f64 / all as f64
        }
    }
}
