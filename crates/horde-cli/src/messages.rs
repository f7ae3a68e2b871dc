//! `horde send` with a message workload (`[[messages]]` in its file), and the streams
//! beside it if the file declares any: connect, run the classes through the message API
//! and the streams on the same connection, and print each priority's books (and each
//! stream's), as text or JSON.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use horde_apps::send::{Row, Sender};

use crate::peer::{announce_channels, conclude, end_json, exit_code, runtime};
use crate::report::{render_send, render_send_messages};

/// Runs the message workload of `app` (read from `config`) and reports it.
pub fn send(app: Sender, config: &Path, json: bool) -> Result<ExitCode> {
    let our_key = app.our_key();
    let sigint = crate::sigint::install()?;
    runtime()?.block_on(async move {
        let host = app.bind().await?;
        let conn = app
            .connect(&host)
            .await
            .map_err(|e| crate::hint::handshake(e, &our_key, app.peer_key_text()))?;
        let channels = announce_channels(&app, &host, json);
        let outcome = app
            .run_messages(conn, |row| {
                if !json {
                    match row {
                        Row::Streams(s) => print!("{}", render_send(s)),
                        Row::Messages(m) => print!("{}", render_send_messages(m)),
                    }
                }
            })
            .await?;
        let stats = host.stats().await?;
        host.shutdown().await;
        let verdict = outcome.verdict(app.service());
        let (messages, streams) = (&outcome.messages, &outcome.streams);
        if json {
            let streams = streams.as_ref().map(|s| {
                serde_json::json!({
                    "intervals": s.intervals,
                    "intervals_omitted": s.intervals.omitted(),
                    "summary": s.summary,
                    "books": s.books,
                    "unaccounted": s.unaccounted,
                })
            });
            let out = serde_json::json!({
                "role": "send",
                "channels": channels,
                "messages": {
                    "seconds": messages.seconds,
                    "intervals": messages.intervals,
                    "intervals_omitted": messages.intervals.omitted(),
                    "priorities": messages.books,
                    "unaccounted": messages.unaccounted,
                },
                "streams": streams,
                "reconnects": stats.reconnects,
                "interrupted": sigint.interrupted(),
                "end": end_json(&messages.end),
                "exit_code": exit_code(verdict),
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            if let Some(s) = streams {
                print!("summary of the streams\n{}", render_send(&s.summary));
                for b in &s.books {
                    println!("{}", b.describe());
                }
            }
            print!("{}", messages.render());
            println!("connection {}", messages.end.describe());
            let streams_unaccounted = streams
                .as_ref()
                .map(|s| format!("; ADUs unaccounted for: {}", s.unaccounted))
                .unwrap_or_default();
            println!(
                "reconnects: {}; messages unaccounted for: {}{streams_unaccounted}",
                stats.reconnects, messages.unaccounted
            );
        }
        conclude(verdict, "message", "delivered", config)
    })
}
