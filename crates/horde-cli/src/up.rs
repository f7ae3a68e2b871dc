//! `horde up CONFIG` and `horde down CONFIG`: a tunnel end with the host's network set up
//! around it, in the manner of `wg-quick` (docs/deploy.md).
//!
//! `up` applies the plan of `horde_tunnel::deploy` (per-channel policy routing on a
//! client, forwarding and NAT on a server), records each change with its undo in a state
//! file, runs the tunnel in the foreground, and undoes everything when the tunnel ends.
//! While it runs it puts back a channel's route when its interface comes back (the kernel
//! drops a device's routes when it goes down), and on a client's reload gives a device
//! it does not route yet a table of its own. `down` undoes what a state file records,
//! for an `up` that was killed.

use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use horde_tunnel::config::ClientConfig;
use horde_tunnel::deploy::{self, LinkRoute, Step, UpConfig};
use serde::{Deserialize, Serialize};

use crate::tunnel::{self, Loaded, OnReload, RunArgs};

/// How often `up` checks that each channel's table still has its route.
const ROUTE_CHECK: Duration = Duration::from_secs(1);

#[derive(clap::Args)]
pub struct UpArgs {
    #[command(flatten)]
    run: RunArgs,
    /// Where the record of the changes is kept, for `horde down` after a crash.
    #[arg(long, value_name = "DIR", default_value = "/run/horde")]
    state_dir: PathBuf,
}

#[derive(clap::Args)]
pub struct DownArgs {
    /// The tunnel file `horde up` was started with.
    config: PathBuf,
    /// Where `horde up` kept its record.
    #[arg(long, value_name = "DIR", default_value = "/run/horde")]
    state_dir: PathBuf,
}

impl Loaded {
    fn read(path: &Path) -> Result<Loaded> {
        let text = horde_config::input::read_to_string(path, horde_config::input::Kind::CONFIG)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let table: toml::Table = toml::from_str(&text)
            .with_context(|| format!("{}: not a TOML file", path.display()))?;
        if table.contains_key("peer_key") {
            Ok(Loaded::Client(tunnel::load_file(path)?))
        } else if table.contains_key("clients") {
            Ok(Loaded::Server(tunnel::load_file(path)?))
        } else {
            bail!(
                "{}: neither a tunnel client file (it has peer_key) nor a server file (it has [[clients]])",
                path.display()
            )
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Loaded::Client(_) => "client",
            Loaded::Server(_) => "server",
        }
    }

    fn tun(&self) -> &str {
        match self {
            Loaded::Client(c) => &c.tun.name,
            Loaded::Server(s) => &s.tun.name,
        }
    }
}

/// What a state file holds: the changes made, in order.
#[derive(Serialize, Deserialize, Default)]
struct State {
    config: PathBuf,
    steps: Vec<Step>,
}

fn state_file(dir: &Path, role: &Loaded) -> PathBuf {
    dir.join(format!("{}-{}.json", role.tun(), role.name()))
}

