//! The demo's verdicts: does each objective beat the run without objectives on its own
//! metric, and does no stream pay for it with more than 1.5x its loss? Per seed, and
//! over seeds as wins (and ties) and the spread of the differences. Beside them, what the
//! objectives cost: every stream's latency and goodput with and without them.

use std::collections::BTreeMap;

use serde::Serialize;

/// One stream's (or one class of ADUs') results in one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    pub sent: u64,
    pub acked: u64,
    pub lost: u64,
    /// Lost (or dropped) over resolved, in [0, 1].
    pub loss_rate: f64,
    pub mean_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub goodput_kbps: Option<f64>,
    /// ADUs acked (real time) or transmissions (simulator) per channel name.
    pub channels: BTreeMap<String, u64>,
    /// What became of the ADUs that were not acked in time (real time only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub losses: Option<Losses>,
}

/// Why ADUs were counted lost in a real-time run, from the sender's acks and nacks.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Losses {
    /// Declared lost (by gap or timeout), per channel name.
    pub declared_by_channel: BTreeMap<String, u64>,
    /// Of those, acknowledged later after all (the loss was spurious), per channel name.
    pub late_acked_by_channel: BTreeMap<String, u64>,
    /// Dropped from the stream's send queue (overflow) before being sent.
    pub dropped: u64,
    /// Queued or in flight when the session closed.
    pub abandoned: u64,
    /// Of those, still queued (never sent).
    pub unsent_at_close: u64,
}

/// One run: figures by stream name, and by class (e.g. `video I-frames`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Run {
    pub streams: BTreeMap<String, Figures>,
    pub classes: BTreeMap<String, Figures>,
}

/// The I-frames class of the video stream.
pub const IFRAMES: &str = "video I-frames";
const AUDIO: &str = "audio";
const EKG: &str = "ekg";
/// A stream may lose at most this many times its loss without objectives.
pub const LOSS_GUARD: f64 = 1.5;

/// How one check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The objective's metric is better with it.
    Wins,
    /// The same with and without (e.g. no I-frame lost either way): not a loss.
    Ties,
    /// Worse with the objective, or not measured.
    Loses,
    /// A guard that holds.
    Holds,
    /// A guard that does not.
    Breaks,
}

impl Outcome {
    fn word(self) -> &'static str {
        match self {
            Outcome::Wins => "wins",
            Outcome::Ties => "tie",
            Outcome::Loses => "LOSES",
            Outcome::Holds => "holds",
            Outcome::Breaks => "BREAKS",
        }
    }
}

/// One check on one seed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// Which objective (or `guard`) it judges.
    pub objective: &'static str,
    /// What is compared, with its unit.
    pub metric: String,
    pub with: f64,
    pub without: f64,
    pub outcome: Outcome,
    /// Won, or the guard held.
    pub pass: bool,
}

impl Check {
    /// With minus without: negative is better for every metric here.
    pub fn difference(&self) -> f64 {
        self.with - self.without
    }
}

fn lower(objective: &'static str, metric: &str, with: Option<f64>, without: Option<f64>) -> Check {
    let (w, wo) = (with.unwrap_or(f64::NAN), without.unwrap_or(f64::NAN));
    // NaN (nothing measured) loses.
    let outcome = if w < wo {
        Outcome::Wins
    } else if w == wo {
        Outcome::Ties
    } else {
        Outcome::Loses
    };
    Check {
        objective,
        metric: metric.to_string(),
        with: w,
        without: wo,
        outcome,
        pass: outcome == Outcome::Wins,
    }
}

/// Judge one seed's run with objectives against the run without.
pub fn judge(with: &Run, without: &Run) -> Vec<Check> {
    let pct = |r: &Run, class: bool, name: &str| {
        let m = if class { &r.classes } else { &r.streams };
        m.get(name).map(|f| 100.0 * f.loss_rate)
    };
    let audio = |r: &Run| r.streams.get(AUDIO).cloned();
    let (a_with, a_without) = (audio(with), audio(without));
    let mut out = vec![
        lower(
            "iframes",
            "I-frame loss %",
            pct(with, true, IFRAMES),
            pct(without, true, IFRAMES),
        ),
        lower(
            "voice",
            "audio mean ms",
            a_with.as_ref().and_then(|f| f.mean_ms),
            a_without.as_ref().and_then(|f| f.mean_ms),
        ),
        lower(
            "voice",
            "audio p95 ms",
            a_with.as_ref().and_then(|f| f.p95_ms),
            a_without.as_ref().and_then(|f| f.p95_ms),
        ),
        lower(
            "ekg",
            "EKG loss %",
            pct(with, false, EKG),
            pct(without, false, EKG),
        ),
    ];
    for (name, f) in &with.streams {
        let Some(base) = without.streams.get(name) else {
            continue;
        };
        let (w, wo) = (100.0 * f.loss_rate, 100.0 * base.loss_rate);
        let holds = w <= LOSS_GUARD * wo;
        out.push(Check {
            objective: "guard",
            metric: format!("{name} loss % (at most {LOSS_GUARD}x)"),
            with: w,
            without: wo,
            outcome: if holds {
                Outcome::Holds
            } else {
                Outcome::Breaks
            },
            pass: holds,
        });
    }
    out
}

