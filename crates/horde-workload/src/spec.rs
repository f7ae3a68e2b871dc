//! The serde description of a source, as written in scenario files, and its validation.

use horde_config::Checks;
use horde_proto::StreamConfig;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::bulk::Bulk;
use super::ekg::Ekg;
use super::periodic::ConstantFrames;
use super::video::{type_index, Video};
use super::Workload;

/// I:P:B mean-size ratios used when a video spec gives `kbps` without `ratios`. Typical
/// of low-rate H.264 at a fixed quantiser: an I frame costs about three P frames, a B
/// frame about a third of a P frame.
pub const DEFAULT_RATIOS: FrameSizes = FrameSizes {
    i: 9.0,
    p: 3.0,
    b: 1.0,
};

/// Shortest frame interval accepted: 1 µs. Anything faster is a typo, and would make a
/// simulation spend its time generating frames.
const MIN_PERIOD_NS: f64 = 1e3;

/// A value per video frame type, written `{ I = 9, P = 3, B = 1 }`. Types the GoP does
/// not use may be left out.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameSizes {
    #[serde(rename = "I", default)]
    pub i: f64,
    #[serde(rename = "P", default)]
    pub p: f64,
    #[serde(rename = "B", default)]
    pub b: f64,
}

impl FrameSizes {
    fn get(&self, t: u8) -> f64 {
        [self.i, self.p, self.b][type_index(t)]
    }
}

/// One stream's source, e.g. `{ kind = "cbr", kbps = 80, adu_bytes = 768 }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum WorkloadSpec {
    /// Constant bit rate: one `adu_bytes` frame every `adu_bytes * 8 / kbps` ms.
    Cbr { kbps: f64, adu_bytes: u32 },
    /// Video at `fps` frames per second; frame `k` has type `gop[k % gop.len()]`. Frames go
    /// out in the order the GoP string lists them. Sizes come from either `frame_bytes`
    /// (mean bytes per type) or `kbps` with `ratios` (default [`DEFAULT_RATIOS`]).
    /// `jitter` is the coefficient of variation of frame sizes (log-normal), default 0.
    Video {
        fps: f64,
        gop: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        kbps: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ratios: Option<FrameSizes>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        frame_bytes: Option<FrameSizes>,
        #[serde(default)]
        jitter: f64,
    },
    /// A speech codec: one `frame_bytes` frame every `frame_ms` (default 20 ms, 160 B,
    /// i.e. G.711 at 64 kbit/s).
    Audio {
        #[serde(default = "default_audio_ms")]
        frame_ms: f64,
        #[serde(default = "default_audio_bytes")]
        frame_bytes: u32,
    },
    /// Telemetry: `sample_hz` samples of `bytes_per_sample` each, sent every `batch_ms`.
    Ekg {
        sample_hz: f64,
        bytes_per_sample: u32,
        batch_ms: f64,
    },
    /// Always backlogged: each top-up appends `batch` (default 1) frames of `adu_bytes`.
    Bulk {
        adu_bytes: u32,
        #[serde(default = "default_batch")]
        batch: u32,
    },
}

fn default_audio_ms() -> f64 {
    20.0
}
fn default_audio_bytes() -> u32 {
    160
}
fn default_batch() -> u32 {
    1
}

/// The most a source hands over at once ([`WorkloadSpec::largest_burst`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Burst {
    /// The spec's key that sets it, e.g. `adu_bytes`.
    pub key: &'static str,
    /// What it is, plural: `frames`, `I-frames`, `batches`...
    pub what: &'static str,
    pub bytes: f64,
}

/// Why a workload spec cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WorkloadError(pub String);

fn bad<T>(msg: String) -> Result<T, WorkloadError> {
    Err(WorkloadError(msg))
}

fn positive(kind: &str, name: &str, v: f64) -> Result<(), WorkloadError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        bad(format!(
            "{kind}: `{name}` must be a positive number, got {}",
            horde_config::shown(v)
        ))
    }
}

fn nonzero(kind: &str, name: &str, v: u32) -> Result<(), WorkloadError> {
    if v > 0 {
        Ok(())
    } else {
        bad(format!("{kind}: `{name}` must be at least 1"))
    }
}

fn period_ok(kind: &str, period_ns: f64) -> Result<(), WorkloadError> {
    if period_ns >= MIN_PERIOD_NS {
        Ok(())
    } else {
        bad(format!(
            "{kind}: frame interval {:.3} µs is shorter than 1 µs",
            period_ns / 1e3
        ))
    }
}

