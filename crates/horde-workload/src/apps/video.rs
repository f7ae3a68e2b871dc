//! Video: frames of an I/P/B group of pictures at a fixed frame rate, each split into
//! packets, with optional forward error correction (seed §6.1.3).

use std::collections::VecDeque;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use super::{AppPacket, Direction};
use crate::clock::Clock;
use crate::WorkloadError;

/// A frame's coding type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameType {
    /// Intra-coded.
    I,
    /// Predicted from the previous I or P frame.
    P,
    /// Predicted from the previous and the next I or P frame.
    B,
}

/// Forward error correction added to frames (seed §6.1.3). Repair packets are as large
/// as the frame's largest data packet, and any `needed` packets of a frame rebuild it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fec {
    /// None: losing any packet loses the frame.
    None,
    /// One full repair packet on every I frame.
    Small,
    /// Repair packets worth 15% of every frame's bytes, rounded to the nearest whole
    /// packet.
    Large,
}

/// The frame a video packet belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VideoFrameInfo {
    /// The frame's number in display order, from 0.
    pub frame: u64,
    /// Its type.
    pub kind: FrameType,
    /// This packet's index within the frame, from 0; data packets come first.
    pub index: u32,
    /// Packets sent for the frame, data and repair.
    pub count: u32,
    /// Packets needed to rebuild it (its data packets).
    pub needed: u32,
}

/// A video stream's shape.
#[derive(Debug, Clone, PartialEq)]
pub struct VideoParams {
    /// Frames per second.
    pub fps: f64,
    /// Frame types in display order, one group of pictures, repeated; starts with `I`.
    pub gop: String,
    /// Mean frame bytes for I, P and B frames.
    pub mean_bytes: [f64; 3],
    /// Coefficient of variation of frame sizes (log-normal); 0 for constant sizes.
    pub cv: f64,
    /// Largest frame; larger draws are drawn again (a truncated distribution).
    pub max_frame_bytes: u32,
    /// Largest packet payload.
    pub packet_bytes: u32,
    /// Forward error correction.
    pub fec: Fec,
}

impl Default for VideoParams {
    /// The dissertation's stream: CIF at 30 fps, GoP of 16 with 3 B frames between
    /// anchors (G16B3, seed §6.1.3), frames no larger than the trace's largest, 50,427 B
    /// (seed §5.4), 1500 B packets, no FEC. The trace's per-type sizes are not in the
    /// text; the means here (I 32,000 B, P 16,000 B, B 6,500 B, spread 0.3) give
    /// 2.37 Mbit/s, just above the 2.33 Mbit/s fair share that the trace mostly exceeds
    /// in seed §6.9.
    fn default() -> Self {
        VideoParams {
            fps: 30.0,
            gop: "IBBBPBBBPBBBPBBB".to_string(),
            mean_bytes: [32_000.0, 16_000.0, 6_500.0],
            cv: 0.3,
            max_frame_bytes: 50_427,
            packet_bytes: 1500,
            fec: Fec::None,
        }
    }
}

impl VideoParams {
    fn validate(&self) -> Result<Vec<FrameType>, WorkloadError> {
        let bad = |m: String| Err(WorkloadError(format!("video app: {m}")));
        if !(self.fps.is_finite() && self.fps > 0.0 && self.fps <= 1e6) {
            return bad(format!("`fps` must be in (0, 1e6], got {}", self.fps));
        }
        let gop: Option<Vec<FrameType>> = self
            .gop
            .chars()
            .map(|c| match c {
                'I' => Some(FrameType::I),
                'P' => Some(FrameType::P),
                'B' => Some(FrameType::B),
                _ => None,
            })
            .collect();
        let gop = match gop {
            Some(g) if g.first() == Some(&FrameType::I) => g,
            _ => {
                return bad(format!(
                    "`gop` must be I, P and B letters starting with I, got {:?}",
                    self.gop
                ))
            }
        };
        for (name, m) in ["I", "P", "B"].iter().zip(self.mean_bytes) {
            let used = gop.iter().any(|t| type_name(*t) == *name);
            if used && !(m.is_finite() && m >= 1.0) {
                return bad(format!("mean {name} frame bytes must be >= 1, got {m}"));
            }
        }
        if !(self.cv.is_finite() && self.cv >= 0.0) {
            return bad(format!("`cv` must be >= 0, got {}", self.cv));
        }
        if self.packet_bytes == 0 || self.max_frame_bytes == 0 {
            return bad("`packet_bytes` and `max_frame_bytes` must be at least 1".into());
        }
        Ok(gop)
    }
}

