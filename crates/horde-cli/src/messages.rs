//! `horde send` with a message workload (`[[messages]]` in its file): connect, run the
//! classes through the message API, and print each priority's books, as text or JSON.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use horde_apps::send::Sender;

use crate::peer::{announce_channels, conclude, exit_code, runtime};

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
                    print!("{}", crate::report::render_send_messages(row));
                }
            })
            .await?;
        let stats = host.stats().await?;
        host.shutdown().await;
        let verdict = outcome.verdict(app.service());
        if json {
            let out = serde_json::json!({
                "role": "send",
                "channels": channels,
                "messages": {
                    "seconds": outcome.seconds,
                    "intervals": outcome.intervals,
                    "intervals_omitted": outcome.intervals.omitted(),
                    "priorities": outcome.books,
                    "unaccounted": outcome.unaccounted,
                },
                "reconnects": stats.reconnects,
                "interrupted": sigint.interrupted(),
                "end": {
                    "by": if outcome.end.peer_ended.is_some() { "peer" } else { "local" },
                    "peer_left": outcome.end.peer_left().map(|r| r.as_str()),
                    "gave_up_reconnecting": outcome.end.gave_up,
                    "at_s": outcome.end.at_s,
                    "text": outcome.end.describe(),
                },
                "exit_code": exit_code(verdict),
            });
            println!("{}", serde_json::to_string_pretty(&out)?);
        } else {
            print!("{}", outcome.render());
            println!("connection {}", outcome.end.describe());
            println!(
                "reconnects: {}; messages unaccounted for: {}",
                stats.reconnects, outcome.unaccounted
            );
        }
        conclude(verdict, "message", "delivered", config)
    })
}
