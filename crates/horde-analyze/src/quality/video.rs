//! Video: the playable frame rate (seed §2.5, §6.1.3).

use super::QualityError;

/// A video frame's coding type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// Intra-coded: decodable alone.
    I,
    /// Predicted from the previous I or P frame.
    P,
    /// Bidirectional: predicted from the previous and the next I or P frame.
    B,
}

/// One frame of a stream, in display order, as the receiver saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VideoFrame {
    /// Its coding type.
    pub kind: FrameKind,
    /// Packets needed to rebuild it: its data packets. With FEC the sender adds repair
    /// packets, and any `needed` of the packets sent rebuild the frame.
    pub needed: u32,
    /// Packets of the frame (data or repair) that arrived in time to be played.
    pub arrived: u32,
}

impl VideoFrame {
    fn received(&self) -> bool {
        self.arrived >= self.needed
    }
}

/// Which frames can be played. An I frame is playable when it was received; a P frame
/// when it was received and the previous I or P frame is playable; a B frame when it was
/// received and both the previous and the next I or P frame are playable (the frames it
/// is predicted from). A P or B frame without such a reference in the stream is not
/// playable.
pub fn playable(frames: &[VideoFrame]) -> Vec<bool> {
    let mut ok = vec![false; frames.len()];
    // Anchors (I, P) first, in order: each depends only on the anchor before it.
    let mut last_anchor: Option<bool> = None;
    for (i, f) in frames.iter().enumerate() {
        let good = match f.kind {
            FrameKind::I => f.received(),
            FrameKind::P => f.received() && last_anchor == Some(true),
            FrameKind::B => continue,
        };
        ok[i] = good;
        last_anchor = Some(good);
    }
    // Then B frames, from the anchors on either side.
    let mut prev: Option<bool> = None;
    let mut pending: Vec<usize> = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        if f.kind == FrameKind::B {
            pending.push(i);
            continue;
        }
        for &b in &pending {
            ok[b] = frames[b].received() && prev == Some(true) && ok[i];
        }
        pending.clear();
        prev = Some(ok[i]);
    }
    ok
}

/// Playable frames per second: the playable frames divided by the stream's duration,
/// `frames.len() / fps` seconds. Ranges from 0 to `fps`.
pub fn playable_frame_rate(frames: &[VideoFrame], fps: f64) -> Result<f64, QualityError> {
    if !(fps.is_finite() && fps > 0.0) {
        return Err(super::invalid("fps", "a finite rate > 0", fps));
    }
    if frames.is_empty() {
        return Err(QualityError::Empty {
            metric: "playable frame rate",
            what: "no frames were sent",
        });
    }
    let n = playable(frames).iter().filter(|&&p| p).count();
    Ok(n as f64 * fps / frames.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames from a GoP pattern, each one packet; `lost` lists frames that did not arrive.
    fn stream(pattern: &str, lost: &[usize]) -> Vec<VideoFrame> {
        pattern
            .bytes()
            .enumerate()
            .map(|(i, c)| VideoFrame {
                kind: match c {
                    b'I' => FrameKind::I,
                    b'P' => FrameKind::P,
                    _ => FrameKind::B,
                },
                needed: 1,
                arrived: u32::from(!lost.contains(&i)),
            })
            .collect()
    }

    fn shown(frames: &[VideoFrame]) -> String {
        playable(frames)
            .iter()
            .map(|&p| if p { '1' } else { '0' })
            .collect()
    }

    #[test]
    fn dependencies() {
        // Everything arrives: all playable, except the trailing B frames, whose next
        // anchor (the next GoP's I frame) is not in the stream.
        let s = "IBBBPBBBPBBBPBBBI";
        assert_eq!(shown(&stream(s, &[])), "11111111111111111");
        assert_eq!(shown(&stream("IBBBP", &[])), "11111");
        assert_eq!(shown(&stream("IBBBPBB", &[])), "1111100");
        // The second P (frame 8) is lost: it, the P frame after it, and every B frame
        // that references either (5-7 and 9-15) are unplayable; I 0, B 1-3 and P 4 play,
        // and so does the next GoP's I frame.
        assert_eq!(shown(&stream(s, &[8])), "11111000000000001");
        // Lose B 2 only: just that frame.
        assert_eq!(shown(&stream(s, &[2])), "11011111111111111");
        // Lose the I frame: nothing before the next I plays; the next I does.
        assert_eq!(shown(&stream(s, &[0])), "00000000000000001");
    }

    #[test]
    fn the_rate() {
        // 16 frames at 30 fps last 16/30 s. Losing P 8 leaves frames 0-4 playable
        // (I, B, B, B, P): 5 * 30 / 16 = 9.375 fps.
        let f = stream("IBBBPBBBPBBBPBBB", &[8]);
        assert_eq!(playable_frame_rate(&f, 30.0).unwrap(), 9.375);
    }

    #[test]
    fn fec_repairs_what_it_covers() {
        // A frame of 5 data packets with 1 repair packet survives one loss, not two.
        let mut f = vec![VideoFrame {
            kind: FrameKind::I,
            needed: 5,
            arrived: 5,
        }];
        assert_eq!(playable_frame_rate(&f, 30.0).unwrap(), 30.0);
        f[0].arrived = 4;
        assert_eq!(playable_frame_rate(&f, 30.0).unwrap(), 0.0);
    }

    #[test]
    fn edge_cases() {
        assert!(matches!(
            playable_frame_rate(&[], 30.0),
            Err(QualityError::Empty { .. })
        ));
        // Total loss: 0 fps.
        let all = (0..16).collect::<Vec<_>>();
        assert_eq!(
            playable_frame_rate(&stream("IBBBPBBBPBBBPBBB", &all), 30.0).unwrap(),
            0.0
        );
        // A stream that starts with B or P frames has no reference for them.
        assert_eq!(shown(&stream("BPI", &[])), "001");
        assert!(playable_frame_rate(&stream("I", &[]), 0.0).is_err());
        assert!(playable_frame_rate(&stream("I", &[]), f64::NAN).is_err());
    }
}
