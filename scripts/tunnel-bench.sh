#!/bin/sh
# Tunnel forwarding benchmark: TCP through `horde tunnel` between two namespaces over
# four unshaped veth paths (encrypted, one channel per path), and in the same run a
# user-space WireGuard tunnel (wireguard-go + wg) over the first of the same veth pairs.
# Prints Gbit/s (the TCP transfer's goodput), packets/s (the client TUN device's
# transmitted packets over the transfer; with offloads a super packet counts once) and the
# CPU time both ends of the tunnel spent per byte carried (their processes' user and
# system time, so not the kernel TCP of the sender and receiver) for each, RUNS transfers
# of BYTES each (median).
#
#   sudo sh scripts/tunnel-bench.sh             # after: cargo build --release -p horde-cli
#   RUNS=5 BYTES=500000000 sudo sh scripts/tunnel-bench.sh
#   QDISC=chap sudo sh scripts/tunnel-bench.sh  # the client's ingress queue (docs/tunnel.md)
#   OFFLOAD=off sudo sh scripts/tunnel-bench.sh  # TUN offloads off at both ends (default on)
#   CC=cubic sudo sh scripts/tunnel-bench.sh    # the inner TCP's controller (default: the host's)
#
# Both tunnels carry the same inner MTU (1380). Everything lives in the namespaces
# hbench-a (client) and hbench-b (server), deleted at the end.
set -eu
HORDE=${HORDE:-./target/release/horde}
RUNS=${RUNS:-3}
BYTES=${BYTES:-200000000}
QDISC=${QDISC:-fifo}
OFFLOAD=${OFFLOAD:-on}
case $OFFLOAD in
    on) OFFLOAD_TOML=true ;;
    off) OFFLOAD_TOML=false ;;
    *) echo "tunnel-bench: OFFLOAD must be on or off, not \"$OFFLOAD\"" >&2; exit 2 ;;
esac
MTU=1380
if [ "$(id -u)" != 0 ]; then
    echo "tunnel-bench: skipped: needs root (network namespaces, TUN devices)"
    exit 0
fi
DIR=$(mktemp -d)
A=hbench-a
B=hbench-b

