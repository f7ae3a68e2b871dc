#!/usr/bin/env python3
"""Soak test of `horde send` / `horde recv` over the link emulator (`horde emu`).

Runs for --minutes N with scripted link outages (in the emulator's schedule) and
restarts (sender and receiver each killed with SIGKILL, or stopped with SIGINT, and
started again), then checks:

  * memory: each process's VmRSS, sampled every few seconds, does not grow by more
    than --rss-limit after warm-up (median of the last quarter against the first
    quarter; 5% for runs of 5 minutes or more, whose warm-up is the first minute, 10%
    for shorter ones); the JSON also gives the same figures for RssAnon (RSS less the
    binary's and libraries' pages);
  * accounting: every sender that exits by itself or on SIGINT balances its books
    (sent = acked + lost + dropped + abandoned, "unaccounted" 0), and for every sender
    that lived inside one receiver's lifetime the receiver delivered each acked ADU
    (acked <= received <= acked + lost + abandoned, per stream);
  * stalls: no gap over 2 s between receiver intervals that delivered data, outside the
    scripted outages and restarts (each excused until 2 s after it ends);
  * lifetimes: the emulator and the receivers end only when the soak stops them.

Progress lines go to stderr; the verdict and a JSON object to stdout (and --json FILE).
A check with nothing to look at (e.g. no sender lived inside one receiver) is "no data"
(null in the JSON, listed under "no_data"), not a failure. Exit status 0 when no check
failed and at least one had data, 1 otherwise, 2 on a usage or setup error.
Standard library only.
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

STALL_LIMIT_S = 2.0
RESUME_GRACE_S = 2.0
# Within 10 % for short (CI) runs, whose few samples are noisier; 5 % for long ones.
RSS_GROWTH_LIMIT_SHORT = 1.10
RSS_GROWTH_LIMIT_LONG = 1.05
# The main stream: 100 ADUs/s of 500 bytes (400 kbit/s) unless --rate says otherwise,
# then ADUs of 100 bytes.
DEFAULT_RATE = 100
RATE_ADU_BYTES = 100


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kb(pid):
    """(VmRSS, RssAnon) in kB, or None. RssAnon leaves out the pages of the binary and
    its libraries, which code paths run for the first time (an outage's, a reconnect's)
    bring in: bounded by their size, and what the rest of RSS grows by."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return int(fields["VmRSS"].split()[0]), int(fields["RssAnon"].split()[0])
    except (OSError, KeyError, ValueError):
        return None


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        return None
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def plan(total_s):
    """The scripted events: outages (emulator schedule) and process stops.

    Returns (outages, sender_stops, receiver_stops); an outage is (start, end, links),
    a stop is (time, signal name)."""
    outages, sender_stops, receiver_stops = [], [], []
    if total_s >= 300:
        # Every 100 s: one link down for 10 s at +20 (alternating), both down for 5 s
        # at +50. Sender stopped every 300 s (SIGKILL, SIGINT alternately); receiver
        # killed at 37% and stopped with SIGINT at 70% of the run.
        for k, base in enumerate(range(0, int(total_s) - 60, 100)):
            outages.append((base + 20, base + 30, ["a"] if k % 2 == 0 else ["b"]))
            outages.append((base + 50, base + 55, ["a", "b"]))
        for k, t in enumerate(range(300, int(total_s) - 30, 300)):
            sender_stops.append((float(t), "KILL" if k % 2 == 0 else "INT"))
        receiver_stops = [(round(0.37 * total_s, 1), "KILL"), (round(0.70 * total_s, 1), "INT")]
    else:
        # Short (CI) run: the receiver is killed early, so that the senders after the
        # sender's own kill live inside one receiver and can be checked against it.
        outages.append((0.12 * total_s, 0.24 * total_s, ["a"]))
        outages.append((0.45 * total_s, 0.45 * total_s + 2.0, ["a", "b"]))
        receiver_stops = [(0.30 * total_s, "KILL")]
        sender_stops = [(0.62 * total_s, "KILL"), (0.80 * total_s, "INT")]
    return outages, sender_stops, receiver_stops


