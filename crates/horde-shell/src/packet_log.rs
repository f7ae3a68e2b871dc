//! `--log DIR` and `--pcap DIR` of `horde shell`: one CSV (and one capture) per link and
//! direction, written from the emulator's packet records.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use horde_emu::{Direction, Fate, PacketRecord};

/// `LINKTYPE_RAW`: each captured packet starts with its IP header.
const LINKTYPE_RAW: u32 = 101;

/// Writers for every link and direction.
pub struct PacketLogs {
    csv: Vec<[BufWriter<File>; 2]>,
    pcap: Vec<[BufWriter<File>; 2]>,
    /// Wall-clock time of the emulator's time zero, for capture timestamps.
    origin: SystemTime,
}

fn file_names(links: usize, ext: &str) -> Vec<[String; 2]> {
    (0..links)
        .map(|i| [format!("link{i}-up.{ext}"), format!("link{i}-down.{ext}")])
        .collect()
}

fn create_all(dir: &Path, links: usize, ext: &str) -> Result<Vec<[BufWriter<File>; 2]>> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    file_names(links, ext)
        .into_iter()
        .map(|[up, down]| {
            let open = |name: &str| {
                let path = dir.join(name);
                File::create(&path)
                    .map(BufWriter::new)
                    .with_context(|| format!("create {}", path.display()))
            };
            Ok([open(&up)?, open(&down)?])
        })
        .collect()
}

impl PacketLogs {
    /// CSVs in `log_dir` and captures in `pcap_dir`, for `links` links.
    pub fn create(log_dir: Option<&Path>, pcap_dir: Option<&Path>, links: usize) -> Result<Self> {
        let mut csv = match log_dir {
            Some(dir) => create_all(dir, links, "csv")?,
            None => Vec::new(),
        };
        for pair in &mut csv {
            for w in pair {
                writeln!(w, "arrival_ms,departure_ms,size,dropped,reason")?;
            }
        }
        let mut pcap = match pcap_dir {
            Some(dir) => create_all(dir, links, "pcap")?,
            None => Vec::new(),
        };
        for pair in &mut pcap {
            for w in pair {
                // Classic pcap header: magic, version 2.4, zone, sigfigs, snaplen, link type.
                w.write_all(&0xa1b2_c3d4u32.to_le_bytes())?;
                w.write_all(&2u16.to_le_bytes())?;
                w.write_all(&4u16.to_le_bytes())?;
                w.write_all(&[0u8; 8])?;
                w.write_all(&65_535u32.to_le_bytes())?;
                w.write_all(&LINKTYPE_RAW.to_le_bytes())?;
            }
        }
        Ok(PacketLogs {
            csv,
            pcap,
            origin: SystemTime::now(),
        })
    }

    /// Whether anything is logged at all.
    pub fn wanted(log_dir: Option<&Path>, pcap_dir: Option<&Path>) -> bool {
        log_dir.is_some() || pcap_dir.is_some()
    }

    pub fn write(&mut self, records: Vec<PacketRecord>) -> Result<()> {
        for r in records {
            let d = match r.dir {
                Direction::Up => 0,
                Direction::Down => 1,
            };
            if let Some(pair) = self.csv.get_mut(r.channel) {
                let departure = r
                    .departure
                    .map_or(String::new(), |t| format!("{:.3}", ms(t)));
                let dropped = u8::from(r.fate != Fate::Delivered);
                let reason = if dropped == 1 { r.fate.as_str() } else { "" };
                writeln!(
                    pair[d],
                    "{:.3},{departure},{},{dropped},{reason}",
                    ms(r.arrival),
                    r.size
                )?;
            }
            if let (Some(pair), Some(payload), Some(at)) =
                (self.pcap.get_mut(r.channel), &r.payload, r.departure)
            {
                let wall = (self.origin + at)
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                let w = &mut pair[d];
                w.write_all(&(wall.as_secs() as u32).to_le_bytes())?;
                w.write_all(&wall.subsec_micros().to_le_bytes())?;
                w.write_all(&(payload.len() as u32).to_le_bytes())?;
                w.write_all(&(payload.len() as u32).to_le_bytes())?;
                w.write_all(payload)?;
            }
        }
        Ok(())
    }

    pub fn flush(&mut self) -> Result<()> {
        for w in self.csv.iter_mut().chain(self.pcap.iter_mut()).flatten() {
            w.flush()?;
        }
        Ok(())
    }
}

fn ms(t: Duration) -> f64 {
    t.as_secs_f64() * 1e3
}
