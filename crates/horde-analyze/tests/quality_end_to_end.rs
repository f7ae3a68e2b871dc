//! The application traffic, sent through an access point's drop-tail FIFO onto the
//! 802.11 airtime model, scored with the quality metrics: the three pieces fit, and the
//! scores move the way the CHAP dissertation describes (§1.1, §6.7.1).

use std::collections::VecDeque;
use std::time::Duration;

use horde_analyze::quality::{
    game_mos, playable_frame_rate, voip_mos, FrameKind, VideoFrame, G_MODEL_MAX,
};
use horde_links::wifi::{Channel, Phy, Shadowing, Transmitter};
use horde_workload::apps::{game, voip, AppPacket, Direction, FrameType, VideoParams, VideoSource};

const RUN: Duration = Duration::from_secs(20);
/// One-way wired latency from the servers to the access point (seed §6.5: 1 ms).
const WIRED: Duration = Duration::from_millis(1);
/// Access point queue, packets (seed §6.5).
const QUEUE: usize = 35;

#[derive(Clone, Copy, PartialEq)]
enum App {
    Game,
    Voip,
    Video,
    Flood,
}

struct Offered {
    app: App,
    pkt: AppPacket,
}

/// Serve the downstream packets in arrival order through a FIFO of `QUEUE` packets, one
/// frame on the air at a time; returns each packet's delivery time (`None`: dropped at
/// the queue or lost on the air).
fn access_point(offered: &[Offered], channel_of: impl Fn(App) -> Channel) -> Vec<Option<Duration>> {
    let mut tx = Transmitter::new(Phy::dot11g(54.0), 11).unwrap();
    let mut out = vec![None; offered.len()];
    let mut queue: VecDeque<usize> = VecDeque::new();
    let mut free_at = Duration::ZERO;
    let mut serve_until = |t: Duration,
                           queue: &mut VecDeque<usize>,
                           free_at: &mut Duration,
                           out: &mut Vec<Option<Duration>>| {
        while *free_at <= t {
            let Some(i) = queue.pop_front() else { break };
            let arrival = offered[i].pkt.at + WIRED;
            let start = (*free_at).max(arrival);
            let sent = tx.send(offered[i].pkt.size, &channel_of(offered[i].app));
            *free_at = start + sent.airtime;
            if sent.delivered {
                out[i] = Some(*free_at);
            }
        }
    };
    for (i, o) in offered.iter().enumerate() {
        let arrival = o.pkt.at + WIRED;
        serve_until(arrival, &mut queue, &mut free_at, &mut out);
        if queue.len() < QUEUE {
            queue.push_back(i);
        }
    }
    serve_until(Duration::MAX, &mut queue, &mut free_at, &mut out);
    out
}

struct Scores {
    game: f64,
    voip: f64,
    video_fps: f64,
}

