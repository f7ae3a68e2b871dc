#!/usr/bin/env bash
# Voice (160 B every 20 ms) next to one elastic bulk stream, in real time: `horde emu`
# with scenarios/voice-bulk.toml's three trace-driven links, `horde recv` and
# `horde send` as separate processes, cubic on every channel, with and without voice's
# latency bound, with the bound and each voice ADU sent twice (`latency_copies = 2`), and
# with no bound but voice on the quickest channel's slots (`quickest = true`).
# Prints voice's one-way p50/p95 and bulk's goodput over the links' capacity for each
# run (docs/congestion.md, "Latency objectives").
#
# Usage: scripts/voice-bulk-realtime.sh [SECONDS] [BOUND_MS]   (default 30 and 130)
# Needs target/release/horde (or $HORDE), python3 and jq.
set -euo pipefail
secs=${1:-30}
bound=${2:-130}
root=$(cd "$(dirname "$0")/.." && pwd)
horde=${HORDE:-$root/target/release/horde}
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

ports=($(python3 -c 'import socket
ss=[socket.socket(socket.AF_INET,socket.SOCK_DGRAM) for _ in range(6)]
[s.bind(("127.0.0.1",0)) for s in ss]
print(*[s.getsockname()[1] for s in ss])'))
send_pub=$("$horde" keygen --out "$dir/s.key")
recv_pub=$("$horde" keygen --out "$dir/r.key")

# Link i: trace, one-way delay (both directions), 150 kB uplink buffer.
links=("cell-a 30" "cell-b 40" "cell-c 50")
{
  echo "seed = 1"
  for i in 0 1 2; do
    read -r name ms <<<"${links[$i]}"
    cat <<T
[[channels]]
name = "$name"
listen = "127.0.0.1:${ports[$i]}"
forward_to = "127.0.0.1:${ports[$((i + 3))]}"
up = { rate = { model = "trace", path = "$root/traces/$name.up" }, buffer_bytes = 150000, delay = { model = "constant", ms = $ms } }
down = { delay = { model = "constant", ms = $ms } }
T
  done
} >"$dir/emu.toml"
{
  echo "key_file = \"r.key\""
  echo "allowed_keys = [\"$send_pub\"]"
  for i in 3 4 5; do printf '[[interfaces]]\nbind = "127.0.0.1:%s"\n' "${ports[$i]}"; done
} >"$dir/recv.toml"

# Capacity of the three uplinks over [from, to) s of the emulator's clock, bytes
# (1500 per trace opportunity; traces repeat).
capacity() {
  python3 - "$1" "$2" "$root" <<'P'
import sys
lo, hi, root = float(sys.argv[1]) * 1e3, float(sys.argv[2]) * 1e3, sys.argv[3]
total = 0
for name in ("cell-a", "cell-b", "cell-c"):
    ms = [int(l) for l in open(f"{root}/traces/{name}.up") if l.strip()]
    period = ms[-1]
    k = 0
    while k * period < hi:
        total += sum(1 for t in ms if lo <= k * period + t < hi)
        k += 1
print(total * 1500)
P
}

run() { # $1: label, $2: voice's extra settings
  {
    echo "key_file = \"s.key\""
    echo "peer_key = \"$recv_pub\""
    echo "duration_s = $secs"
    echo "scheduler = \"rrr\""
    for i in 0 1 2; do
      read -r name _ <<<"${links[$i]}"
      printf '[[channels]]\nname = "%s"\nbind = "127.0.0.1:0"\nremote = "127.0.0.1:%s"\nmtu = 1400\ncongestion = { kind = "cubic" }\n' "$name" "${ports[$i]}"
    done
    printf '[[streams]]\nid = 1\nname = "bulk"\nworkload = { kind = "bulk", adu_bytes = 1400 }\n'
    printf '[[streams]]\nid = 2\nname = "voice"\nmax_kbps = 100\n%s\nworkload = { kind = "audio", frame_ms = 20, frame_bytes = 160 }\n' "$2"
  } >"$dir/send.toml"
  (cd "$dir" && exec "$horde" emu emu.toml --duration $((secs + 15)) >emu.out 2>&1) &
  pids=($!)
  local t0; t0=$(date +%s.%N)
  sleep 0.5
  (cd "$dir" && exec "$horde" recv recv.toml --duration $((secs + 10)) --json >recv.json 2>recv.err) &
  pids+=($!)
  sleep 0.5
  local t1; t1=$(date +%s.%N)
  (cd "$dir" && "$horde" send send.toml --json >send.json 2>send.err) || true
  wait "${pids[1]}" || true
  kill "${pids[0]}" 2>/dev/null || true
  wait "${pids[0]}" 2>/dev/null || true
  if ! jq -e '.summary.streams | length == 2' "$dir/recv.json" >/dev/null 2>&1; then
    echo "$1: no result; horde send said:" >&2
    cat "$dir/send.err" >&2
    return 1
  fi
  local s; s=$(jq '.summary' "$dir/recv.json")
  local from; from=$(python3 -c "print($t1 - $t0)")
  local span; span=$(jq '.end_s - .start_s' <<<"$s")
  local cap; cap=$(capacity "$from" "$(python3 -c "print($from + $span)")")
  jq -r --arg name "$1" --argjson cap "$cap" '
    (.streams[] | select(.id == 2)) as $v | (.streams[] | select(.id == 1)) as $b |
    "\($name): voice one-way p50 \($v.one_way_delay_ms.p50 | round) ms, p95 \($v.one_way_delay_ms.p95 | round) ms; "
    + "bulk \($b.goodput_kbps / 1000 * 100 | round / 100) Mbit/s = "
    + "\($b.bytes / $cap * 1000 | round / 10)% of capacity (\($cap * 8 / (.end_s - .start_s) / 1e4 | round / 100) Mbit/s) over \(.end_s - .start_s | . * 10 | round / 10) s"' <<<"$s"
}

run "no bound" ""
run "bound $bound ms" "latency_bound_ms = $bound"
run "bound $bound ms, two copies" "latency_bound_ms = $bound
latency_copies = 2"
run "quickest" "quickest = true"
