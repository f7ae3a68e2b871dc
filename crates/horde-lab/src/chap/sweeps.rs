//! The dissertation's sweeps over one parameter: the AP's queue size (seed §6.6,
//! Table 6.5), the distance of the application node, of the FTP node or of both (§6.7,
//! Tables 6.6, 6.7 and 6.8), and the path latency of one of two FTP downloads (§6.13,
//! Table 6.14). Each point is a set of [`run`](super::experiment::run)s, one per
//! discipline and seed; the table gives each discipline's mean over the seeds.

use std::fmt::Write;

use anyhow::{anyhow, bail, Result};
use horde_analyze::quality::{jain_index, mean_response_time_on_common_pages_ms, PageFetch};
use horde_qdisc::QdiscKind;
use horde_workload::apps::Fec;
use serde::Serialize;

use super::bulk_tcp::Congestion;
use super::experiment::{RunConfig, RunResult, Scenario, Schedule, TestApp};

/// Which parameter a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sweep {
    /// The AP's queue limit in packets; one application against FTP.
    QueueSize,
    /// The application station's distance in m; FTP at 1 m.
    AppDistance,
    /// The FTP station's distance in m; the application at 1 m.
    FtpDistance,
    /// Both stations' distance in m, the same for the application and the FTP.
    BothDistance,
    /// FTP 1's one-way server-to-AP latency in ms; FTP 2 at 2 ms.
    Fairness,
}

impl Sweep {
    fn x_label(self) -> &'static str {
        match self {
            Sweep::QueueSize => "q (packets)",
            Sweep::AppDistance => "app node D (m)",
            Sweep::FtpDistance => "FTP node D (m)",
            Sweep::BothDistance => "both nodes D (m)",
            Sweep::Fairness => "FTP 1 latency (ms)",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Sweep::QueueSize => "Table 6.5, queue size: one application against FTP",
            Sweep::AppDistance => {
                "Table 6.6, distance of the application node (FTP at 1 m), q = 35"
            }
            Sweep::FtpDistance => {
                "Table 6.7, distance of the FTP node (application at 1 m), q = 35"
            }
            Sweep::BothDistance => "Table 6.8, both nodes at the same distance, q = 35",
            Sweep::Fairness => {
                "Table 6.14, TCP fairness: FTP 1's latency swept, FTP 2 at 2 ms, q = 35"
            }
        }
    }
}

/// One curve of a sweep: an application, or in the fairness sweep a TCP variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Series {
    App(TestApp),
    Tcp(Congestion),
}

impl Series {
    fn name(self) -> &'static str {
        match self {
            Series::App(TestApp::Game) => "Game",
            Series::App(TestApp::Voip) => "VoIP",
            Series::App(TestApp::Video) => "Video, no FEC",
            Series::App(TestApp::Web) => "Web",
            Series::Tcp(Congestion::Cubic) => "Cubic",
            Series::Tcp(Congestion::NewReno) => "NewReno",
        }
    }

    fn metric(self) -> (&'static str, &'static str) {
        match self {
            Series::App(TestApp::Game) => ("game MOS", "MOS"),
            Series::App(TestApp::Voip) => ("VoIP MOS", "MOS"),
            Series::App(TestApp::Video) => ("playable frame rate", "fps"),
            Series::App(TestApp::Web) => ("Web response time", "ms"),
            Series::Tcp(_) => ("Jain's index", "index"),
        }
    }
}

/// Everything a sweep runs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub sweep: Sweep,
    pub series: Vec<Series>,
    /// The swept values: packets, metres or milliseconds.
    pub xs: Vec<f64>,
    pub disciplines: Vec<QdiscKind>,
    pub seeds: Vec<u64>,
    pub schedule: Schedule,
}