down() {
    for ns in $A $B; do
        for pid in $(ip netns pids $ns 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
    done
    sleep 0.3
    for ns in $A $B; do
        for pid in $(ip netns pids $ns 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
        ip netns del $ns 2>/dev/null || true
    done
    rm -rf "$DIR"
}
trap down EXIT
down 2>/dev/null || true
DIR=$(mktemp -d)

ip netns add $A
ip netns add $B
for i in 1 2 3 4; do
    ip link add hb$i-a netns $A type veth peer name hb$i-b netns $B
    ip -n $A addr add 192.168.8$i.2/24 dev hb$i-a
    ip -n $B addr add 192.168.8$i.1/24 dev hb$i-b
    ip -n $A link set hb$i-a up
    ip -n $B link set hb$i-b up
done
ip -n $A link set lo up
ip -n $B link set lo up

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

# CPU time (user + system, clock ticks) used so far by the processes TUNNEL_PIDS: both
# ends of the tunnel under test.
cpu_ticks() {
    t=0
    for pid in $TUNNEL_PIDS; do
        t=$((t + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
    done
    echo $t
}
HZ=$(getconf CLK_TCK)

# One transfer from A to SERVER_ADDR; DEV is A's tunnel device. Prints "gbps pps cpu",
# cpu being the tunnel's CPU time (both ends) per byte carried, in nanoseconds.
measure() {
    dev=$1; to=$2
    p0=$(ip netns exec $A cat /sys/class/net/$dev/statistics/tx_packets)
    c0=$(cpu_ticks)
    out=$(ip netns exec $A "$HORDE" flow client --connect "$to" --bytes "$BYTES" ${CC:+--cc "$CC"})
    c1=$(cpu_ticks)
    p1=$(ip netns exec $A cat /sys/class/net/$dev/statistics/tx_packets)
    echo "$out" | grep -q '"checksum_ok":true' || { echo "transfer failed: $out" >&2; exit 1; }
    echo "$out" | awk -v p="$((p1 - p0))" -v c="$((c1 - c0))" -v hz="$HZ" -v b="$BYTES" -F'"seconds":' '{split($2, s, ","); split($0, g, "\"goodput_mbps\":"); split(g[2], m, ","); printf "%.3f %.0f %.2f\n", m[1] / 1000, p / s[1], c / hz * 1e9 / b}'
}

report() {
    name=$1; file=$2
    g=$(cut -d' ' -f1 "$file" | median)
    p=$(cut -d' ' -f2 "$file" | median)
    c=$(cut -d' ' -f3 "$file" | median)
    printf '%-52s %8s Gbit/s %10s packets/s %6s ns CPU/byte   (median of %s x %s bytes)\n' "$name" "$g" "$p" "$c" "$RUNS" "$BYTES"
}

# --- Horde: four channels, one per veth pair ---------------------------------------
SRV_PUB=$($HORDE keygen --out "$DIR/server.key")
BUS_PUB=$($HORDE keygen --out "$DIR/client.key")
cat > "$DIR/server.toml" <<TOML
key_file = "server.key"
mtu = $MTU
[tun]
name = "horde0"
addresses = ["10.77.0.1/24"]
offload = $OFFLOAD_TOML
[[interfaces]]
bind = "0.0.0.0:7700"
[[clients]]
key = "$BUS_PUB"
addresses = ["10.77.0.2/32"]
TOML
{
    printf 'key_file = "client.key"\npeer_key = "%s"\nqdisc = "%s"\n[tun]\nname = "horde0"\naddresses = ["10.77.0.2/24"]\noffload = %s\n' "$SRV_PUB" "$QDISC" "$OFFLOAD_TOML"
    for i in 1 2 3 4; do
        printf '[[channels]]\nbind = "192.168.8%s.2:0"\nremote = "192.168.8%s.1:7700"\nmtu = %s\n' $i $i $MTU
    done
} > "$DIR/client.toml"
ip netns exec $B "$HORDE" tunnel server "$DIR/server.toml" > "$DIR/server.log" 2>&1 &
sleep 0.3
ip netns exec $A "$HORDE" tunnel client "$DIR/client.toml" > "$DIR/client.log" 2>&1 &
for _ in $(seq 100); do ip -n $A link show horde0 > /dev/null 2>&1 && break; sleep 0.05; done
ip netns exec $B "$HORDE" flow server --tcp-only --listen 10.77.0.1:5201 > /dev/null 2>&1 &
sleep 0.3
: > "$DIR/horde.txt"
TUNNEL_PIDS=$(pgrep -f "$HORDE tunnel (server|client) $DIR/")
for _ in $(seq "$RUNS"); do measure horde0 10.77.0.1:5201 >> "$DIR/horde.txt"; done
report "horde tunnel (4 paths, encrypted, ingress $QDISC, offload $OFFLOAD)" "$DIR/horde.txt"

# --- WireGuard (user space) over veth pair 1 ------------------------------------------
if ! command -v wireguard-go > /dev/null || ! command -v wg > /dev/null; then
    echo "wireguard-go anchor: skipped: wireguard-go and wg are not installed (apt-get install wireguard-go wireguard-tools)"
    exit 0
fi
umask 077
wg genkey > "$DIR/wg-a.key"; wg pubkey < "$DIR/wg-a.key" > "$DIR/wg-a.pub"
wg genkey > "$DIR/wg-b.key"; wg pubkey < "$DIR/wg-b.key" > "$DIR/wg-b.pub"
# Distinct device names: wireguard-go's control sockets share one directory.
WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1 ip netns exec $A wireguard-go hbwg-a > /dev/null 2>&1
WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1 ip netns exec $B wireguard-go hbwg-b > /dev/null 2>&1
ip netns exec $A wg set hbwg-a listen-port 51820 private-key "$DIR/wg-a.key" \
    peer "$(cat "$DIR/wg-b.pub")" allowed-ips 10.88.0.1/32 endpoint 192.168.81.1:51820
ip netns exec $B wg set hbwg-b listen-port 51820 private-key "$DIR/wg-b.key" \
    peer "$(cat "$DIR/wg-a.pub")" allowed-ips 10.88.0.2/32 endpoint 192.168.81.2:51820
ip -n $A addr add 10.88.0.2/24 dev hbwg-a
ip -n $B addr add 10.88.0.1/24 dev hbwg-b
ip -n $A link set hbwg-a mtu $MTU up
ip -n $B link set hbwg-b mtu $MTU up
ip netns exec $B "$HORDE" flow server --tcp-only --listen 10.88.0.1:5201 > /dev/null 2>&1 &
sleep 0.3
: > "$DIR/wg.txt"
TUNNEL_PIDS=$(pgrep -f "wireguard-go hbwg-")
for _ in $(seq "$RUNS"); do measure hbwg-a 10.88.0.1:5201 >> "$DIR/wg.txt"; done
report "wireguard-go (1 path, encrypted)" "$DIR/wg.txt"
