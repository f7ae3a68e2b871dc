//! Horde as a contender of `horde bench links --kernel`: `horde recv` on the host and
//! `horde send` inside the shell, as separate processes, with fresh keys. The sender's
//! channels are bound to the shell's link addresses (policy routing keeps each on its
//! link, the path kernel TCP takes) and carry one elastic bulk stream.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use horde_crypto::Keypair;
use horde_sim::scenario::Scenario;

/// The service the bench's receiver listens on.
const SERVICE: u32 = 9;
/// The bulk stream's id.
const STREAM: u32 = 1;

/// A TOML basic string (JSON's escapes are TOML's).
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// The files of one Horde run, in `dir`.
pub struct HordeFiles {
    recv_config: PathBuf,
    sender_key: PathBuf,
    receiver_public: String,
    port: u16,
}

impl HordeFiles {
    /// Keys and the receiver's configuration, listening on a free UDP port of every host
    /// address.
    pub fn create(dir: &Path) -> Result<HordeFiles> {
        let (sender, receiver) = (Keypair::generate(), Keypair::generate());
        let sender_key = dir.join("sender.key");
        let receiver_key = dir.join("receiver.key");
        for (key, path) in [(&sender, &sender_key), (&receiver, &receiver_key)] {
            key.write_file(path)
                .with_context(|| format!("create {}", path.display()))?;
        }
        let port = std::net::UdpSocket::bind("0.0.0.0:0")
            .and_then(|s| s.local_addr())
            .context("find a free UDP port for horde recv")?
            .port();
        let recv_config = dir.join("recv.toml");
        let text = format!(
            "key_file = {}\nallowed_keys = [{}]\nservice = {SERVICE}\nidle_timeout_s = 10\n\n\
             [[interfaces]]\nbind = \"0.0.0.0:{port}\"\n",
            toml_str(&receiver_key.display().to_string()),
            toml_str(&sender.public().to_string()),
        );
        std::fs::write(&recv_config, text)
            .with_context(|| format!("write {}", recv_config.display()))?;
        Ok(HordeFiles {
            recv_config,
            sender_key,
            receiver_public: receiver.public().to_string(),
            port,
        })
    }

    /// `horde recv` on the host; it ends when the sender closes (or `limit` passes).
    pub fn start_receiver(&self, output: &Path, limit: Duration) -> Result<Receiver> {
        let exe = std::env::current_exe().context("find the horde binary")?;
        let json = output.with_extension("json");
        let child = Command::new(exe)
            .arg("recv")
            .arg(&self.recv_config)
            .args(["--json", "--duration", &format!("{}", limit.as_secs_f64())])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&json)?)
            .stderr(std::fs::File::create(output.with_extension("err"))?)
            .spawn()
            .context("start horde recv")?;
        Ok(Receiver {
            child,
            json,
            stderr: output.with_extension("err"),
        })
    }

    /// The script the shell runs: write the sender's configuration, whose addresses only
    /// the shell knows (`$HORDE_SHELL_LINKi`, `$HORDE_SHELL_HOST`), and run `horde send`.
    pub fn sender_script(
        &self,
        dir: &Path,
        s: &Scenario,
        cc: &str,
        duration: Duration,
    ) -> Result<String> {
        let config = dir.join("send.toml");
        let dir_text = config.display().to_string();
        if dir_text.contains(['$', '`', '\\', '\'']) {
            bail!(
                "the temporary directory {dir_text} has a character the sender script cannot carry"
            );
        }
        let adu = s.channels.iter().map(|c| c.mtu).min().unwrap_or(1200);
        let mut toml = format!(
            "key_file = {}\npeer_key = {}\nservice = {SERVICE}\nseed = {}\nduration_s = {}\n\
             scheduler = {}\nreconnect = false\n\n[session]\ncycle_ms = {}\nlookahead_ms = {}\n",
            toml_str(&self.sender_key.display().to_string()),
            toml_str(&self.receiver_public),
            s.seed,
            duration.as_secs_f64(),
            toml_str(&s.scheduler.kind),
            s.scheduler.cycle_ms,
            s.scheduler.lookahead_ms,
        );
        for (i, c) in s.channels.iter().enumerate() {
            toml.push_str(&format!(
                "\n[[channels]]\nname = {}\nbind = \"$HORDE_SHELL_LINK{i}:0\"\n\
                 remote = \"$HORDE_SHELL_HOST:{}\"\nmtu = {}\ncongestion = {{ kind = {} }}\n",
                toml_str(&c.name),
                self.port,
                c.mtu,
                toml_str(cc),
            ));
        }
        toml.push_str(&format!(
            "\n[[streams]]\nid = {STREAM}\nname = \"bulk\"\n\
             workload = {{ kind = \"bulk\", adu_bytes = {adu} }}\n"
        ));
        Ok(format!(
            "cat > '{dir_text}' <<EOF\n{toml}EOF\nexec \"$0\" send '{dir_text}' --json\n"
        ))
    }
}