fn run(video_metres: f64, flood: bool) -> Scores {
    let mut offered: Vec<Offered> = Vec::new();
    let mut up_game = Vec::new();
    let mut up_voip = Vec::new();
    for (app, src) in [(App::Game, game(1)), (App::Voip, voip(2))] {
        for pkt in src.take_while(|p| p.at < RUN) {
            match pkt.direction {
                Direction::Down => offered.push(Offered { app, pkt }),
                // Upstream is not queued at the access point (seed §1.2): the wired hop
                // and one clean attempt on the air.
                Direction::Up => {
                    let owd = WIRED + Phy::dot11g(54.0).attempt_time(pkt.size);
                    let ms = Some(owd.as_secs_f64() * 1e3);
                    if app == App::Game {
                        up_game.push(ms)
                    } else {
                        up_voip.push(ms)
                    }
                }
            }
        }
    }
    let video = VideoSource::new(VideoParams::default(), 3).unwrap();
    for pkt in video.take_while(|p| p.at < RUN) {
        offered.push(Offered {
            app: App::Video,
            pkt,
        });
    }
    if flood {
        // A sender far above the channel's ~35 Mbit/s: 1500 B every 200 µs, 60 Mbit/s.
        let mut t = Duration::ZERO;
        let mut seq = 0;
        while t < RUN {
            let pkt = AppPacket {
                at: t,
                size: 1500,
                direction: Direction::Down,
                seq,
                frame: None,
            };
            offered.push(Offered {
                app: App::Flood,
                pkt,
            });
            t += Duration::from_micros(200);
            seq += 1;
        }
    }
    offered.sort_by_key(|o| o.pkt.at);

    let far = Channel::at_distance(video_metres, &Shadowing::dissertation()).unwrap();
    let near = Channel::at_distance(1.0, &Shadowing::dissertation()).unwrap();
    let delivered = access_point(&offered, |app| if app == App::Video { far } else { near });

    let owd = |app: App| -> Vec<Option<f64>> {
        offered
            .iter()
            .zip(&delivered)
            .filter(|(o, _)| o.app == app)
            .map(|(o, d)| d.map(|t| (t - o.pkt.at).as_secs_f64() * 1e3))
            .collect()
    };

    // Frames from their packets: received packets per frame, in display order.
    let mut frames: Vec<VideoFrame> = Vec::new();
    for (o, d) in offered
        .iter()
        .zip(&delivered)
        .filter(|(o, _)| o.app == App::Video)
    {
        let f = o.pkt.frame.unwrap();
        if frames.len() as u64 == f.frame {
            frames.push(VideoFrame {
                kind: match f.kind {
                    FrameType::I => FrameKind::I,
                    FrameType::P => FrameKind::P,
                    FrameType::B => FrameKind::B,
                },
                needed: f.needed,
                arrived: 0,
            });
        }
        // Played 100 ms after it was sent, or not at all.
        if d.is_some_and(|t| t - o.pkt.at <= Duration::from_millis(100)) {
            frames[f.frame as usize].arrived += 1;
        }
    }

    let s = Scores {
        game: game_mos(&owd(App::Game), &up_game).unwrap(),
        voip: voip_mos(&owd(App::Voip), 0.0).unwrap(),
        video_fps: playable_frame_rate(&frames, 30.0).unwrap(),
    };
    eprintln!(
        "video at {video_metres} m, flood {flood}: game {:.3}, voip {:.3}, video {:.2} fps",
        s.game, s.voip, s.video_fps
    );
    s
}

#[test]
fn a_clean_channel_scores_near_the_top() {
    let s = run(1.0, false);
    // Delays of a few ms: X under 2, G above 4.2; VoIP near E(94) = 4.42; every video
    // frame but the trailing B frames plays.
    assert!(s.game > 4.2 && s.game <= G_MODEL_MAX, "game {}", s.game);
    assert!(s.voip > 4.40, "voip {}", s.voip);
    assert!(s.video_fps > 29.5, "video {}", s.video_fps);
}

#[test]
fn a_flood_through_fifo_hurts_every_application() {
    let clean = run(1.0, false);
    let flooded = run(1.0, true);
    // A queue that stays full adds delay but little G-model jitter (mean minus
    // minimum), so the game loses less than the others.
    assert!(
        flooded.game < clean.game - 0.1,
        "game {} vs {}",
        flooded.game,
        clean.game
    );
    assert!(
        flooded.voip < clean.voip - 0.5,
        "voip {} vs {}",
        flooded.voip,
        clean.voip
    );
    assert!(flooded.video_fps < 5.0, "video {}", flooded.video_fps);
}

#[test]
fn a_far_video_receiver_loses_its_frames_and_slows_the_others() {
    // At 20 m FER is about 0.79: an attempt succeeds with probability 0.044, so most
    // video packets take all 7 attempts and their backoffs, and most frames are lost.
    let clean = run(1.0, false);
    let far = run(20.0, false);
    assert!(far.video_fps < 3.0, "video {}", far.video_fps);
    // In one FIFO the costly frames hold the channel for everyone (seed §1.1): the
    // queue fills with them, and the game's and the call's delays grow with it.
    assert!(
        far.game < clean.game - 1.0,
        "game {} vs {}",
        far.game,
        clean.game
    );
    assert!(
        far.voip < clean.voip - 1.0,
        "voip {} vs {}",
        far.voip,
        clean.voip
    );
}
