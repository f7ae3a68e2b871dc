//! Mistakes in the files a user gives, named when the file is read: inputs past their
//! size bound (real files and `/dev/zero`), key files others may read, too many
//! channels; and `horde keygen`'s care with private keys.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{free_port, horde, text, write_recv_config};

/// What a run of `horde` gave, with its own peak memory.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    max_rss_kib: i64,
}

/// Runs `horde` with `args`, failing the test if it takes more than 10 s, and measures
/// its peak resident memory (from `wait4`, so only this process counts).
// The child is reaped by `wait4` rather than `Child::wait`, which gives no rusage.
#[allow(clippy::zombie_processes)]
fn run(dir: &Path, args: &[&str]) -> Run {
    let (out, err) = (dir.join("run.out"), dir.join("run.err"));
    let child = Command::new(env!("CARGO_BIN_EXE_horde"))
        .args(args)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .expect("run horde");
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own child, not yet reaped; the pointers are valid.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        assert!(r >= 0, "wait4: {}", std::io::Error::last_os_error());
        if r == pid {
            break;
        }
        if Instant::now() > deadline {
            // SAFETY: as above; the child is killed and reaped before failing.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::wait4(pid, &mut status, 0, &mut usage);
            }
            panic!("horde {args:?} ran for more than 10 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Run {
        code: libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)),
        stdout: std::fs::read_to_string(&out).unwrap(),
        stderr: std::fs::read_to_string(&err).unwrap(),
        max_rss_kib: usage.ru_maxrss,
    }
}