impl WorkloadSpec {
    /// The `kind` as written in a scenario file.
    pub fn kind(&self) -> &'static str {
        match self {
            WorkloadSpec::Cbr { .. } => "cbr",
            WorkloadSpec::Video { .. } => "video",
            WorkloadSpec::Audio { .. } => "audio",
            WorkloadSpec::Ekg { .. } => "ekg",
            WorkloadSpec::Bulk { .. } => "bulk",
        }
    }

    /// Check every parameter; [`WorkloadSpec::build`] calls this too.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let kind = self.kind();
        match self {
            WorkloadSpec::Cbr { kbps, adu_bytes } => {
                positive(kind, "kbps", *kbps)?;
                nonzero(kind, "adu_bytes", *adu_bytes)?;
                period_ok(kind, f64::from(*adu_bytes) * 8e6 / kbps)
            }
            WorkloadSpec::Video { fps, .. } => {
                positive(kind, "fps", *fps)?;
                period_ok(kind, 1e9 / fps)?;
                self.video_means().map(|_| ())
            }
            WorkloadSpec::Audio {
                frame_ms,
                frame_bytes,
            } => {
                positive(kind, "frame_ms", *frame_ms)?;
                nonzero(kind, "frame_bytes", *frame_bytes)?;
                period_ok(kind, frame_ms * 1e6)
            }
            WorkloadSpec::Ekg {
                sample_hz,
                bytes_per_sample,
                batch_ms,
            } => {
                positive(kind, "sample_hz", *sample_hz)?;
                nonzero(kind, "bytes_per_sample", *bytes_per_sample)?;
                positive(kind, "batch_ms", *batch_ms)?;
                period_ok(kind, batch_ms * 1e6)
            }
            WorkloadSpec::Bulk { adu_bytes, batch } => {
                nonzero(kind, "adu_bytes", *adu_bytes)?;
                nonzero(kind, "batch", *batch)
            }
        }
    }

    /// Mean frame bytes for I, P and B of a video spec, after validating its sizing.
    fn video_means(&self) -> Result<[f64; 3], WorkloadError> {
        let WorkloadSpec::Video {
            fps,
            gop,
            kbps,
            ratios,
            frame_bytes,
            jitter,
        } = self
        else {
            return bad("not a video workload".into());
        };
        if gop.is_empty() {
            return bad("video: `gop` must not be empty".into());
        }
        if let Some(c) = gop.chars().find(|c| !matches!(c, 'I' | 'P' | 'B')) {
            return bad(format!(
                "video: `gop` may contain only I, P and B, found {c:?} in {gop:?}"
            ));
        }
        if !(jitter.is_finite() && (0.0..=4.0).contains(jitter)) {
            return bad(format!(
                "video: `jitter` must be in [0, 4], got {}",
                horde_config::shown(*jitter)
            ));
        }
        let sizes = match (kbps, frame_bytes) {
            (Some(_), Some(_)) => {
                return bad("video: give either `kbps` or `frame_bytes`, not both".into())
            }
            (None, None) => return bad("video: give `kbps` or `frame_bytes`".into()),
            (None, Some(fb)) => {
                if ratios.is_some() {
                    return bad("video: `ratios` only applies with `kbps`".into());
                }
                *fb
            }
            (Some(kbps), None) => {
                positive("video", "kbps", *kbps)?;
                ratios.unwrap_or(DEFAULT_RATIOS)
            }
        };
        for t in gop.bytes() {
            let v = sizes.get(t);
            if !(v.is_finite() && v > 0.0) {
                let what = if kbps.is_some() {
                    "ratios"
                } else {
                    "frame_bytes"
                };
                return bad(format!(
                    "video: `{what}.{}` must be positive because the GoP uses {} frames, got {}",
                    t as char,
                    t as char,
                    horde_config::shown(v)
                ));
            }
        }
        let mean = [sizes.i, sizes.p, sizes.b];
        Ok(match kbps {
            None => mean,
            Some(kbps) => {
                // Bytes one GoP must carry at `kbps`, shared out in proportion to the ratios.
                let gop_bytes = kbps * 1000.0 / 8.0 * gop.len() as f64 / fps;
                let units: f64 = gop.bytes().map(|t| sizes.get(t)).sum();
                mean.map(|r| r * gop_bytes / units)
            }
        })
    }

    /// The most bytes the source hands over at once, before they are split into ADUs:
    /// its frame (a video's largest mean frame, around which `jitter` varies the sizes),
    /// an EKG batch, or a bulk top-up of `batch` frames. `None` for an invalid spec.
    pub fn largest_burst(&self) -> Option<Burst> {
        self.validate().ok()?;
        let burst = |key, what, bytes| Burst { key, what, bytes };
        Some(match self {
            WorkloadSpec::Cbr { adu_bytes, .. } => {
                burst("adu_bytes", "frames", f64::from(*adu_bytes))
            }
            WorkloadSpec::Audio { frame_bytes, .. } => {
                burst("frame_bytes", "frames", f64::from(*frame_bytes))
            }
            WorkloadSpec::Video { gop, kbps, .. } => {
                let mean = self.video_means().ok()?;
                let t = gop
                    .bytes()
                    .max_by(|a, b| mean[type_index(*a)].total_cmp(&mean[type_index(*b)]))?;
                let key = if kbps.is_some() {
                    "kbps"
                } else {
                    "frame_bytes"
                };
                let what = ["I-frames", "P-frames", "B-frames"][type_index(t)];
                burst(key, what, mean[type_index(t)].ceil())
            }
            WorkloadSpec::Ekg {
                sample_hz,
                bytes_per_sample,
                batch_ms,
            } => {
                let samples = (sample_hz * batch_ms / 1000.0).ceil();
                burst(
                    "batch_ms",
                    "batches",
                    samples * f64::from(*bytes_per_sample),
                )
            }
            WorkloadSpec::Bulk { adu_bytes, batch } => {
                let frame = f64::from(*adu_bytes);
                if *batch == 1 {
                    burst("adu_bytes", "frames", frame)
                } else {
                    let bytes = frame * f64::from(*batch);
                    burst("batch", "top-ups (`batch` frames of `adu_bytes`)", bytes)
                }
            }
        })
    }

    /// The long-run offered load in kbit/s (1 kbit = 1000 bits), or `None` for bulk.
    pub fn mean_kbps(&self) -> Option<f64> {
        match self {
            WorkloadSpec::Cbr { kbps, .. } => Some(*kbps),
            WorkloadSpec::Video { fps, gop, .. } => {
                let mean = self.video_means().ok()?;
                let bytes: f64 = gop.bytes().map(|t| mean[type_index(t)]).sum();
                Some(bytes * 8.0 * fps / gop.len() as f64 / 1000.0)
            }
            WorkloadSpec::Audio {
                frame_ms,
                frame_bytes,
            } => Some(f64::from(*frame_bytes) * 8.0 / frame_ms),
            WorkloadSpec::Ekg {
                sample_hz,
                bytes_per_sample,
                ..
            } => Some(sample_hz * f64::from(*bytes_per_sample) * 8.0 / 1000.0),
            WorkloadSpec::Bulk { .. } => None,
        }
    }

    /// A source for one stream. `seed` should differ per stream (see
    /// [`super::stream_seed`]); `max_adu` is the largest ADU the stream may insert.
    pub fn build(&self, seed: u64, max_adu: u32) -> Result<Box<dyn Workload>, WorkloadError> {
        self.validate()?;
        if max_adu == 0 {
            return bad("max_adu must be at least 1".into());
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Ok(match self {
            WorkloadSpec::Cbr { kbps, adu_bytes } => Box::new(ConstantFrames::new(
                "cbr",
                f64::from(*adu_bytes) * 8e6 / kbps,
                *adu_bytes,
                max_adu,
                &mut rng,
            )),
            WorkloadSpec::Video {
                fps, gop, jitter, ..
            } => {
                let mean = self.video_means()?;
                Box::new(Video::new(*fps, gop, mean, *jitter, max_adu, rng))
            }
            WorkloadSpec::Audio {
                frame_ms,
                frame_bytes,
            } => Box::new(ConstantFrames::new(
                "audio",
                frame_ms * 1e6,
                *frame_bytes,
                max_adu,
                &mut rng,
            )),
            WorkloadSpec::Ekg {
                sample_hz,
                bytes_per_sample,
                batch_ms,
            } => Box::new(Ekg::new(
                *sample_hz,
                *bytes_per_sample,
                *batch_ms,
                max_adu,
                &mut rng,
            )),
            WorkloadSpec::Bulk { adu_bytes, batch } => {
                Box::new(Bulk::new(*adu_bytes, *batch, max_adu))
            }
        })
    }
}

/// The most a stream's workload hands over at once must fit in the stream's send queue
/// (`StreamConfig::max_queue_bytes`, which send and scenario files leave at its default): the
/// queue drops its oldest ADUs past its limit, so a larger frame would lose its first
/// ADUs to make room for its last, every time.
pub fn burst_fits_the_queue(c: &mut Checks, at: &str, workload: &WorkloadSpec) {
    let limit = StreamConfig::default().max_queue_bytes;
    let Some(b) = workload.largest_burst() else {
        return;
    };
    if b.bytes > limit as f64 {
        c.error(
            format!("{at}.{}", b.key),
            format!(
                "{} makes {} of {} bytes, more than a stream's send queue holds ({limit} \
                 bytes): each would lose its first ADUs to make room for its last",
                b.key, b.what, b.bytes
            ),
        );
    }
}
