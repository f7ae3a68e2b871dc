//! `horde send` and `horde recv`: the two ends as separate processes (or hosts), with
//! streams, channels and keys from TOML files; their arguments and what they print.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use horde_apps::recv::{Progress, Receiver};
use horde_apps::send::{Sender, Verdict};
use horde_apps::sender::ConnEnd;

pub(crate) use horde_apps::{base_dir, public_key, read_key};

use crate::metrics::{Exporter, StreamFeed};
use crate::report::{render_recv, render_send};

/// The exit codes of `horde send`, for its `--help`.
pub const SEND_EXIT_CODES: &str = "\
Exit status:
  0  the run did what was asked: ADUs were acked, and none was abandoned because the
     receiver left
  1  an error: a bad file or key, no handshake, or the receiver refused the service
  2  a usage error
  3  not one ADU was acked
  4  the receiver left (closed, crashed, unreachable; reconnecting gave up or the run
     ended while it was away) and ADUs were abandoned; with --file, the transfer did not
     complete because of the receiver (it did not come back, could not resume, or gave up)
  5  with --file: the receiver holds other bytes than were sent (checksum mismatch)

With --file, 0 means the receiver checked the whole file (length and SHA-256), and 1
also covers a source that cannot be read and Ctrl-C.";

/// Not one ADU was acked.
const EXIT_NOTHING_ACKED: u8 = 3;
/// The receiver left and ADUs were abandoned.
const EXIT_PEER_LEFT: u8 = 4;

#[derive(clap::Args)]
#[command(after_help = SEND_EXIT_CODES)]
pub struct SendArgs {
    /// Sender configuration (TOML); see docs/cli.md.
    config: PathBuf,
    /// Override the run length in seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Send this file (`-`: standard input) over every channel instead of the
    /// configuration's synthetic streams, to `horde recv --out`, and check it at the
    /// end: the receiver compares length and SHA-256. Each piece is kept until the
    /// receiver confirms it written, so a receiver restarted with the same --out
    /// resumes. Runs until the receiver's verdict; see docs/cli.md.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["duration", "status"])]
    file: Option<PathBuf>,
    /// Print one JSON object (intervals and summary) at the end instead of tables.
    #[arg(long)]
    json: bool,
    /// Rewrite FILE every second with the peer and its channels, for `horde status FILE`.
    #[arg(long, value_name = "FILE")]
    status: Option<PathBuf>,
    /// Serve metrics at ADDR (e.g. 127.0.0.1:9477): OpenMetrics at /metrics, a live page
    /// at /; see docs/monitoring.md.
    #[arg(long, value_name = "ADDR", conflicts_with = "file")]
    metrics: Option<std::net::SocketAddr>,
}

