//! `horde analyze`: the cross-layer analysis toolkit on CSV series, pcap captures and
//! Mahimahi traces, and UDP probes of the CDMA2000 model that produce such series.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use horde_analyze::csv::Table;
use horde_analyze::discretize::{discretize, Method};
use horde_analyze::info::{nmi_sweep, LagNmi};
use horde_analyze::plot::{lines_svg, Line};
use horde_analyze::stats::{cdf, fairness_gap, mean_ci90, quantile};
use horde_analyze::wavelet::{burstiness, haar_split, rate_entropy};
use horde_analyze::{align, mahimahi, pcap, tcp};
use horde_config::input::Kind;
use horde_links::cdma::probe::{self, ProbeConfig, ProbeRun, Source};
use horde_links::cdma::CdmaParams;

#[derive(Subcommand)]
pub enum Command {
    /// Lagged normalised mutual information I(X;Y)/H(X) of two columns, with a shuffled null.
    Nmi(NmiArgs),
    /// Distribution of one column: mean with 90% CI, quantiles, rate entropy μ, burstiness β.
    Summary(SummaryArgs),
    /// TCP RTT samples (thesis rules) and timeouts from a sender-side pcap capture.
    Pcap(PcapArgs),
    /// A Mahimahi trace as a per-second capacity series, with μ and β.
    Mahimahi(MahimahiArgs),
    /// Fairness gap (max - min) / min of per-user throughputs.
    Fairness {
        /// Per-user throughputs.
        #[arg(required = true, num_args = 1..)]
        values: Vec<f64>,
    },
    /// UDP sources through the CDMA2000 model in virtual time; per-second CSV per source.
    CdmaUdp(CdmaUdpArgs),
    /// CBR sweep over the CDMA2000 model: goodput, μ, β, RTT and loss per rate.
    CdmaSweep(CdmaSweepArgs),
    /// What drives the CDMA2000 model's assigned rate: peak NMI of sending rate, Ec/Io and
    /// sector load against it, each with its null.
    CdmaDrivers(CdmaCommon),
}