impl Plan {
    /// Refuses swept values the runs cannot take, naming the bad one.
    pub fn validate(&self) -> Result<()> {
        if self.series.is_empty() || self.xs.is_empty() || self.disciplines.is_empty() {
            bail!("a sweep needs at least one series, one value and one discipline");
        }
        for &x in &self.xs {
            let ok = match self.sweep {
                Sweep::QueueSize => x.fract() == 0.0 && (2.0..=10_000.0).contains(&x),
                Sweep::AppDistance | Sweep::FtpDistance | Sweep::BothDistance => {
                    x.is_finite() && (0.0..=1000.0).contains(&x)
                }
                Sweep::Fairness => x.fract() == 0.0 && (2.0..=10_000.0).contains(&x),
            };
            if !ok {
                bail!(
                    "{}: {x} is out of range ({})",
                    self.sweep.x_label(),
                    match self.sweep {
                        Sweep::QueueSize => "a whole number of packets from 2 to 10000",
                        Sweep::AppDistance | Sweep::FtpDistance | Sweep::BothDistance => {
                            "0 to 1000 m"
                        }
                        Sweep::Fairness => "a whole number of ms from 2 to 10000",
                    }
                );
            }
        }
        Ok(())
    }

    /// The run of `series` at `x` under `discipline` with `seed`.
    pub fn config(&self, series: Series, x: f64, discipline: QdiscKind, seed: u64) -> RunConfig {
        let scenario = match series {
            Series::App(app) => Scenario::OneApp(app),
            Series::Tcp(tcp) => Scenario::Fairness {
                ftp1_latency_ms: x as u32,
                tcp,
            },
        };
        let mut c = RunConfig::new(scenario, discipline, Fec::None, seed, self.schedule);
        match self.sweep {
            Sweep::QueueSize => c.queue_packets = x as usize,
            Sweep::AppDistance => c.distance_m = x,
            Sweep::FtpDistance => c.ftp_distance_m = x,
            Sweep::BothDistance => {
                c.distance_m = x;
                c.ftp_distance_m = x;
            }
            Sweep::Fairness => {}
        }
        c
    }

    /// Every run, in the order they are made: seed, series, value, discipline.
    pub fn configs(&self) -> Vec<RunConfig> {
        let mut out = Vec::new();
        for &seed in &self.seeds {
            for &series in &self.series {
                for &x in &self.xs {
                    for &d in &self.disciplines {
                        out.push(self.config(series, x, d, seed));
                    }
                }
            }
        }
        out
    }
}

/// One value of the swept parameter.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub x: f64,
    /// Seeds counted: all, except for Web, where a seed counts only if one of its pages
    /// completed under every discipline.
    pub seeds: usize,
    /// The metric under each discipline: mean over the seeds counted, min and max.
    pub mean: Vec<f64>,
    pub min: Vec<f64>,
    pub max: Vec<f64>,
    /// Download goodput under each discipline, mean over all seeds: the total, and each
    /// download's.
    pub ftp_mbps: Vec<f64>,
    pub download_mbps: Vec<Vec<f64>>,
    /// The dissertation's FIFO, CHAP and SPQ where its text gives a figure.
    pub dissertation: [Option<f64>; 3],
}

#[derive(Debug, Clone, Serialize)]
pub struct SeriesTable {
    pub name: &'static str,
    pub metric: &'static str,
    pub unit: &'static str,
    pub points: Vec<Point>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepTable {
    pub title: &'static str,
    pub sweep: Sweep,
    pub x_label: &'static str,
    pub seeds: Vec<u64>,
    pub schedule: Schedule,
    pub disciplines: Vec<&'static str>,
    pub series: Vec<SeriesTable>,
}

fn find<'a>(runs: &'a [RunResult], want: &RunConfig) -> Result<&'a RunResult> {
    runs.iter()
        .find(|r| r.config == *want)
        .ok_or_else(|| anyhow!("no run for {want:?}"))
}