def write_configs(d, horde, total_s, outages, rate):
    def keygen(name):
        out = subprocess.run([horde, "keygen", "--out", os.path.join(d, name)],
                             check=True, capture_output=True, text=True)
        return out.stdout.strip()

    rkey, skey = keygen("r.key"), keygen("s.key")
    rport = free_port()
    ports = {"a": free_port(), "b": free_port()}
    delays = {"a": 20, "b": 35}
    adu_bytes = 500 if rate == DEFAULT_RATE else RATE_ADU_BYTES
    stream_kbps = rate * adu_bytes * 8 / 1000
    # Either link alone carries the stream (with headers) while the other is down.
    link_kbps = max(2000, int(stream_kbps * 2.5))
    buffer_bytes = max(64000, link_kbps * 1000 // 8 // 10)
    emu = ["seed = 7\n"]
    for name in ("a", "b"):
        steps = []
        for start, end, links in outages:
            if name in links:
                steps.append(f'{{ at_s = {start:.2f}, state = "down" }}')
                steps.append(f'{{ at_s = {end:.2f}, state = "up" }}')
        emu.append(
            f'[[channels]]\nname = "{name}"\nlisten = "127.0.0.1:{ports[name]}"\n'
            f'forward_to = "127.0.0.1:{rport}"\n'
            f'up = {{ rate = {{ model = "constant", kbps = {link_kbps} }}, '
            f'buffer_bytes = {buffer_bytes}, '
            f'delay = {{ model = "constant", ms = {delays[name]} }}, '
            f'loss = {{ model = "bernoulli", p = 0.005 }} }}\n'
            f'down = {{ delay = {{ model = "constant", ms = {delays[name]} }} }}\n'
            f'schedule = [{", ".join(steps)}]\n'
        )
    with open(os.path.join(d, "emu.toml"), "w") as f:
        f.write("".join(emu))
    with open(os.path.join(d, "recv.toml"), "w") as f:
        f.write(f'key_file = "r.key"\nallowed_keys = ["{skey}"]\n'
                f'[[interfaces]]\nbind = "127.0.0.1:{rport}"\n')
    with open(os.path.join(d, "send.toml"), "w") as f:
        f.write(
            f'key_file = "s.key"\npeer_key = "{rkey}"\nduration_s = {int(total_s) + 60}\n'
            + "".join(f'[[channels]]\nname = "{n}"\nbind = "127.0.0.1:0"\n'
                      f'remote = "127.0.0.1:{ports[n]}"\n' for n in ("a", "b"))
            + '[[streams]]\nid = 1\nname = "cbr"\n'
              f'workload = {{ kind = "cbr", kbps = {stream_kbps:g}, adu_bytes = {adu_bytes} }}\n'
              '[[streams]]\nid = 2\nname = "audio"\nmax_kbps = 100\n'
              'workload = { kind = "audio" }\n'
        )


class Proc:
    """One process instance: its lifetime, how it ended and its output."""

    def __init__(self, role, index, argv, t0, on_line=None):
        self.role, self.index, self.t0 = role, index, t0
        self.start = time.monotonic() - t0
        self.end = None
        self.how = None
        self.stop_requested = None
        self.lines = []
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, bufsize=1)
        self.pid = self.p.pid
        self.err = []
        self.on_line = on_line
        self.readers = [threading.Thread(target=self._read, daemon=True),
                        threading.Thread(target=self._read_err, daemon=True)]
        for r in self.readers:
            r.start()

    def _read(self):
        for line in self.p.stdout:
            now = time.monotonic() - self.t0
            self.lines.append((now, line.rstrip("\n")))
            if self.on_line:
                self.on_line(self, now, line.rstrip("\n"))

    def _read_err(self):
        for line in self.p.stderr:
            self.err.append(line.rstrip("\n"))

    def signal(self, name):
        # A process that already ended keeps "exited by itself", which the checks report.
        if self.p.poll() is not None:
            return
        self.stop_requested = (time.monotonic() - self.t0, name)
        os.kill(self.pid, getattr(signal, "SIG" + name))

    def wait(self, timeout):
        try:
            self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            self.how = "killed after not exiting"
        for r in self.readers:
            r.join(timeout=5)
        self.end = time.monotonic() - self.t0
        if self.how is None:
            self.how = (f"SIG{self.stop_requested[1]}" if self.stop_requested
                        else "exited by itself")
        return self.p.returncode

    def alive(self):
        return self.p.poll() is None

    def text(self):
        return "\n".join(l for _, l in self.lines)