/// What one stream paid (or gained) for the objectives: no verdict, only the figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cost {
    pub stream: String,
    pub mean_ms: (Option<f64>, Option<f64>),
    pub p95_ms: (Option<f64>, Option<f64>),
    pub goodput_kbps: (Option<f64>, Option<f64>),
}

/// Every stream's latency and goodput, with and without objectives (in that order).
pub fn costs(with: &Run, without: &Run) -> Vec<Cost> {
    with.streams
        .iter()
        .filter_map(|(name, w)| {
            let wo = without.streams.get(name)?;
            Some(Cost {
                stream: name.clone(),
                mean_ms: (w.mean_ms, wo.mean_ms),
                p95_ms: (w.p95_ms, wo.p95_ms),
                goodput_kbps: (w.goodput_kbps, wo.goodput_kbps),
            })
        })
        .collect()
}

/// The cost table: `with -> without` per figure.
pub fn render_costs(costs: &[Cost]) -> String {
    let pair = |(w, wo): (Option<f64>, Option<f64>)| {
        let f = |v: Option<f64>| v.map_or("-".into(), |x| format!("{x:.0}"));
        format!("{} (without {})", f(w), f(wo))
    };
    let mut rows = vec![vec![
        "stream".to_string(),
        "mean ms".into(),
        "p95 ms".into(),
        "goodput kbit/s".into(),
    ]];
    for c in costs {
        rows.push(vec![
            c.stream.clone(),
            pair(c.mean_ms),
            pair(c.p95_ms),
            pair(c.goodput_kbps),
        ]);
    }
    crate::table::render(&rows)
}

/// One check over several seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spread {
    pub objective: &'static str,
    pub metric: String,
    pub seeds: usize,
    /// Won (or, for a guard, held).
    pub passed: usize,
    /// Came out the same with and without objectives.
    pub ties: usize,
    /// Mean, least and greatest of `with - without` over the seeds.
    pub mean_difference: f64,
    pub min_difference: f64,
    pub max_difference: f64,
}

/// Gather each check (by position) over the seeds' verdicts.
pub fn spread(per_seed: &[Vec<Check>]) -> Vec<Spread> {
    let Some(first) = per_seed.first() else {
        return Vec::new();
    };
    first
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let same: Vec<&Check> = per_seed
                .iter()
                .filter_map(|v| v.get(k))
                .filter(|o| o.metric == c.metric)
                .collect();
            let d: Vec<f64> = same.iter().map(|c| c.difference()).collect();
            Spread {
                objective: c.objective,
                metric: c.metric.clone(),
                seeds: same.len(),
                passed: same.iter().filter(|c| c.pass).count(),
                ties: same.iter().filter(|c| c.outcome == Outcome::Ties).count(),
                mean_difference: d.iter().sum::<f64>() / d.len().max(1) as f64,
                min_difference: d.iter().copied().fold(f64::INFINITY, f64::min),
                max_difference: d.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            }
        })
        .collect()
}

/// The per-seed verdict table.
pub fn render_checks(checks: &[Check]) -> String {
    let mut rows = vec![vec![
        "objective".to_string(),
        "metric".into(),
        "with".into(),
        "without".into(),
        "difference".into(),
        "verdict".into(),
    ]];
    for c in checks {
        rows.push(vec![
            c.objective.to_string(),
            c.metric.clone(),
            format!("{:.2}", c.with),
            format!("{:.2}", c.without),
            format!("{:+.2}", c.difference()),
            c.outcome.word().into(),
        ]);
    }
    crate::table::render(&rows)
}