/// The series' metric of one run; Web is computed across disciplines.
fn metric(series: Series, r: &RunResult) -> Result<f64> {
    let missing = || {
        anyhow!(
            "a {} run has no {} figure",
            series.name(),
            series.metric().0
        )
    };
    match series {
        Series::App(TestApp::Game) => r.game_mos.ok_or_else(missing),
        Series::App(TestApp::Voip) => r.voip_mos.ok_or_else(missing),
        Series::App(TestApp::Video) => r.video_fps.ok_or_else(missing),
        Series::App(TestApp::Web) => Err(missing()),
        Series::Tcp(_) => Ok(jain_index(&r.download_mbps)?),
    }
}

/// The sweep's table from its runs.
pub fn build(plan: &Plan, runs: &[RunResult]) -> Result<SweepTable> {
    let nd = plan.disciplines.len();
    let mut series = Vec::new();
    for &s in &plan.series {
        let mut points = Vec::new();
        for &x in &plan.xs {
            let mut per_seed: Vec<Vec<f64>> = Vec::new();
            let mut ftp = vec![0.0; nd];
            let mut each: Vec<Vec<f64>> = vec![Vec::new(); nd];
            for &seed in &plan.seeds {
                let rs: Vec<&RunResult> = plan
                    .disciplines
                    .iter()
                    .map(|&d| find(runs, &plan.config(s, x, d, seed)))
                    .collect::<Result<_>>()?;
                let values = if s == Series::App(TestApp::Web) {
                    let pages: Vec<&[PageFetch]> = rs.iter().map(|r| r.pages.as_slice()).collect();
                    mean_response_time_on_common_pages_ms(&pages)
                        .unwrap_or_else(|_| vec![f64::NAN; nd])
                } else {
                    rs.iter().map(|r| metric(s, r)).collect::<Result<_>>()?
                };
                per_seed.push(values);
                let n = plan.seeds.len() as f64;
                for (di, r) in rs.iter().enumerate() {
                    ftp[di] += r.ftp_mbps / n;
                    each[di].resize(r.download_mbps.len(), 0.0);
                    for (k, v) in r.download_mbps.iter().enumerate() {
                        each[di][k] += v / n;
                    }
                }
            }
            let counted: Vec<&Vec<f64>> = per_seed.iter().filter(|v| !v[0].is_nan()).collect();
            let column = |di: usize| counted.iter().map(move |v| v[di]);
            points.push(Point {
                x,
                seeds: counted.len(),
                mean: (0..nd)
                    .map(|di| column(di).sum::<f64>() / counted.len() as f64)
                    .collect(),
                min: (0..nd)
                    .map(|di| column(di).fold(f64::INFINITY, f64::min))
                    .collect(),
                max: (0..nd)
                    .map(|di| column(di).fold(f64::NEG_INFINITY, f64::max))
                    .collect(),
                ftp_mbps: ftp,
                download_mbps: each,
                dissertation: dissertation(plan.sweep, s, x),
            });
        }
        let (metric, unit) = s.metric();
        series.push(SeriesTable {
            name: s.name(),
            metric,
            unit,
            points,
        });
    }
    Ok(SweepTable {
        title: plan.sweep.title(),
        sweep: plan.sweep,
        x_label: plan.sweep.x_label(),
        seeds: plan.seeds.clone(),
        schedule: plan.schedule,
        disciplines: plan.disciplines.iter().map(|d| d.name()).collect(),
        series,
    })
}