ROW = re.compile(r"^(\d+\.\d+)-(\d+\.\d+)\s+(\d+)\s+(\d+)\s")
CONNECTED = re.compile(r"^sender (\d+) connected")
PER_SENDER = re.compile(r"^sender (\d+) \(key [^)]*\): (.*)$")
PER_STREAM = re.compile(r"^\s+stream (\d+): received (\d+) ADUs")


class Receiver:
    """Parses a receiver's text output as it arrives: per-interval rows of the
    stream table (timestamped on arrival) and connection lines."""

    def __init__(self):
        self.proc_index = 0
        self.table = None
        self.in_summary = False
        self.intervals = []  # (wall_start, wall_end, received over all streams)
        self.pending = None
        self.connected = {}  # (receiver, connection number) -> wall time of its line

    def on_line(self, proc, now, line):
        if proc.index != self.proc_index:
            # A new receiver process: its rows are not part of the last one's summary.
            self.proc_index, self.table, self.in_summary = proc.index, None, False
        if line.startswith("interval s"):
            self.table = "stream" if "  stream  " in line else "channel"
            return
        if line.strip() == "summary":
            self.in_summary = True
            return
        m = CONNECTED.match(line)
        if m:
            self.connected[(proc.index, int(m.group(1)))] = now
            return
        m = ROW.match(line)
        if m and self.table == "stream" and not self.in_summary:
            a, b, n = float(m.group(1)), float(m.group(2)), int(m.group(4))
            key = (proc.index, m.group(1), m.group(2))
            if self.pending and self.pending[0] == key:
                self.pending[3] += n
            else:
                self.pending = [key, now - (b - a), now, n]
                self.intervals.append(self.pending)


def per_sender_report(text):
    """Per connection: how it ended and what each stream received (text summary)."""
    out, current = {}, None
    for line in text.splitlines():
        m = PER_SENDER.match(line)
        if m:
            current = int(m.group(1))
            out[current] = {"end": m.group(2), "received": {}}
            continue
        m = PER_STREAM.match(line)
        if m and current is not None:
            out[current]["received"][int(m.group(1))] = int(m.group(2))
        elif not line.startswith("  "):
            current = None
    return out


def covered(a, b, windows):
    """Length of [a, b] covered by the union of windows."""
    total, cursor = 0.0, a
    for s, e in sorted(windows):
        s, e = max(s, cursor), min(e, b)
        if e > s:
            total += e - s
            cursor = e
    return total


def all_ok(results):
    """A check over several items: True if every one passed, False if one failed, None
    ("no data") when there was nothing to check (say, no sender lived inside one
    receiver in a short run)."""
    if not results:
        return None
    return all(results)


def accounting_check(senders):
    """Every sender that printed a report balanced it; a sender that should have printed
    one and did not fails. None when no sender printed a report (all were SIGKILLed)."""
    results = []
    for e in senders:
        if "balanced" in e:
            results.append(e["balanced"])
        elif e.get("report", 1) is not None:
            results.append(False)  # no report where one was due
    return all_ok(results)


def passed(checks):
    """The run passes when no check failed and at least one had data."""
    return not any(ok is False for ok in checks.values()) and any(
        ok is True for ok in checks.values())