/// A fresh directory for one test.
fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("horde-inputs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A new key pair in `path`; its public key.
fn keygen(path: &Path) -> String {
    let out = horde(&["keygen", "--out", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).trim().to_string()
}

/// A file of `len` bytes (sparse: it takes no disk, but it is a regular file that
/// size).
fn big_file(path: &Path, len: u64) {
    std::fs::File::create(path).unwrap().set_len(len).unwrap();
}

/// The error of a sender whose file loaded: its channels bind to an address of no
/// interface (TEST-NET-1), so it stops at once after reading every file it names.
const LOADED: &str = "cannot bind 192.0.2.1:0";

/// A sender file with `channels` channels and one CBR stream; `stream_extra` is added
/// to the stream's entry. See [`LOADED`].
fn send_toml(key_file: &str, peer: &str, channels: usize, stream_extra: &str) -> String {
    let mut s = format!("key_file = \"{key_file}\"\npeer_key = \"{peer}\"\nduration_s = 1\n");
    for i in 0..channels {
        s += &format!(
            "[[channels]]\nname = \"c{i}\"\nbind = \"192.0.2.1:0\"\nremote = \"127.0.0.1:9\"\n"
        );
    }
    s += "[[streams]]\nid = 1\nworkload = { kind = \"cbr\", kbps = 40, adu_bytes = 500 }\n";
    s + stream_extra
}

/// The run failed with exit code 1, quickly and in little memory, with one error that
/// names `file`, the kind of file and its limit.
fn assert_refused(run: &Run, file: &Path, kind_and_limit: &str) {
    assert_eq!(run.code, Some(1), "{}", run.stderr);
    assert!(
        run.stderr.contains(&file.display().to_string()),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains(kind_and_limit), "{}", run.stderr);
    // Reading /dev/zero without a bound took gigabytes in seconds.
    assert!(
        run.max_rss_kib < 100 * 1024,
        "peak memory {} KiB: {}",
        run.max_rss_kib,
        run.stderr
    );
}

#[test]
fn oversized_key_config_and_objective_files_are_refused_at_their_limit() {
    let dir = temp_dir("oversized");
    let peer = keygen(&dir.join("peer.key"));
    keygen(&dir.join("s.key"));
    let zero = Path::new("/dev/zero");

    // Key files: a 1 GiB file, a file one byte past the 4 KiB limit whose content is
    // all comment, and /dev/zero.
    const KEY_LIMIT: &str = "key file too large: more than the limit of 4 KiB";
    let huge_key = dir.join("huge.key");
    big_file(&huge_key, 1 << 30);
    let padded_key = dir.join("padded.key");
    let mut padded = std::fs::read_to_string(dir.join("s.key")).unwrap();
    padded += &"#".repeat(4096 + 1 - padded.len() - 1);
    padded += "\n";
    assert_eq!(padded.len(), 4097);
    std::fs::write(&padded_key, &padded).unwrap();
    std::fs::set_permissions(&padded_key, std::fs::Permissions::from_mode(0o600)).unwrap();
    for key in [&huge_key, &padded_key, &zero.to_path_buf()] {
        let cfg = dir.join("send.toml");
        std::fs::write(&cfg, send_toml(key.to_str().unwrap(), &peer, 1, "")).unwrap();
        let r = run(&dir, &["send", cfg.to_str().unwrap()]);
        assert_refused(&r, key, KEY_LIMIT);
    }
    // The same key within the limit is read.
    std::fs::write(&padded_key, &padded[..4096]).unwrap();
    let cfg = dir.join("send.toml");
    std::fs::write(&cfg, send_toml(padded_key.to_str().unwrap(), &peer, 1, "")).unwrap();
    let r = run(&dir, &["send", cfg.to_str().unwrap()]);
    assert!(r.stderr.contains(LOADED), "{}", r.stderr);

    // Configuration files: a 2 GiB file, a valid sender file padded with comments one
    // byte past 1 MiB, and /dev/zero; for `send`, `recv`, `tunnel` and `emu`.
    const CONFIG_LIMIT: &str = "configuration file too large: more than the limit of 1 MiB";
    let huge_cfg = dir.join("huge.toml");
    big_file(&huge_cfg, 2 << 30);
    let padded_cfg = dir.join("padded.toml");
    let mut text = send_toml("s.key", &peer, 1, "");
    let pad = (1 << 20) + 1 - text.len() - 1;
    text = format!("{}\n{text}", "#".repeat(pad));
    assert_eq!(text.len(), (1 << 20) + 1);
    std::fs::write(&padded_cfg, text).unwrap();
    for file in [&huge_cfg, &padded_cfg, &zero.to_path_buf()] {
        let f = file.to_str().unwrap();
        for args in [
            vec!["send", f],
            vec!["recv", f],
            vec!["tunnel", "client", f],
            vec!["emu", f],
        ] {
            let r = run(&dir, &args);
            assert_refused(&r, file, CONFIG_LIMIT);
        }
    }
    let r = run(&dir, &["sim", "/dev/zero"]);
    assert_refused(
        &r,
        zero,
        "scenario file too large: more than the limit of 1 MiB",
    );
    let r = run(&dir, &["status", "/dev/zero"]);
    assert_refused(
        &r,
        zero,
        "status file too large: more than the limit of 16 MiB",
    );

    // Objective files, named by a sender's stream and checked alone.
    const OBJECTIVE_LIMIT: &str = "objective file too large: more than the limit of 1 MiB";
    let huge_objective = dir.join("huge.hose");
    big_file(&huge_objective, 1 << 30);
    for objective in [&huge_objective, &zero.to_path_buf()] {
        let o = objective.to_str().unwrap();
        let cfg = dir.join("send.toml");
        std::fs::write(
            &cfg,
            send_toml("s.key", &peer, 1, &format!("objectives = [\"{o}\"]\n")),
        )
        .unwrap();
        let r = run(&dir, &["send", cfg.to_str().unwrap()]);
        assert_refused(&r, objective, OBJECTIVE_LIMIT);
        // The error is located at the stream's objective in the sender's file.
        let line = std::fs::read_to_string(&cfg)
            .unwrap()
            .lines()
            .position(|l| l.starts_with("objectives"))
            .unwrap()
            + 1;
        assert!(
            r.stderr.contains(&format!("{}:{line}:", cfg.display())),
            "{}",
            r.stderr
        );
        let r = run(&dir, &["hose", "check", o]);
        assert_ne!(r.code, Some(0), "{}", r.stdout);
        let out = r.stdout + &r.stderr;
        assert!(out.contains(OBJECTIVE_LIMIT), "{out}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_key_file_others_may_read_gets_a_warning_as_wg_gives() {
    let dir = temp_dir("exposed");
    let sender = keygen(&dir.join("s.key"));
    let key = dir.join("r.key");
    keygen(&key);
    let port = free_port();
    write_recv_config(&dir, &sender, port);
    let cfg = dir.join("recv.toml");
    let cases = [
        (0o600, None),
        (0o400, None),
        (0o640, Some("group accessible (mode 0640)")),
        (0o644, Some("world accessible (mode 0644)")),
        (0o606, Some("world accessible (mode 0606)")),
    ];
    for (mode, warning) in cases {
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
        let r = run(&dir, &["recv", cfg.to_str().unwrap(), "--duration", "0.2"]);
        let quoted = format!("Warning: `{}' is ", key.display());
        match warning {
            None => assert!(!r.stderr.contains("Warning"), "{mode:o}: {}", r.stderr),
            Some(w) => {
                assert!(r.stderr.contains(&format!("{quoted}{w}")), "{}", r.stderr);
                assert!(r.stderr.contains("chmod 600"), "{}", r.stderr);
            }
        }
        // A warning, not an error: the receiver runs.
        assert_eq!(r.code, Some(0), "{mode:o}: {}", r.stderr);
    }
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn more_channels_than_a_session_opens_are_refused_when_the_file_is_read() {
    let dir = temp_dir("channels");
    let peer = keygen(&dir.join("peer.key"));
    keygen(&dir.join("s.key"));
    const MESSAGE: &str = "a session has at most 256 channels (channel ids are one byte)";

    // A sender: the error names the file, points at the 257th entry's header and gives
    // the count.
    let cfg = dir.join("send.toml");
    let text = send_toml("s.key", &peer, 300, "");
    std::fs::write(&cfg, &text).unwrap();
    let line = text
        .lines()
        .enumerate()
        .filter(|(_, l)| *l == "[[channels]]")
        .nth(256)
        .unwrap()
        .0
        + 1;
    let r = run(&dir, &["send", cfg.to_str().unwrap()]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let want = format!("{}:{line}:", cfg.display());
    assert!(r.stderr.contains(&want), "want {want} in {}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("300 [[channels]] entries: {MESSAGE}")),
        "{}",
        r.stderr
    );
    // 256 is allowed: the file loads.
    std::fs::write(&cfg, send_toml("s.key", &peer, 256, "")).unwrap();
    let r = run(&dir, &["send", cfg.to_str().unwrap()]);
    assert!(r.stderr.contains(LOADED), "{}", r.stderr);

    // A tunnel client, refused before it needs any device.
    let tunnel = dir.join("tunnel.toml");
    let mut t = format!(
        "key_file = \"s.key\"\npeer_key = \"{peer}\"\n[tun]\naddresses = [\"10.77.0.2/24\"]\n"
    );
    for _ in 0..257 {
        t += "[[channels]]\nbind = \"127.0.0.1:0\"\nremote = \"127.0.0.1:9\"\n";
    }
    std::fs::write(&tunnel, t).unwrap();
    let r = run(&dir, &["tunnel", "client", tunnel.to_str().unwrap()]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains(&tunnel.display().to_string()),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains(&format!("257 [[channels]] entries: {MESSAGE}")),
        "{}",
        r.stderr
    );

    // A scenario: the channels joining one pair of hosts.
    let scenario = dir.join("many.toml");
    let mut s = String::from("name = \"many\"\nseed = 1\nduration_s = 1\n");
    for i in 0..257 {
        s += &format!("[[channels]]\nname = \"c{i}\"\nmtu = 1200\nup = {{ rate = {{ model = \"constant\", kbps = 100 }} }}\n");
    }
    s += "[[streams]]\nid = 1\nworkload = { kind = \"cbr\", kbps = 40, adu_bytes = 500 }\n";
    std::fs::write(&scenario, s).unwrap();
    let r = run(&dir, &["sim", scenario.to_str().unwrap()]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(
        r.stderr.contains(&scenario.display().to_string()),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("257 channels join hosts \"a\" and \"b\""),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains(MESSAGE), "{}", r.stderr);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn keygen_creates_private_keys_and_warns_inside_a_git_work_tree() {
    let dir = temp_dir("keygen");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;

    // Outside a repository: no warning; a missing directory is made private too.
    let key = dir.join("etc/horde/a.key");
    let out = horde(&["keygen", "--out", key.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    assert_eq!(mode(&key), 0o600);
    assert_eq!(mode(&dir.join("etc/horde")), 0o700);
    assert!(std::fs::read_to_string(&key)
        .unwrap()
        .contains(text(&out.stdout).trim()));

    // The key is created 0600 whatever the umask, not chmod'ed after: a umask of 0
    // would otherwise leave it readable by all for a moment, or for good.
    let key = dir.join("umask0.key");
    let out = Command::new("sh")
        .args(["-c", "umask 0 && exec \"$0\" keygen --out \"$1\""])
        .arg(env!("CARGO_BIN_EXE_horde"))
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(mode(&key), 0o600);

    // Inside a git working tree (a `.git` directory, or the `.git` file of a linked
    // worktree, above it): a warning naming the tree and where keys belong; the key
    // is still written, privately.
    for git_is_file in [false, true] {
        let repo = dir.join(format!("repo-{git_is_file}"));
        std::fs::create_dir_all(repo.join("configs")).unwrap();
        if git_is_file {
            std::fs::write(repo.join(".git"), "gitdir: /elsewhere\n").unwrap();
        } else {
            std::fs::create_dir_all(repo.join(".git")).unwrap();
        }
        let key = repo.join("configs/sender.key");
        let out = horde(&["keygen", "--out", key.to_str().unwrap()]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let err = text(&out.stderr);
        assert!(
            err.contains(&format!(
                "warning: {} is inside the git working tree {}",
                key.display(),
                repo.display()
            )),
            "{err}"
        );
        assert!(err.contains("/etc/horde/"), "{err}");
        assert_eq!(mode(&key), 0o600);
    }
    std::fs::remove_dir_all(dir).unwrap();
}