#[derive(Args)]
pub struct NmiArgs {
    /// Column X (the one whose entropy is the denominator).
    #[arg(long)]
    x: String,
    /// Column Y, compared with X shifted 0..=max-lag samples into the past.
    #[arg(long)]
    y: String,
    #[arg(long, default_value_t = 30)]
    max_lag: usize,
    /// Discretisation of X: `auto` (equal-width bins of the Freedman–Diaconis width of
    /// the column), `width:W` (bins of width W, e.g. the thesis's `width:10` for kbit/s)
    /// or `cluster:K` (single-link).
    #[arg(long, default_value = "auto")]
    x_bins: Method,
    /// Discretisation of Y.
    #[arg(long, default_value = "auto")]
    y_bins: Method,
    /// Shuffles of X for the null baseline (its 95th percentile per lag).
    #[arg(long, default_value_t = 100)]
    shuffles: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Analyse only the Haar component: `fast` (~2 s) or `slow` (~32 s).
    #[arg(long)]
    band: Option<Band>,
    /// Print `{"lags": [{"lag": L, "nmi": V, "null": V0}, ...]}`.
    #[arg(long)]
    json: bool,
    /// Also draw NMI and null against lag into this SVG file.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// CSV file with a header line.
    file: PathBuf,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Band {
    Fast,
    Slow,
}

#[derive(Args)]
pub struct SummaryArgs {
    #[arg(long)]
    col: String,
    /// Bin width for the entropy μ (10 for kbit/s rates).
    #[arg(long, default_value_t = 10.0)]
    bin: f64,
    /// Also draw the CDF into this SVG file.
    #[arg(long)]
    svg: Option<PathBuf>,
    file: PathBuf,
}

#[derive(Args)]
pub struct PcapArgs {
    /// Write a per-second series (send_kbps, rtt_ms, outstanding_bytes, retransmissions,
    /// timeouts) to this CSV file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also draw the RTT CDF into this SVG file.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Captures to read together, merged by time: one with both directions, or one per
    /// direction (`horde shell --pcap` writes `linkN-up.pcap` and `linkN-down.pcap`).
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

#[derive(Args)]
pub struct MahimahiArgs {
    /// Write the per-second capacity (second,capacity_kbps) to this CSV file.
    #[arg(long)]
    out: Option<PathBuf>,
    file: PathBuf,
}

#[derive(Args, Clone)]
pub struct CdmaCommon {
    /// Length of each run, s.
    #[arg(long, default_value_t = 1200)]
    seconds: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Model parameters: a TOML file of `rate = { model = "cdma1x_rtt", ... }` fields
    /// (the table's contents, without `model`); defaults otherwise.
    #[arg(long)]
    params: Option<PathBuf>,
    /// Per-user base-station buffer, bytes.
    #[arg(long, default_value_t = 30_000)]
    buffer: u64,
}

#[derive(Args)]
pub struct CdmaUdpArgs {
    /// `cbr:KBPS` or `onoff:KBPS:ON_S:OFF_S`; repeat for more users in the sector.
    #[arg(long, required = true)]
    source: Vec<Source>,
    #[command(flatten)]
    common: CdmaCommon,
    /// CSV output; with several sources, `-uN` is added before the extension.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args)]
pub struct CdmaSweepArgs {
    /// CBR rates, kbit/s.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10,20,30,40,50,60,70,80,100,120,153.6"
    )]
    rates: Vec<f64>,
    #[command(flatten)]
    common: CdmaCommon,
}

pub fn run(cmd: Command) -> Result<ExitCode> {
    match cmd {
        Command::Nmi(a) => nmi(a),
        Command::Summary(a) => summary(a),
        Command::Pcap(a) => pcap_cmd(a),
        Command::Mahimahi(a) => mahimahi_cmd(a),
        Command::Fairness { values } => {
            match fairness_gap(&values) {
                Some(g) => println!("fairness gap {g:.4}"),
                None => bail!("the fairness gap needs a positive minimum throughput"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::CdmaUdp(a) => cdma_udp(a),
        Command::CdmaSweep(a) => cdma_sweep(a),
        Command::CdmaDrivers(a) => cdma_drivers(a),
    }
}

fn band(x: &[f64], b: Option<Band>) -> Vec<f64> {
    match b {
        None => x.to_vec(),
        Some(Band::Fast) => haar_split(x).fast,
        Some(Band::Slow) => haar_split(x).slow,
    }
}

/// The lag sweep of two series.
pub fn sweep(
    x: &[f64],
    y: &[f64],
    (xb, yb): (Method, Method),
    max_lag: usize,
    shuffles: usize,
    seed: u64,
) -> Result<Vec<LagNmi>> {
    if max_lag + 2 > x.len().min(y.len()) {
        bail!(
            "--max-lag {max_lag} leaves fewer than two pairs in {} samples",
            x.len().min(y.len())
        );
    }
    let xs = discretize(x, xb);
    let ys = discretize(y, yb);
    Ok(nmi_sweep(&xs, &ys, max_lag, shuffles, seed))
}

/// Warn when a column's bins leave it one symbol: its entropy is 0, so every NMI with it
/// is 0 whatever the data say.
fn warn_if_one_bin(name: &str, values: &[f64], method: Method) {
    let symbols = discretize(values, method);
    if symbols.iter().flatten().all(|s| *s == 0) {
        eprintln!(
            "warning: column {name} falls into a single bin with {} ({}): its NMI is 0 \
             whatever the data; use a narrower width:W, cluster:K, or auto",
            method,
            method.resolve(values)
        );
    }
}

fn nmi(a: NmiArgs) -> Result<ExitCode> {
    let t = Table::read(&a.file)?;
    let x = band(t.column(&a.x)?, a.band);
    let y = band(t.column(&a.y)?, a.band);
    warn_if_one_bin(&a.x, &x, a.x_bins);
    warn_if_one_bin(&a.y, &y, a.y_bins);
    let rows = sweep(&x, &y, (a.x_bins, a.y_bins), a.max_lag, a.shuffles, a.seed)?;
    if a.json {
        let lags: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| serde_json::json!({"lag": r.lag, "nmi": r.nmi, "null": r.null}))
            .collect();
        println!("{}", serde_json::json!({ "lags": lags }));
    } else {
        println!(
            "# I({};{})/H({}), {} shifted 0..{} samples into the past",
            a.x, a.y, a.x, a.x, a.max_lag
        );
        println!("{:>5} {:>10} {:>10}", "lag", "nmi", "null95");
        for r in &rows {
            let mark = if r.nmi > r.null { " *" } else { "" };
            println!("{:>5} {:>10.5} {:>10.5}{mark}", r.lag, r.nmi, r.null);
        }
        let peak = rows
            .iter()
            .max_by(|p, q| p.nmi.total_cmp(&q.nmi))
            .expect("at least one lag");
        println!(
            "peak: lag {} nmi {:.5} (null {:.5})",
            peak.lag, peak.nmi, peak.null
        );
    }
    if let Some(svg) = &a.svg {
        let n: Vec<(f64, f64)> = rows.iter().map(|r| (r.lag as f64, r.nmi)).collect();
        let z: Vec<(f64, f64)> = rows.iter().map(|r| (r.lag as f64, r.null)).collect();
        lines_svg(
            svg,
            &format!("I({};{})/H({})", a.x, a.y, a.x),
            "lag (samples)",
            "NMI",
            &[
                Line {
                    name: "nmi",
                    points: &n,
                },
                Line {
                    name: "null (95%)",
                    points: &z,
                },
            ],
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(name: &str, v: &[f64], bin: f64) {
    let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    print!("{name}: n {}", finite.len());
    if let Some(ci) = mean_ci90(&finite) {
        print!("  mean {:.3} ± {:.3} (90% CI)", ci.mean, ci.half);
    }
    for (label, q) in [("p10", 0.1), ("median", 0.5), ("p90", 0.9)] {
        if let Some(x) = quantile(&finite, q) {
            print!("  {label} {x:.3}");
        }
    }
    println!(
        "  μ {:.4} bits ({bin} bins)  β {:.4}",
        rate_entropy(v, bin) + 0.0,
        burstiness(v)
    );
}

fn summary(a: SummaryArgs) -> Result<ExitCode> {
    if !(a.bin.is_finite() && a.bin > 0.0) {
        bail!("--bin must be positive");
    }
    let t = Table::read(&a.file)?;
    let v = t.column(&a.col)?;
    describe(&a.col, v, a.bin);
    if let Some(svg) = &a.svg {
        let c = cdf(v);
        lines_svg(
            svg,
            &format!("CDF of {}", a.col),
            &a.col,
            "P(X <= x)",
            &[Line {
                name: &a.col,
                points: &c,
            }],
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn pcap_cmd(a: PcapArgs) -> Result<ExitCode> {
    let mut segs = Vec::new();
    for file in &a.files {
        segs.extend(pcap::read_pcap(file)?);
    }
    // Stable: segments with the same time keep their order within a file.
    segs.sort_by(|x, y| x.time.total_cmp(&y.time));
    let names = a
        .files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let r = tcp::analyze(&segs);
    let Some((s, d)) = r.flow else {
        bail!("{names}: no TCP payload in the capture");
    };
    println!("flow {}:{} -> {}:{}", s.0, s.1, d.0, d.1);
    let timeouts = match r.timeouts() {
        Some(n) => n.to_string(),
        None => "unknown".into(),
    };
    println!(
        "data segments {}  bytes {}  acks {}  retransmissions {}  timeouts (>100 ms after last ack) {timeouts}",
        r.data_segments,
        r.bytes_sent,
        r.acks,
        r.retransmissions.len(),
    );
    if r.acks == 0 {
        println!(
            "no ACKs from {}:{} in {names}: a capture of one direction only has no RTTs, and its \
             retransmissions cannot be classed as timeouts; give both directions \
             (e.g. link0-up.pcap link0-down.pcap)",
            d.0, d.1
        );
    }
    let rtts: Vec<f64> = r.rtts.iter().map(|x| x.rtt * 1e3).collect();
    describe("rtt_ms", &rtts, 500.0);
    let start = r.sends.first().map_or(0.0, |x| x.0).floor();
    let end = r.sends.last().map_or(0.0, |x| x.0);
    let n = align::bins_to_cover(start, end, 1.0);
    if let Some(out) = &a.out {
        use align::{bin, Reduce};
        let send: Vec<(f64, f64)> = r
            .sends
            .iter()
            .map(|&(t, b)| (t, f64::from(b) * 8.0 / 1e3))
            .collect();
        let rtt: Vec<(f64, f64)> = r.rtts.iter().map(|x| (x.sent, x.rtt * 1e3)).collect();
        let outst: Vec<(f64, f64)> = r.outstanding.iter().map(|&(t, b)| (t, b as f64)).collect();
        let retx: Vec<(f64, f64)> = r.retransmissions.iter().map(|x| (x.time, 1.0)).collect();
        let tos: Vec<(f64, f64)> = r
            .retransmissions
            .iter()
            .filter(|x| x.timeout)
            .map(|x| (x.time, 1.0))
            .collect();
        // Without ACKs the column stays empty rather than calling every retransmission a
        // timeout.
        let timeouts = match r.acks {
            0 => vec![f64::NAN; n],
            _ => bin(&tos, start, 1.0, n, Reduce::Sum),
        };
        let cols = [
            bin(&send, start, 1.0, n, Reduce::Sum),
            bin(&rtt, start, 1.0, n, Reduce::Mean),
            bin(&outst, start, 1.0, n, Reduce::Mean),
            bin(&retx, start, 1.0, n, Reduce::Sum),
            timeouts,
        ];
        let mut text =
            String::from("second,send_kbps,rtt_ms,outstanding_bytes,retransmissions,timeouts\n");
        for i in 0..n {
            text.push_str(&i.to_string());
            for c in &cols {
                if c[i].is_finite() {
                    text.push_str(&format!(",{:.3}", c[i]));
                } else {
                    text.push(',');
                }
            }
            text.push('\n');
        }
        write(out, &text)?;
    }
    if let Some(svg) = &a.svg {
        let c = cdf(&rtts);
        lines_svg(
            svg,
            "TCP RTT (thesis rules)",
            "RTT (ms)",
            "CDF",
            &[Line {
                name: "rtt",
                points: &c,
            }],
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn mahimahi_cmd(a: MahimahiArgs) -> Result<ExitCode> {
    let cap = mahimahi::read_capacity_kbps(&a.file)?;
    describe("capacity_kbps", &cap, 10.0);
    if let Some(out) = &a.out {
        let mut text = String::from("second,capacity_kbps\n");
        for (i, c) in cap.iter().enumerate() {
            text.push_str(&format!("{i},{c:.3}\n"));
        }
        write(out, &text)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn config(c: &CdmaCommon) -> Result<ProbeConfig> {
    let params = match &c.params {
        None => CdmaParams::default(),
        Some(p) => {
            let text = horde_config::input::read_to_string(p, Kind::CONFIG)
                .with_context(|| format!("reading {}", p.display()))?;
            let params: CdmaParams =
                toml::from_str(&text).with_context(|| format!("{}", p.display()))?;
            params
                .validate()
                .with_context(|| format!("{}", p.display()))?;
            params
        }
    };
    if c.seconds < 2 {
        bail!("--seconds must be at least 2");
    }
    Ok(ProbeConfig {
        params,
        buffer_bytes: c.buffer,
        seconds: c.seconds,
        seed: c.seed,
        ..ProbeConfig::default()
    })
}

fn run_summary(label: &str, r: &ProbeRun) {
    let assigned: Vec<f64> = r.seconds.iter().map(|s| s.assigned_kbps).collect();
    let rtt_median = quantile(&r.rtts_ms, 0.5).unwrap_or(f64::NAN);
    let loss = 1.0 - r.delivered as f64 / r.sent.max(1) as f64;
    println!(
        "{label:>16} {:>9.2} {:>8.3} {:>8.3} {:>10.0} {:>7.3} {:>5} {:>5}",
        r.goodput_kbps(),
        // `+ 0.0` prints a zero entropy as 0, not -0.
        rate_entropy(&assigned, 10.0) + 0.0,
        burstiness(&assigned),
        rtt_median,
        loss,
        r.denials,
        r.caps
    );
}

const HEADER: &str = "          source  goodput        μ        β  rtt_p50ms    loss  cuts  caps";

fn cdma_udp(a: CdmaUdpArgs) -> Result<ExitCode> {
    let cfg = config(&a.common)?;
    let runs = probe::run(&cfg, &a.source);
    println!("{HEADER}");
    for (i, (r, s)) in runs.iter().zip(&a.source).enumerate() {
        let path = if runs.len() == 1 {
            a.out.clone()
        } else {
            let stem = a
                .out
                .file_stem()
                .map_or("out".into(), |s| s.to_string_lossy().into_owned());
            let ext = a
                .out
                .extension()
                .map_or(String::new(), |e| format!(".{}", e.to_string_lossy()));
            a.out.with_file_name(format!("{stem}-u{i}{ext}"))
        };
        write(&path, &r.to_csv())?;
        eprintln!("user {i} ({s}): per-second series in {}", path.display());
        run_summary(&s.to_string(), r);
    }
    if runs.len() > 1 {
        let g: Vec<f64> = runs.iter().map(ProbeRun::goodput_kbps).collect();
        if let Some(gap) = fairness_gap(&g) {
            println!("fairness gap {gap:.3}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn cdma_sweep(a: CdmaSweepArgs) -> Result<ExitCode> {
    let cfg = config(&a.common)?;
    println!("{HEADER}");
    for &kbps in &a.rates {
        if !(kbps.is_finite() && kbps > 0.0) {
            bail!("--rates: {kbps} is not a positive rate");
        }
        let r = probe::run(&cfg, &[Source::Cbr { kbps }]).remove(0);
        run_summary(&format!("cbr {kbps}"), &r);
    }
    Ok(ExitCode::SUCCESS)
}

fn cdma_drivers(c: CdmaCommon) -> Result<ExitCode> {
    let cfg = config(&c)?;
    // Sending rate: on-off sources (a CBR source has no entropy to share).
    let onoff = probe::run(
        &cfg,
        &[Source::OnOff {
            kbps: 40.0,
            on_s: 1.0,
            off_s: 5.0,
        }],
    )
    .remove(0);
    // Ec/Io and load: a CBR source, whose sending rate does not move (thesis §6.1.2).
    let cbr = probe::run(&cfg, &[Source::Cbr { kbps: 40.0 }]).remove(0);
    let col = |r: &ProbeRun, f: fn(&probe::ProbeSecond) -> f64| -> Vec<f64> {
        r.seconds.iter().map(f).collect()
    };
    let assigned_onoff = col(&onoff, |s| s.assigned_kbps);
    let assigned_cbr = col(&cbr, |s| s.assigned_kbps);
    let rate = Method::EqualWidth(10.0);
    let cases = [
        (
            "send_kbps -> assigned",
            col(&onoff, |s| s.send_kbps),
            assigned_onoff,
            rate,
        ),
        (
            "ecio_db -> assigned",
            col(&cbr, |s| s.ecio_db),
            assigned_cbr.clone(),
            Method::EqualWidth(1.0),
        ),
        (
            "calls -> assigned",
            col(&cbr, |s| f64::from(s.calls)),
            assigned_cbr,
            Method::EqualWidth(1.0),
        ),
    ];
    println!(
        "{:>24} {:>9} {:>5} {:>9}",
        "I(X;assigned)/H(X)", "peak", "lag", "null95"
    );
    let mut peaks = Vec::new();
    for (name, x, y, xb) in cases {
        let rows = sweep(&x, &y, (xb, rate), 10, 100, c.seed)?;
        let p = rows
            .iter()
            .max_by(|a, b| a.nmi.total_cmp(&b.nmi))
            .expect("lags");
        println!("{name:>24} {:>9.5} {:>5} {:>9.5}", p.nmi, p.lag, p.null);
        peaks.push(p.nmi);
    }
    println!(
        "sending rate / Ec/Io: {:.1}x   sending rate / load: {:.1}x",
        peaks[0] / peaks[1].max(1e-12),
        peaks[0] / peaks[2].max(1e-12)
    );
    Ok(ExitCode::SUCCESS)
}
