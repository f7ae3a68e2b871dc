//! `horde send --file` and `horde recv --out`: a file or a pipe over every channel, with
//! its checksum checked at the end; what they print and their exit codes.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use horde_apps::file::recv::{receive_file, FileReceived, Note, RecvEnd};
use horde_apps::file::resume;
use horde_apps::file::send::FileEnd;
use horde_apps::file::sink::Sink;
use horde_apps::file::source::Source;
use horde_apps::recv::Receiver;
use horde_apps::send::Sender;

/// The receiver's bytes differ from the sender's (length or SHA-256).
pub const EXIT_MISMATCH: u8 = 5;
/// The receiver left and did not come back, cannot resume, or gave up.
const EXIT_RECEIVER_LEFT: u8 = 4;

const MB: f64 = 1e6;

/// `send --file PATH`: the source is opened before anything else, so that a missing
/// file is an error at once.
pub fn send(app: Sender, config: &Path, path: &Path, json: bool) -> Result<ExitCode> {
    let source = Source::open(path)?;
    if app.stream_count() > 0 {
        eprintln!(
            "note: --file replaces the {} synthetic stream(s) of {}",
            app.stream_count(),
            config.display()
        );
    }
    let our_key = app.our_key();
    let _sigint = crate::sigint::install()?;
    crate::peer::runtime()?.block_on(async move {
        let host = app.bind().await?;
        let conn = app
            .connect(&host)
            .await
            .map_err(|e| crate::hint::handshake(e, &our_key, app.peer_key_text()))?;
        let channels = app.channels(host.local_addrs());
        if !json {
            println!(
                "sending {} over {} channel(s)",
                source.name(),
                channels.len()
            );
        }
        let sent = app
            .send_file(conn, source, |p| {
                if !json {
                    println!(
                        "{:6.1} s  read {:9.1} MB  confirmed written {:9.1} MB",
                        p.at.as_secs_f64(),
                        p.read as f64 / MB,
                        p.confirmed as f64 / MB
                    );
                }
            })
            .await?;
        let stats = host.stats().await?;
        host.shutdown().await;
        let code = match &sent.end {
            FileEnd::Verified => 0,
            FileEnd::Mismatch { .. } => EXIT_MISMATCH,
            FileEnd::ReceiverLeft { .. } => EXIT_RECEIVER_LEFT,
            FileEnd::Failed { .. } => 1,
        };
        if json {
            let out = serde_json::json!({
                "role": "send",
                "file": sent,
                "reconnects": stats.reconnects,
                "exit_code": code,
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            println!(
                "{} bytes confirmed in {:.2} s: {:.1} Mbit/s; {} pieces sent, {} of them again; \
                 reconnects: {}",
                sent.confirmed,
                sent.seconds,
                sent.mbit_s,
                sent.pieces_sent,
                sent.pieces_resent,
                stats.reconnects
            );
            if let Some(h) = &sent.sha256 {
                println!("sha256 {h}  {} bytes", sent.bytes);
            }
        }
        match &sent.end {
            FileEnd::Verified => {
                if !json {
                    println!("OK: the receiver holds the same {} bytes", sent.bytes);
                }
            }
            FileEnd::Mismatch { total, sha256 } => eprintln!(
                "error: checksum mismatch: the receiver holds {total} bytes with sha256 {sha256}"
            ),
            FileEnd::ReceiverLeft { why } => {
                eprintln!("error: the transfer did not complete: {why}")
            }
            FileEnd::Failed { why } => eprintln!("error: the transfer did not complete: {why}"),
        }
        Ok(ExitCode::from(code))
    })
}

/// `recv --out PATH`: the output is opened before anything else, so that a missing
/// directory is an error at once. Everything but the data goes to stderr, since `-`
/// is standard output.
pub fn recv(app: Receiver, out: &Path, json: bool) -> Result<ExitCode> {
    if json && out == Path::new("-") {
        eprintln!("error: --json prints to standard output, which --out - fills with the data");
        return Ok(ExitCode::from(2));
    }
    let sink = Sink::open(out)?;
    let resume_file = sink.path().map(|p| resume::path_for(p));
    if let Some(p) = &resume_file {
        resume::load(p)?; // a file that is not ours is an error before binding
    }
    let sigint = crate::sigint::install()?;
    let limits = app.file_limits();
    crate::peer::runtime()?.block_on(async move {
        let host = app.bind().await?;
        eprintln!(
            "listening on {:?} for service {}; writing {}",
            host.local_addrs(),
            app.service(),
            if out == Path::new("-") {
                "standard output".into()
            } else {
                out.display().to_string()
            }
        );
        let listener = host.listen(app.service());
        let got = receive_file(
            listener,
            sink,
            &limits,
            || sigint.interrupted(),
            |n| match n {
                Note::Connected(id) => eprintln!("sender connected (session {id})"),
                Note::Resuming(n) => eprintln!("resuming: {n} bytes are written already"),
                Note::StartingOver => eprintln!("a new transfer: starting over"),
                Note::Progress { at, written } => {
                    eprintln!(
                        "{:6.1} s  written {:9.1} MB",
                        at.as_secs_f64(),
                        written as f64 / MB
                    )
                }
                Note::Text(t) => eprintln!("{t}"),
            },
        )
        .await?;
        host.shutdown().await;
        report(&got, json, resume_file.as_deref())
    })
}

fn report(got: &FileReceived, json: bool, resume_file: Option<&Path>) -> Result<ExitCode> {
    let code = match &got.end {
        RecvEnd::Verified => 0,
        RecvEnd::Mismatch { .. } => EXIT_MISMATCH,
        RecvEnd::Incomplete { .. } => 1,
    };
    if json {
        let out = serde_json::json!({ "role": "recv", "file": got, "exit_code": code });
        println!("{}", serde_json::to_string_pretty(&out)?);
    }
    eprintln!(
        "{} bytes in {:.2} s: {:.1} Mbit/s{}",
        got.bytes,
        got.seconds,
        got.mbit_s,
        got.resumed_from
            .map_or(String::new(), |n| format!(" (resumed at {n} bytes)"))
    );
    match &got.end {
        RecvEnd::Verified => eprintln!(
            "OK: sha256 {}  {} bytes",
            got.sha256.as_deref().unwrap_or("?"),
            got.bytes
        ),
        RecvEnd::Mismatch { expected_sha256, expected_bytes } => eprintln!(
            "error: checksum mismatch: got {} bytes with sha256 {}, the sender read {expected_bytes} \
             with sha256 {expected_sha256}",
            got.bytes,
            got.sha256.as_deref().unwrap_or("?")
        ),
        RecvEnd::Incomplete { why } => {
            let kept = match resume_file {
                Some(p) if p.exists() => format!(
                    "; {} keeps where it stands: run recv again with the same --out while the \
                     sender still runs",
                    p.display()
                ),
                _ => String::new(),
            };
            eprintln!("error: the transfer did not complete: {why}; {} bytes written{kept}", got.bytes)
        }
    }
    Ok(ExitCode::from(code))
}