pub struct Receiver {
    child: Child,
    json: PathBuf,
    stderr: PathBuf,
}

impl Receiver {
    /// Wait up to `limit` for the receiver to end (the sender closed), then the payload
    /// bytes it received within `window` of accepting the sender.
    pub fn finish(mut self, limit: Duration, window: Duration) -> Result<f64> {
        let deadline = Instant::now() + limit;
        while self.child.try_wait()?.is_none() && Instant::now() < deadline {
            super::shell_run::check_interrupt()?;
            std::thread::sleep(Duration::from_millis(50));
        }
        if self.child.try_wait()?.is_none() {
            let _ = horde_emu::sys::interrupt(&self.child);
            std::thread::sleep(Duration::from_secs(1));
        }
        let _ = self.child.kill();
        let status = self.child.wait()?;
        let text = std::fs::read_to_string(&self.json).unwrap_or_default();
        let report: serde_json::Value = serde_json::from_str(&text).with_context(|| {
            format!(
                "horde recv ({status}) left no JSON report; its stderr:{}",
                super::shell_run::tail(&self.stderr, 8)
            )
        })?;
        bytes_within(&report, window.as_secs_f64())
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The share of sent ADUs that `horde send --json` (its report in `path`) declared lost,
/// net of those acknowledged after all.
pub fn declared_loss(path: &Path) -> Result<f64> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("read horde send's report {}", path.display()))?;
    let report: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("horde send's report {} is not JSON", path.display()))?;
    loss_of_books(&report)
}

fn loss_of_books(report: &serde_json::Value) -> Result<f64> {
    let books = report["books"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["id"] == STREAM))
        .context("horde send's report has no books for the bulk stream")?;
    let n = |k: &str| books[k].as_u64().unwrap_or(0);
    Ok(if n("sent") == 0 {
        0.0
    } else {
        n("lost").saturating_sub(n("late_acked")) as f64 / n("sent") as f64
    })
}

/// The bulk stream's bytes in the receiver's interval rows that fall within
/// `window_s` of accepting the sender, the row that straddles the end prorated.
fn bytes_within(report: &serde_json::Value, window_s: f64) -> Result<f64> {
    if report["end"] == "no sender" {
        bail!("horde recv: no sender connected");
    }
    let intervals = report["intervals"]
        .as_array()
        .context("horde recv's report has no intervals")?;
    let mut bytes = 0.0;
    for row in intervals {
        let (start, end) = (
            row["start_s"].as_f64().unwrap_or(0.0),
            row["end_s"].as_f64().unwrap_or(0.0),
        );
        if start >= window_s || end <= start {
            continue;
        }
        let share = ((window_s - start) / (end - start)).min(1.0);
        let b: f64 = row["streams"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["id"] == STREAM)
            .filter_map(|s| s["bytes"].as_u64())
            .sum::<u64>() as f64;
        bytes += b * share;
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bytes_within_the_window_prorate_the_last_row() {
        let report = json!({
            "end": "sender closed",
            "intervals": [
                { "start_s": 0.0, "end_s": 1.0, "streams": [{ "id": 1, "bytes": 1000 }] },
                { "start_s": 1.0, "end_s": 2.0, "streams": [{ "id": 1, "bytes": 2000 }, { "id": 2, "bytes": 7 }] },
                { "start_s": 2.0, "end_s": 3.0, "streams": [{ "id": 1, "bytes": 4000 }] },
            ]
        });
        assert_eq!(bytes_within(&report, 1.5).unwrap(), 2000.0);
        assert_eq!(bytes_within(&report, 10.0).unwrap(), 7000.0);
        let none = json!({ "role": "recv", "end": "no sender" });
        assert!(bytes_within(&none, 1.0)
            .unwrap_err()
            .to_string()
            .contains("no sender"));
    }

    #[test]
    fn declared_loss_is_net_of_late_acks() {
        let report = json!({ "books": [{ "id": 1, "sent": 1000, "lost": 30, "late_acked": 10 }] });
        assert_eq!(loss_of_books(&report).unwrap(), 0.02);
        assert!(loss_of_books(&json!({ "books": [] })).is_err());
    }

    #[test]
    fn the_sender_script_binds_each_channel_to_its_link() {
        let dir = std::env::temp_dir().join(format!("horde-bench-peer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = HordeFiles::create(&dir).unwrap();
        let s = Scenario::from_str(
            include_str!("../../../../scenarios/cellular3.toml"),
            "cellular3.toml",
        )
        .unwrap();
        let script = files
            .sender_script(&dir, &s, "copa", Duration::from_secs(5))
            .unwrap();
        for i in 0..3 {
            assert!(script.contains(&format!("bind = \"$HORDE_SHELL_LINK{i}:0\"")));
        }
        assert_eq!(
            script.matches("congestion = { kind = \"copa\" }").count(),
            3
        );
        assert!(script.contains(&format!("remote = \"$HORDE_SHELL_HOST:{}\"", files.port)));
        assert!(script.contains("duration_s = 5"));
        assert!(script.trim_end().ends_with("--json"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