/// The dissertation's FIFO, CHAP and SPQ figures where its text states them (seed
/// §6.6, §6.7.1, §6.7.3, §6.13); its other results are only in figures.
fn dissertation(sweep: Sweep, series: Series, x: f64) -> [Option<f64>; 3] {
    let at = |v: f64| (x == v).then_some(());
    match (sweep, series) {
        (Sweep::QueueSize, Series::App(TestApp::Game)) => {
            let fifo = at(35.0).map(|_| 3.5).or(at(350.0).map(|_| 1.5));
            [fifo, Some(4.27), Some(4.27)]
        }
        (Sweep::QueueSize, Series::App(TestApp::Voip)) => [None, Some(4.3), Some(4.3)],
        (Sweep::QueueSize, Series::App(TestApp::Video)) => [None, Some(30.0), Some(30.0)],
        (Sweep::AppDistance, Series::App(TestApp::Game)) => [Some(3.5), Some(4.27), Some(4.27)],
        // §6.7.3: FIFO's game "recovers to about 4" beyond 20 m; VoIP about 4.3 under all
        // three until 10 m, "eventually reaching 0 at 30m".
        (Sweep::BothDistance, Series::App(TestApp::Game)) if x > 20.0 => [Some(4.0), None, None],
        (Sweep::BothDistance, Series::App(TestApp::Voip)) if x <= 10.0 => [Some(4.3); 3],
        (Sweep::BothDistance, Series::App(TestApp::Voip)) if x == 30.0 => [Some(0.0); 3],
        (Sweep::Fairness, Series::Tcp(tcp)) => {
            if at(2.0).is_some() {
                [Some(1.0), Some(1.0), None]
            } else if at(150.0).is_some() {
                match tcp {
                    Congestion::NewReno => [Some(0.509), Some(0.789), None],
                    Congestion::Cubic => [Some(0.580), Some(0.966), None],
                }
            } else {
                [None; 3]
            }
        }
        _ => [None; 3],
    }
}

impl SweepTable {
    /// The table as text, one block per series: the metric under each discipline, the
    /// download goodput, and the dissertation's figures.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}, seeds {}, measured over {}-{} s",
            self.title,
            seeds_label(&self.seeds),
            self.schedule.window_start_s,
            self.schedule.window_end_s
        );
        for series in &self.series {
            let _ = writeln!(
                s,
                "\n{}: {} ({}) and download goodput (Mbit/s)",
                series.name, series.metric, series.unit
            );
            let mut head = format!("{:>18} |", self.x_label);
            for d in &self.disciplines {
                let _ = write!(head, " {d:>8}");
            }
            head.push_str(" |");
            for d in &self.disciplines {
                let _ = write!(head, " {:>11}", format!("{d} Mbit/s"));
            }
            head.push_str(" | dissertation FIFO CHAP SPQ");
            let _ = writeln!(s, "{head}");
            for p in &series.points {
                let mut line = format!("{:>18} |", p.x);
                for &m in &p.mean {
                    let _ = write!(line, " {:>8}", fmt(m, series.unit));
                }
                line.push_str(" |");
                for (di, &total) in p.ftp_mbps.iter().enumerate() {
                    let cell = if p.download_mbps[di].len() > 1 {
                        p.download_mbps[di]
                            .iter()
                            .map(|v| format!("{v:.1}"))
                            .collect::<Vec<_>>()
                            .join("/")
                    } else {
                        format!("{total:.2}")
                    };
                    let _ = write!(line, " {cell:>11}");
                }
                line.push_str(" |");
                for v in p.dissertation {
                    let _ = write!(
                        line,
                        " {:>5}",
                        v.map_or("-".to_string(), |v| fmt(v, series.unit))
                    );
                }
                if p.seeds != self.seeds.len() {
                    let _ = write!(line, "  ({} seeds)", p.seeds);
                }
                let _ = writeln!(s, "{line}");
            }
        }
        s
    }
}

fn fmt(v: f64, unit: &str) -> String {
    match unit {
        _ if v.is_nan() => "-".to_string(),
        "ms" | "fps" => format!("{v:.1}"),
        "index" => format!("{v:.3}"),
        _ => format!("{v:.2}"),
    }
}

fn seeds_label(seeds: &[u64]) -> String {
    match seeds {
        [one] => one.to_string(),
        [first, .., last] => format!("{first}..{last}"),
        [] => "-".to_string(),
    }
}