#[derive(clap::Args)]
pub struct RecvArgs {
    /// Receiver configuration (TOML); see docs/cli.md.
    config: PathBuf,
    /// Stop after this many seconds (default: run until the sender closes or Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
    /// Once a sender is connected, stop after this many seconds without data from it;
    /// 0 disables (default: `idle_timeout_s` from the file, 10). A server never stops
    /// for it.
    #[arg(long)]
    idle_timeout: Option<f64>,
    /// Print one JSON object (intervals and summary) at the end instead of tables.
    #[arg(long)]
    json: bool,
    /// Serve senders until `--duration` or Ctrl-C, however many come and go (by
    /// default the receiver also ends when its last sender closes).
    #[arg(long)]
    server: bool,
    /// Rewrite FILE every second with each sender and its channels, for `horde status
    /// FILE`.
    #[arg(long, value_name = "FILE")]
    status: Option<PathBuf>,
    /// Serve metrics at ADDR (e.g. 127.0.0.1:9477): OpenMetrics at /metrics, a live page
    /// at /; see docs/monitoring.md.
    #[arg(long, value_name = "ADDR", conflicts_with = "out")]
    metrics: Option<std::net::SocketAddr>,
    /// Receive one file from `horde send --file` into PATH (`-`: standard output), and
    /// check its length and SHA-256 at the end (exit 0 when it matches, 5 when not, 1
    /// when the transfer did not complete). A file is written at each piece's offset and
    /// flushed; PATH.horde-resume records how far, so that a receiver restarted with the
    /// same --out resumes. Standard output cannot resume. Messages go to stderr.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["server", "status"])]
    out: Option<PathBuf>,
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Print a file's warnings.
fn warn(warnings: &[horde_config::ConfigError]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}

pub fn send(args: SendArgs) -> Result<ExitCode> {
    let (cfg, warnings) = horde_apps::config::load_send(&args.config)?;
    warn(&warnings);
    let app = Sender::new(cfg, &args.config, args.duration)?;
    if let Some(file) = &args.file {
        return crate::transfer::send(app, &args.config, file, args.json);
    }
    if app.message_class_count() > 0 {
        anyhow::ensure!(
            args.status.is_none() && args.metrics.is_none(),
            "--status and --metrics do not serve a message workload ([[messages]] in {})",
            args.config.display()
        );
        return crate::messages::send(app, &args.config, args.json);
    }
    anyhow::ensure!(
        app.stream_count() > 0,
        "{} declares no [[streams]]: declare one (or [[messages]]), or send a file with --file",
        args.config.display()
    );
    let metrics = args.metrics.map(crate::metrics::bind).transpose()?;
    let our_key = app.our_key();
    let peer = app.peer();
    let sigint = crate::sigint::install()?;
    runtime()?.block_on(async move {
        let host = app.bind().await?;
        let conn = app
            .connect(&host)
            .await
            .map_err(|e| crate::hint::handshake(e, &our_key, app.peer_key_text()))?;
        let registry = crate::status::Registry::default();
        registry.track(peer.to_string(), conn.handle().clone());
        let status = args.status.clone().map(|path| {
            crate::status::spawn_writer(path, "send", our_key.to_string(), registry.clone())
        });
        let feed = StreamFeed::default();
        let metrics = serve_metrics(
            metrics,
            "send",
            our_key.to_string(),
            &registry,
            &feed,
            &host,
        )?;
        let channels_json = announce_channels(&app, &host, args.json);
        let json = args.json;
        let outcome = app
            .run(conn, |row| {
                feed.send_interval(row);
                if !json {
                    print!("{}", render_send(row));
                }
            })
            .await?;
        for task in status.into_iter().chain(metrics) {
            task.abort();
        }
        // The connection is closed; the host waits for any other Close to be acked.
        let stats = host.stats().await?;
        host.shutdown().await;
        let verdict = outcome.verdict();
        if args.json {
            let out = serde_json::json!({
                "role": "send",
                "channels": channels_json,
                "intervals": outcome.intervals,
                "intervals_omitted": outcome.intervals.omitted(),
                "summary": outcome.summary,
                "books": outcome.books,
                "unaccounted": outcome.unaccounted,
                "reconnects": stats.reconnects,
                "interrupted": sigint.interrupted(),
                "end": end_json(&outcome.end),
                "exit_code": exit_code(verdict),
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            print!("summary\n{}", render_send(&outcome.summary));
            for b in &outcome.books {
                println!("{}", b.describe());
            }
            println!("connection {}", outcome.end.describe());
            println!(
                "reconnects: {}; ADUs unaccounted for: {}",
                stats.reconnects, outcome.unaccounted
            );
        }
        conclude(verdict, "ADU", "acked", &args.config)
    })
}

/// The sender's channels as JSON, each also printed as a line unless `json`.
pub(crate) fn announce_channels(
    app: &Sender,
    host: &horde_net::Host,
    json: bool,
) -> Vec<serde_json::Value> {
    app.channels(host.local_addrs())
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if !json {
                println!("channel {}: {} -> {}", c.name, c.local, c.remote);
            }
            serde_json::json!({ "id": i, "name": c.name, "local": c.local.to_string(), "remote": c.remote.to_string() })
        })
        .collect()
}

/// Says what went wrong, if anything, and gives the exit status for a run's verdict.
/// `unit` is what the run sends ("ADU", "message"), `done` what became of the good ones.
pub(crate) fn conclude(
    verdict: Verdict,
    unit: &str,
    done: &str,
    config: &Path,
) -> Result<ExitCode> {
    match verdict {
        Verdict::ServiceRefused(service) => anyhow::bail!(
            "the receiver refused service {service}: it does not listen on it (`service` in {})",
            config.display()
        ),
        Verdict::NothingAcked => eprintln!("error: not one {unit} was {done}"),
        Verdict::PeerLeft(reason) => eprintln!(
            "error: the receiver left ({}) and {unit}s were abandoned",
            reason.as_str()
        ),
        Verdict::Delivered => {}
    }
    Ok(ExitCode::from(exit_code(verdict)))
}

/// Serve `--metrics`, if it was given, for this process's connections and streams.
fn serve_metrics(
    listener: Option<std::net::TcpListener>,
    role: &'static str,
    public_key: String,
    registry: &crate::status::Registry,
    streams: &StreamFeed,
    host: &horde_net::Host,
) -> Result<Option<tokio::task::JoinHandle<()>>> {
    listener
        .map(|listener| {
            let exporter = Exporter {
                role,
                public_key,
                registry: registry.clone(),
                streams: streams.clone(),
                host: Some(host.stats_handle()),
            };
            crate::metrics::spawn(listener, exporter)
        })
        .transpose()
}

/// The exit status for a run's verdict (see [`SEND_EXIT_CODES`]).
pub(crate) fn exit_code(v: Verdict) -> u8 {
    match v {
        Verdict::Delivered => 0,
        Verdict::ServiceRefused(_) => 1,
        Verdict::NothingAcked => EXIT_NOTHING_ACKED,
        Verdict::PeerLeft(_) => EXIT_PEER_LEFT,
    }
}

/// How the connection ended, for the JSON report.
pub(crate) fn end_json(e: &ConnEnd) -> serde_json::Value {
    serde_json::json!({
        "by": if e.peer_ended.is_some() { "peer" } else { "local" },
        "peer_left": e.peer_left().map(|r| r.as_str()),
        "gave_up_reconnecting": e.gave_up,
        "at_s": e.at_s,
        "text": e.describe(),
    })
}

pub fn recv(args: RecvArgs) -> Result<ExitCode> {
    let (cfg, warnings) = horde_apps::config::load_recv(&args.config)?;
    warn(&warnings);
    let app = Receiver::new(cfg, &args.config, args.duration, args.idle_timeout)?;
    let metrics = args.metrics.map(crate::metrics::bind).transpose()?;
    if let Some(out) = &args.out {
        return crate::transfer::recv(app, out, args.json);
    }
    let our_key = app.our_key().to_string();
    let json = args.json;
    let sigint = crate::sigint::install()?;
    runtime()?.block_on(async move {
        let host = app.bind().await?;
        if !json {
            println!(
                "listening on {:?} for service {}",
                host.local_addrs(),
                app.service()
            );
        }
        let listener = host.listen(app.service());
        let limits = app.limits(&sigint, args.server);
        let mut serve = app.serve();
        let registry = crate::status::Registry::default();
        let status = args.status.clone().map(|path| {
            crate::status::spawn_writer(path, "recv", our_key.clone(), registry.clone())
        });
        let feed = StreamFeed::default();
        let metrics = serve_metrics(metrics, "recv", our_key, &registry, &feed, &host)?;
        let end = serve
            .run(listener, &limits, |p| match p {
                Progress::Connected { id, peer, handle } => {
                    registry.track(peer.to_string(), handle.clone());
                    if !json {
                        println!("sender {id} connected (key {peer})");
                    }
                }
                Progress::Closed { id, reason } => {
                    if !json {
                        println!("sender {id}: {}", reason.as_str());
                    }
                }
                Progress::Row(row) => {
                    feed.recv_interval(row);
                    if !json {
                        print!("{}", render_recv(row));
                    }
                }
            })
            .await;
        for task in status.into_iter().chain(metrics) {
            task.abort();
        }
        let stats = host.stats().await?;
        host.shutdown().await;
        if !serve.any_sender() {
            if json {
                println!(
                    "{}",
                    serde_json::json!({
                        "role": "recv",
                        "end": "no sender",
                        "services_refused": stats.services_refused,
                        "dropped_by_reason": crate::drops::to_json(&stats.dropped),
                        "kernel_dropped": stats.kernel_dropped,
                    })
                );
            } else {
                println!("no sender connected");
                if stats.services_refused > 0 {
                    println!(
                        "hellos refused for a service other than {}: {}",
                        app.service(),
                        stats.services_refused
                    );
                }
                print!("{}", crate::drops::render(&stats.dropped));
                print!("{}", crate::drops::render_kernel(stats.kernel_dropped));
            }
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(last) = serve.last_row() {
            if !json {
                print!("{}", render_recv(last));
            }
        }
        let summary = serve.all.summary();
        let senders = serve.sender_summaries();
        let report = &serve.all;
        if json {
            let out = serde_json::json!({
                "role": "recv",
                "end": end.as_str(),
                "intervals": report.intervals,
                "summary": summary,
                "senders": senders,
                "senders_omitted": serve.senders_omitted(),
                "sessions_replaced": stats.sessions_replaced,
                "services_refused": stats.services_refused,
                "intervals_omitted": report.intervals.omitted(),
                "dropped_by_secure_layer": stats.dropped.total(),
                "dropped_by_reason": crate::drops::to_json(&stats.dropped),
                "kernel_dropped": stats.kernel_dropped,
            });
            let mut out = out;
            if serve.messages.seen {
                out["messages"] = serde_json::to_value(serve.messages.report())?;
            }
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            println!("ended: {}", end.as_str());
            print!("summary\n{}", render_recv(&summary));
            for s in &summary.streams {
                println!(
                    "stream {}: received {} ADUs, {:.0} kbit/s",
                    s.id, s.received, s.goodput_kbps
                );
            }
            for s in &senders {
                println!(
                    "sender {} (key {}): {}",
                    s["id"],
                    s["peer"].as_str().unwrap_or("?"),
                    s["end"].as_str().unwrap_or("?")
                );
                for st in s["summary"]["streams"].as_array().into_iter().flatten() {
                    println!(
                        "  stream {}: received {} ADUs, {:.0} kbit/s",
                        st["id"],
                        st["received"],
                        st["goodput_kbps"].as_f64().unwrap_or(0.0)
                    );
                }
            }
            if serve.messages.seen {
                print!("{}", serve.messages.report().render());
            }
            print!("{}", crate::drops::render(&stats.dropped));
            print!("{}", crate::drops::render_kernel(stats.kernel_dropped));
        }
        Ok(ExitCode::SUCCESS)
    })
}