/// Runs one command; its stderr on failure.
fn exec(argv: &[String]) -> Result<String> {
    let out = Process::new(&argv[0])
        .args(&argv[1..])
        .output()
        .with_context(|| format!("cannot run {} (is it installed?)", argv[0]))?;
    if !out.status.success() {
        bail!(
            "`{}` failed: {}",
            argv.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The gateway of `device`'s default route in the main table, if it has one.
fn gateway(device: &str, v6: bool) -> Option<std::net::IpAddr> {
    let family = if v6 { "-6" } else { "-4" };
    let out = exec(&[
        "ip".into(),
        family.into(),
        "-j".into(),
        "route".into(),
        "show".into(),
        "default".into(),
        "dev".into(),
        device.into(),
    ])
    .ok()?;
    let routes: Vec<serde_json::Value> = serde_json::from_str(&out).ok()?;
    routes
        .iter()
        .find_map(|r| r["gateway"].as_str()?.parse().ok())
}

/// Undo `steps` in reverse; every undo is tried, failures are reported.
fn undo(steps: &[Step]) {
    for step in steps.iter().rev() {
        for argv in &step.undo {
            if let Err(e) = exec(argv) {
                eprintln!("warning: undoing \"{}\": {e:#}", step.what);
            }
        }
    }
}

fn write_state(path: &Path, state: &State) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(path, serde_json::to_vec_pretty(state)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Undo what an earlier `up` recorded at `path`, if anything.
fn undo_recorded(path: &Path) -> Result<bool> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(false);
    };
    let state: State = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a horde up state file", path.display()))?;
    undo(&state.steps);
    std::fs::remove_file(path).with_context(|| format!("cannot remove {}", path.display()))?;
    Ok(true)
}

fn plan(role: &Loaded) -> Result<(Vec<Step>, Vec<LinkRoute>, UpConfig)> {
    Ok(match role {
        Loaded::Client(c) => {
            let links = deploy::client_links(c, gateway, present);
            (deploy::client_plan(&c.up, &links), links, c.up.clone())
        }
        Loaded::Server(s) => {
            let read = |path: &str| std::fs::read_to_string(path).unwrap_or_else(|_| "0".into());
            let was = deploy::ForwardingWas {
                ipv4: read("/proc/sys/net/ipv4/ip_forward"),
                ipv6: read("/proc/sys/net/ipv6/conf/all/forwarding"),
            };
            (
                deploy::server_plan(&s.up, s, &was),
                Vec::new(),
                s.up.clone(),
            )
        }
    })
}

/// What `up` has changed so far and the links it routes, shared by the tunnel's reloads
/// and the route check.
struct Routing {
    up: UpConfig,
    /// Link `i` has table `up.table + i`.
    links: Vec<LinkRoute>,
    state: State,
    path: PathBuf,
}

impl Routing {
    /// Record `step` in the state file, then apply it. A step that fails is undone and
    /// dropped from the record.
    fn apply(&mut self, step: Step) -> Result<()> {
        self.state.steps.push(step);
        if let Err(e) = write_state(&self.path, &self.state) {
            self.state.steps.pop();
            return Err(e);
        }
        let step = self.state.steps.last().expect("just pushed");
        if let Err(e) = step.apply.iter().try_for_each(|argv| exec(argv).map(drop)) {
            let step = self.state.steps.pop().expect("just pushed");
            undo(std::slice::from_ref(&step));
            write_state(&self.path, &self.state)?;
            return Err(e.context(format!("setting up \"{}\"", step.what)));
        }
        Ok(())
    }

    /// On a reload: a table, rule and route for each device the file now names and `up`
    /// does not route yet. A failure is a warning; the channel is still added.
    fn route_new_devices(&mut self, cfg: &ClientConfig) {
        let wanted = deploy::client_links(cfg, gateway, present);
        for (link, step) in deploy::reload_plan(&self.up, &self.links, &wanted) {
            let what = step.what.clone();
            match self.apply(step) {
                Ok(()) => {
                    eprintln!("up: {what}");
                    self.links.push(link);
                }
                Err(e) => eprintln!(
                    "warning: reload: no policy route for {}: {e:#}",
                    link.device
                ),
            }
        }
    }
}

fn present(device: &str) -> bool {
    Path::new("/sys/class/net").join(device).exists()
}

/// Puts back each link's route when its table has lost it, until `stop`. Links a reload
/// adds are checked from the next round on.
fn keep_routes(routing: Arc<Mutex<Routing>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(ROUTE_CHECK);
        let (up, links) = {
            let r = routing.lock().expect("routing lock");
            (r.up.clone(), r.links.clone())
        };
        for (i, link) in links.iter().enumerate() {
            let table = (up.table + i as u32).to_string();
            let family = if link.v6 { "-6" } else { "-4" };
            let shown = exec(&[
                "ip".into(),
                family.into(),
                "route".into(),
                "show".into(),
                "table".into(),
                table,
            ]);
            let now = LinkRoute {
                gateway: gateway(&link.device, link.v6).or(link.gateway),
                ..link.clone()
            };
            // A table that never had a route (its device was not there at the start)
            // does not exist: `ip` fails on it.
            let Ok(shown) = shown.map(|s| s.trim().to_string()) else {
                restore(&up, i, &now);
                continue;
            };
            if shown.is_empty() {
                restore(&up, i, &now);
            } else if let Some(g) = now
                .gateway
                .filter(|g| !shown.contains(&format!("via {g} ")))
            {
                // A modem that appeared got its gateway after its route was restored
                // (or a new one): the route must go through it.
                if exec(&deploy::link_route(&up, i, &now)).is_ok() {
                    eprintln!("channel {i}: {}'s route now goes via {g}", link.device);
                }
            }
        }
    }
}

/// Puts back link `i`'s route in its table.
fn restore(up: &UpConfig, i: usize, link: &LinkRoute) {
    if exec(&deploy::link_route(up, i, link)).is_ok() {
        eprintln!(
            "channel {i}: {} is back; its route is restored",
            link.device
        );
    }
}

pub fn up(args: UpArgs) -> Result<ExitCode> {
    anyhow::ensure!(
        horde_emu::sys::is_root(),
        "horde up changes routes and creates a TUN device: run it as root"
    );
    let role = Loaded::read(args.run.config())?;
    let path = state_file(&args.state_dir, &role);
    if undo_recorded(&path)? {
        eprintln!("undid what an earlier `horde up` left ({})", path.display());
    }
    let (steps, links, up) = plan(&role)?;
    let is_client = matches!(role, Loaded::Client(_));
    let routing = Arc::new(Mutex::new(Routing {
        up,
        links: Vec::new(),
        state: State {
            config: args.run.config().to_path_buf(),
            steps: Vec::new(),
        },
        path: path.clone(),
    }));
    for step in steps {
        let what = step.what.clone();
        let mut r = routing.lock().expect("routing lock");
        if let Err(e) = r.apply(step) {
            undo(&r.state.steps);
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        eprintln!("up: {what}");
    }
    routing.lock().expect("routing lock").links = links;
    let stop = Arc::new(AtomicBool::new(false));
    // A client's reload may add links, so its routes are watched even if it has none yet.
    let watcher = is_client.then(|| {
        let (routing, stop) = (routing.clone(), stop.clone());
        std::thread::spawn(move || keep_routes(routing, stop))
    });
    // Runs on the tunnel's thread while it reloads: the few `ip` commands of a new device
    // come before its channel's first datagram.
    let on_reload: OnReload = {
        let routing = routing.clone();
        Box::new(move |cfg| routing.lock().expect("routing lock").route_new_devices(cfg))
    };
    let result = tunnel::run_loaded(&args.run, role, is_client.then_some(on_reload));
    stop.store(true, Ordering::Relaxed);
    if let Some(w) = watcher {
        let _ = w.join();
    }
    undo(&routing.lock().expect("routing lock").state.steps);
    let _ = std::fs::remove_file(&path);
    eprintln!("down: every change undone");
    result
}

pub fn down(args: DownArgs) -> Result<ExitCode> {
    let role = Loaded::read(&args.config)?;
    let path = state_file(&args.state_dir, &role);
    if undo_recorded(&path)? {
        println!("undid what `horde up` recorded in {}", path.display());
    } else {
        println!("nothing to undo: no {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