def status(ok):
    return "no data" if ok is None else ("ok" if ok else "FAILED")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, required=True, help="run length in minutes")
    ap.add_argument("--horde", default=None, help="horde binary (default: target/release/horde)")
    ap.add_argument("--dir", default=None, help="working directory for keys, configs, logs")
    ap.add_argument("--json", default=None, help="also write the JSON verdict to this file")
    ap.add_argument("--rate", type=int, default=DEFAULT_RATE,
                    help=f"ADUs per second of the main stream (default {DEFAULT_RATE}, of 500 "
                         f"bytes; any other rate uses {RATE_ADU_BYTES}-byte ADUs)")
    ap.add_argument("--rss-limit", type=float, default=None,
                    help="largest RSS growth ratio after warm-up (default 1.05 for runs of "
                         "5 minutes or more, 1.10 for shorter ones)")
    ap.add_argument("--sample-s", type=float, default=None,
                    help="RSS sampling period (default 0.5 s, 5 s for runs of 5 minutes or more)")
    args = ap.parse_args()
    if not args.minutes > 0:
        ap.error("--minutes must be positive")
    if not args.rate > 0:
        ap.error("--rate must be positive")
    total_s = args.minutes * 60.0
    horde = args.horde or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                       "target", "release", "horde")
    if not os.access(horde, os.X_OK):
        ap.error(f"no horde binary at {horde} (build it or pass --horde)")
    d = args.dir or f"/tmp/horde-soak-{os.getpid()}"
    os.makedirs(d, exist_ok=True)
    long_run = total_s >= 300
    sample_s = args.sample_s or (5.0 if long_run else 0.5)
    warmup_s = 60.0 if long_run else 5.0
    rss_limit = args.rss_limit or (RSS_GROWTH_LIMIT_LONG if long_run
                                   else RSS_GROWTH_LIMIT_SHORT)
    progress_s = 30.0 if long_run else 5.0

    outages, sender_stops, receiver_stops = plan(total_s)
    write_configs(d, horde, total_s, outages, args.rate)
    cfg = lambda n: os.path.join(d, n)  # noqa: E731

    t0 = time.monotonic()
    now = lambda: time.monotonic() - t0  # noqa: E731
    rx = Receiver()
    samples = []  # (t, role, index, VmRSS kB, RssAnon kB)
    procs = []
    excused = [(s, e + RESUME_GRACE_S) for s, e, links in outages if len(links) == 2]
    events = []

    def log(msg):
        print(f"[{now():7.1f} s] {msg}", file=sys.stderr, flush=True)

    emu = Proc("emu", 0, [horde, "emu", cfg("emu.toml"), "--duration", str(int(total_s) + 30),
                          "--report-every", "60"], t0)
    procs.append(emu)
    time.sleep(0.3)
    receivers = [Proc("recv", 0, [horde, "recv", cfg("recv.toml"), "--server"], t0, rx.on_line)]
    procs.append(receivers[0])
    time.sleep(0.3)

    def start_sender(index, duration):
        return Proc("send", index, [horde, "send", cfg("send.toml"), "--json",
                                    "--duration", f"{max(duration, 1.0):.1f}"], t0)

    senders = [start_sender(0, total_s - now())]
    procs.append(senders[0])
    excused.append((0.0, senders[0].start + RESUME_GRACE_S))
    log(f"soak for {total_s:.0f} s in {d}: {len(outages)} outages, "
        f"{len(sender_stops)} sender and {len(receiver_stops)} receiver stops")

    pending = sorted([(t, "send", s) for t, s in sender_stops]
                     + [(t, "recv", s) for t, s in receiver_stops]
                     + [(s, "outage", f"{'+'.join(l)} down {e - s:.0f} s") for s, e, l in outages])
    next_sample = 0.0
    next_progress = progress_s

    def restart(role, sig):
        stopped_at = now()
        if role == "send":
            old = senders[-1]
            old.signal(sig)
            old.wait(30)
            new = start_sender(len(senders), total_s - now())
            senders.append(new)
        else:
            old = receivers[-1]
            old.signal(sig)
            old.wait(30)
            time.sleep(1.0 if sig == "KILL" else 0.0)
            new = Proc("recv", len(receivers), [horde, "recv", cfg("recv.toml"), "--server"],
                       t0, rx.on_line)
            receivers.append(new)
        procs.append(new)
        excused.append((stopped_at, new.start + RESUME_GRACE_S))
        events.append({"t_s": round(stopped_at, 2), "what": f"{role} SIG{sig}",
                       "restarted_s": round(new.start, 2)})
        log(f"{role} #{old.index} stopped with SIG{sig} (exit {old.p.returncode}); "
            f"#{new.index} started")

    while now() < total_s and senders[-1].alive():
        t = now()
        while pending and pending[0][0] <= t:
            _, role, what = pending.pop(0)
            if role == "outage":
                events.append({"t_s": round(t, 2), "what": f"outage {what}"})
                log(f"scripted outage: {what}")
            else:
                restart(role, what)
        if t >= next_sample:
            for p in (emu, receivers[-1], senders[-1]):
                kb = rss_kb(p.pid) if p.alive() else None
                if kb is not None:
                    samples.append((now(), p.role, p.index, *kb))
            next_sample = t + sample_s
        if t >= next_progress:
            last = rx.intervals[-1][3] if rx.intervals else 0
            rss = {r: kb for _, r, _, kb, _ in samples[-3:]}
            log(f"send #{senders[-1].index} rss {rss.get('send', '?')} kB, "
                f"recv #{receivers[-1].index} rss {rss.get('recv', '?')} kB, "
                f"emu rss {rss.get('emu', '?')} kB; last interval delivered {last} ADUs")
            next_progress = t + progress_s
        time.sleep(0.05)

    # The last sender ends by its own duration; then the receiver is stopped with SIGINT.
    senders[-1].wait(60)
    excused.append((senders[-1].end - 3.5, float("inf")))
    time.sleep(1.5)
    receivers[-1].signal("INT")
    receivers[-1].wait(30)
    emu.signal("INT")
    emu.wait(30)
    end_s = now()
    log("all processes stopped; checking")

    # Accounting: every sender that printed a report balances it.
    accounting = []
    for s in senders:
        entry = {"index": s.index, "start_s": round(s.start, 2), "end_s": round(s.end, 2),
                 "how": s.how, "exit": s.p.returncode}
        if s.how == "SIGKILL":
            entry["report"] = None
        else:
            try:
                rep = json.loads(s.text())
            except ValueError:
                entry["error"] = "no JSON report: " + " | ".join(s.err[-3:])
                accounting.append(entry)
                continue
            streams = rep["summary"]["streams"]
            entry["reconnects"] = rep.get("reconnects")
            entry["unaccounted"] = rep.get("unaccounted")
            entry["streams"] = {st["id"]: {k: st[k] for k in
                                           ("sent", "acked", "lost", "dropped", "abandoned")}
                                for st in streams}
            entry["balanced"] = rep.get("unaccounted") == 0 and all(
                st["sent"] == st["acked"] + st["lost"] + st["dropped"] + st["abandoned"]
                for st in streams)
        accounting.append(entry)

    # Agreement: senders that lived inside a receiver that printed its report.
    agreement = []
    for r in receivers:
        if r.how == "SIGKILL":
            continue
        conns = per_sender_report(r.text())
        for s, entry in zip(senders, accounting):
            if not entry.get("streams") or not (r.start <= s.start and s.end <= r.end):
                continue
            ids = [c for (ri, c), t in rx.connected.items()
                   if ri == r.index and c in conns and s.start <= t <= s.end]
            received = {}
            for c in ids:
                for sid, n in conns[c]["received"].items():
                    received[sid] = received.get(sid, 0) + n
            ok = True
            per = {}
            for sid, b in entry["streams"].items():
                got = received.get(sid, 0)
                good = b["acked"] <= got <= b["acked"] + b["lost"] + b["abandoned"]
                ok &= good
                per[sid] = {"acked": b["acked"], "received": got, "ok": good}
            agreement.append({"sender": s.index, "receiver": r.index, "connections": ids,
                              "streams": per, "ok": ok})

    # Stalls: gaps between intervals that delivered data, minus the excused windows.
    data = sorted((s, e) for _, s, e, n in rx.intervals if n > 0)
    points = [(0.0, 0.0)] + data + [(end_s, end_s)]
    gaps, stalls, raw_gaps = [], [], []
    for (s0, e0), (s1, e1) in zip(points, points[1:]):
        if s1 > e0:
            open_s = (s1 - e0) - covered(e0, s1, excused)
            gaps.append(open_s)
            if s1 - e0 >= 1.0:
                raw_gaps.append({"from_s": round(e0, 2), "to_s": round(s1, 2),
                                 "unexcused_s": round(open_s, 2)})
            if open_s > STALL_LIMIT_S:
                stalls.append({"from_s": round(e0, 2), "to_s": round(s1, 2),
                               "unexcused_s": round(open_s, 2)})

    # Memory: per process instance, after warm-up.
    rss = []
    for p in procs:
        mine = [(kb, anon) for t, role, idx, kb, anon in samples
                if role == p.role and idx == p.index and t - p.start >= warmup_s]
        if len(mine) < 8:
            continue
        xs, anons = [kb for kb, _ in mine], [anon for _, anon in mine]
        q = len(xs) // 4
        first, last = median(xs[:q]), median(xs[-q:])
        first_anon, last_anon = median(anons[:q]), median(anons[-q:])
        rss.append({"role": p.role, "index": p.index, "samples": len(xs),
                    "first_quarter_kb": first, "last_quarter_kb": last,
                    "min_kb": min(xs), "max_kb": max(xs),
                    "growth": round(last / first, 4), "ok": last <= rss_limit * first,
                    "anon_first_quarter_kb": first_anon, "anon_last_quarter_kb": last_anon,
                    "anon_growth": round(last_anon / first_anon, 4)})

    # Lifetimes: the emulator and the receivers end only when the soak stops them.
    early_exits = [{"role": p.role, "index": p.index, "end_s": round(p.end, 2),
                    "exit": p.p.returncode, "stderr": p.err[-3:]}
                   for p in procs if p.role in ("emu", "recv") and p.how == "exited by itself"]

    checks = {
        "no_early_exit": not early_exits,
        "accounting": accounting_check(accounting),
        "agreement": all_ok([a["ok"] for a in agreement]),
        # No delivering interval at all is one stall over the whole run, not "no data".
        "no_stall": not stalls,
        "rss_flat": all_ok([r["ok"] for r in rss]),
    }
    verdict = {
        "minutes": args.minutes, "elapsed_s": round(end_s, 1), "dir": d,
        "rate_adus_per_s": args.rate, "rss_limit": rss_limit,
        "pass": passed(checks), "checks": checks,
        "no_data": [name for name, ok in checks.items() if ok is None],
        "events": events,
        "outages": [{"from_s": s, "to_s": e, "links": l} for s, e, l in outages],
        "senders": accounting, "agreement": agreement,
        "delivering_intervals": len(data),
        "longest_unexcused_gap_s": round(max(gaps, default=0.0), 2),
        "gaps_over_1s": raw_gaps, "stalls": stalls, "rss": rss, "rss_samples": len(samples),
        "early_exits": early_exits,
    }
    text = json.dumps(verdict, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    for name, ok in checks.items():
        print(f"{name}: {status(ok)}", file=sys.stderr)
    empty = f" (no data: {', '.join(verdict['no_data'])})" if verdict["no_data"] else ""
    print(f"verdict: {'PASS' if verdict['pass'] else 'FAIL'}{empty}", file=sys.stderr)
    print(text)
    return 0 if verdict["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