fn type_name(t: FrameType) -> &'static str {
    match t {
        FrameType::I => "I",
        FrameType::P => "P",
        FrameType::B => "B",
    }
}

fn type_index(t: FrameType) -> usize {
    match t {
        FrameType::I => 0,
        FrameType::P => 1,
        FrameType::B => 2,
    }
}

/// The video generator. Every packet of a frame is sent at the frame's time, so an I
/// frame is a burst, as the dissertation's bursts analysis assumes (seed §5.4).
#[derive(Debug, Clone)]
pub struct VideoSource {
    params: VideoParams,
    gop: Vec<FrameType>,
    sigma: f64,
    clock: Clock,
    rng: ChaCha8Rng,
    pending: VecDeque<AppPacket>,
    seq: u64,
}

impl VideoSource {
    /// A stream with the given shape and seed.
    pub fn new(params: VideoParams, seed: u64) -> Result<VideoSource, WorkloadError> {
        let gop = params.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Ok(VideoSource {
            sigma: (1.0 + params.cv * params.cv).ln().sqrt(),
            clock: Clock::new(1e9 / params.fps, &mut rng),
            gop,
            params,
            rng,
            pending: VecDeque::new(),
            seq: 0,
        })
    }

    /// Log-normal with the configured mean and spread, drawn again above the maximum
    /// (after 64 draws, cut to the maximum).
    fn frame_bytes(&mut self, t: FrameType) -> u32 {
        let mean = self.params.mean_bytes[type_index(t)];
        let max = f64::from(self.params.max_frame_bytes);
        if self.sigma == 0.0 {
            return mean.round().clamp(1.0, max) as u32;
        }
        let mut x = max;
        for _ in 0..64 {
            let z: f64 = StandardNormal.sample(&mut self.rng);
            let draw = mean * (self.sigma * z - self.sigma * self.sigma / 2.0).exp();
            if draw <= max {
                x = draw;
                break;
            }
        }
        x.round().clamp(1.0, max) as u32
    }

    fn queue_next_frame(&mut self) {
        let k = self.clock.index();
        let kind = self.gop[(k % self.gop.len() as u64) as usize];
        let bytes = self.frame_bytes(kind);
        let at = self.clock.next();
        self.clock.advance();
        let pkt = self.params.packet_bytes;
        let needed = bytes.div_ceil(pkt);
        let repair = match (self.params.fec, kind) {
            (Fec::Small, FrameType::I) => 1,
            (Fec::Large, _) => (0.15 * f64::from(bytes) / f64::from(pkt)).round() as u32,
            _ => 0,
        };
        let count = needed + repair;
        for index in 0..count {
            let size = if index + 1 < needed {
                pkt
            } else if index + 1 == needed {
                bytes - pkt * (needed - 1)
            } else {
                bytes.min(pkt)
            };
            self.pending.push_back(AppPacket {
                at,
                size,
                direction: Direction::Down,
                seq: self.seq,
                frame: Some(VideoFrameInfo {
                    frame: k,
                    kind,
                    index,
                    count,
                    needed,
                }),
            });
            self.seq += 1;
        }
    }
}

impl Iterator for VideoSource {
    type Item = AppPacket;

    fn next(&mut self) -> Option<AppPacket> {
        while self.pending.is_empty() {
            self.queue_next_frame();
        }
        self.pending.pop_front()
    }
}