/// The table over seeds.
pub fn render_spread(spread: &[Spread]) -> String {
    let mut rows = vec![vec![
        "objective".to_string(),
        "metric".into(),
        "wins".into(),
        "mean diff".into(),
        "min..max diff".into(),
    ]];
    for s in spread {
        rows.push(vec![
            s.objective.to_string(),
            s.metric.clone(),
            match s.ties {
                0 => format!("{}/{}", s.passed, s.seeds),
                1 => format!("{}/{}, 1 tie", s.passed, s.seeds),
                n => format!("{}/{}, {n} ties", s.passed, s.seeds),
            },
            format!("{:+.2}", s.mean_difference),
            format!("{:+.2}..{:+.2}", s.min_difference, s.max_difference),
        ]);
    }
    crate::table::render(&rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(loss: f64, mean: f64, p95: f64) -> Figures {
        Figures {
            sent: 100,
            acked: 100,
            lost: 0,
            loss_rate: loss,
            mean_ms: Some(mean),
            p95_ms: Some(p95),
            goodput_kbps: None,
            channels: BTreeMap::new(),
            losses: None,
        }
    }

    fn run(iframe_loss: f64, audio: (f64, f64, f64), video_loss: f64) -> Run {
        let mut r = Run::default();
        r.streams.insert("ekg".into(), figures(0.02, 50.0, 90.0));
        r.classes
            .insert(IFRAMES.into(), figures(iframe_loss, 0.0, 0.0));
        r.streams
            .insert("audio".into(), figures(audio.0, audio.1, audio.2));
        r.streams
            .insert("video".into(), figures(video_loss, 100.0, 200.0));
        r
    }

    #[test]
    fn each_check_compares_its_own_metric() {
        let with = run(0.01, (0.03, 70.0, 100.0), 0.04);
        let without = run(0.03, (0.02, 90.0, 220.0), 0.03);
        let v = judge(&with, &without);
        let by = |m: &str| v.iter().find(|c| c.metric.starts_with(m)).unwrap();
        assert!(by("I-frame").pass);
        assert!((by("I-frame").difference() + 2.0).abs() < 1e-9);
        assert!(by("audio mean").pass && by("audio p95").pass);
        assert!(!by("EKG loss").pass, "equal EKG loss is not a win");
        assert_eq!(
            by("EKG loss").outcome,
            Outcome::Ties,
            "but it is not a loss either"
        );
        // 3% against 2% is within 1.5x; 4% against 3% too.
        assert!(by("audio loss").pass && by("video loss").pass);

        let worse = run(0.03, (0.031, 95.0, 100.0), 0.046);
        let v = judge(&worse, &without);
        let by = |m: &str| v.iter().find(|c| c.metric.starts_with(m)).unwrap();
        assert!(!by("I-frame").pass, "equal loss is not a win");
        assert_eq!(by("audio mean").outcome, Outcome::Loses);
        assert!(by("audio p95").pass);
        assert_eq!(by("audio loss").outcome, Outcome::Breaks);
        assert!(!by("video loss").pass);
        let table = render_checks(&v);
        assert!(
            table.contains("  tie") && table.contains("BREAKS"),
            "{table}"
        );
    }

    #[test]
    fn costs_show_each_streams_latency_and_goodput_both_ways() {
        let mut with = run(0.01, (0.03, 70.0, 100.0), 0.04);
        let mut without = run(0.03, (0.02, 90.0, 220.0), 0.03);
        with.streams.get_mut("video").unwrap().mean_ms = Some(197.0);
        without.streams.get_mut("video").unwrap().mean_ms = Some(116.0);
        let c = costs(&with, &without);
        let video = c.iter().find(|c| c.stream == "video").unwrap();
        assert_eq!(video.mean_ms, (Some(197.0), Some(116.0)));
        assert_eq!(c.len(), 3, "ekg, audio and video");
        assert!(render_costs(&c).contains("197 (without 116)"));
    }

    #[test]
    fn missing_figures_fail() {
        let v = judge(&Run::default(), &run(0.01, (0.0, 1.0, 1.0), 0.0));
        assert!(v.iter().take(4).all(|c| !c.pass));
    }

    #[test]
    fn spread_counts_wins_and_bounds_differences() {
        let without = run(0.03, (0.02, 90.0, 220.0), 0.03);
        let seeds = vec![
            judge(&run(0.01, (0.02, 80.0, 100.0), 0.03), &without),
            judge(&run(0.04, (0.02, 60.0, 100.0), 0.03), &without),
        ];
        let s = spread(&seeds);
        let iframes = &s[0];
        assert_eq!((iframes.seeds, iframes.passed), (2, 1));
        assert!((iframes.min_difference + 2.0).abs() < 1e-9);
        assert!((iframes.max_difference - 1.0).abs() < 1e-9);
        assert!((iframes.mean_difference + 0.5).abs() < 1e-9);
        let mean = &s[1];
        assert_eq!(mean.passed, 2);
        assert!((mean.mean_difference + 20.0).abs() < 1e-9);
        assert!(render_spread(&s).contains("1/2"));
        assert_eq!(s[3].ties, 2, "EKG loss is the same on both seeds");
        assert!(render_spread(&s).contains("0/2, 2 ties"));
        assert!(render_checks(&seeds[1]).contains("LOSES"));
    }
}
