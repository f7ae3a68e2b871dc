#!/bin/sh
# Loss masking through the tunnel: a TCP download of BYTES from the server side to the
# vehicle through `horde tunnel` over two links emulated by `horde shell` (6 Mbit/s,
# 20 ms one way each; 5 % random loss on the second), once per loss-recovery mode of
# the tunnel stream. Prints the transfer's goodput and the tunnel's counters per mode.
#
#   sudo sh scripts/tunnel-loss.sh                   # modes: none oec retransmit
#   MODES="none oec" BYTES=5000000 sudo sh scripts/tunnel-loss.sh
#
# The server runs in namespace htl-srv (the shell's "host" side), the client in the
# shell's namespace; both are deleted at the end.
set -eu
HORDE=${HORDE:-$(pwd)/target/release/horde}
BYTES=${BYTES:-5000000}
MODES=${MODES:-none oec retransmit}
LINKS="--link rate=6mbit,delay=20ms --link rate=6mbit,delay=20ms,loss=0.05"
if [ "$(id -u)" != 0 ]; then
    echo "tunnel-loss: skipped: needs root"
    exit 0
fi
SRV=htl-srv
DIR=$(mktemp -d)
down() {
    for pid in $(ip netns pids $SRV 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
    sleep 1
    for pid in $(ip netns pids $SRV 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns del $SRV 2>/dev/null || true
}
trap 'down; rm -rf "$DIR"' EXIT
down
ip netns add $SRV
ip -n $SRV link set lo up
SRV_PUB=$($HORDE keygen --out "$DIR/server.key")
BUS_PUB=$($HORDE keygen --out "$DIR/client.key")

recovery() {
    case $1 in
        none) echo 'mode = "none"' ;;
        fec*) echo "mode = \"fec\"
percent = ${1#fec}" ;;
        *) echo "mode = \"$1\"" ;;
    esac
}

for mode in $MODES; do
    cat > "$DIR/server.toml" <<TOML
key_file = "server.key"
[tun]
name = "htl0"
addresses = ["10.77.0.1/24"]
[stream.recovery]
$(recovery "$mode")
[[interfaces]]
bind = "0.0.0.0:7700"
[[clients]]
key = "$BUS_PUB"
addresses = ["10.77.0.2/32"]
TOML
    ip netns exec $SRV "$HORDE" tunnel server "$DIR/server.toml" --json > "$DIR/server.json" 2> "$DIR/server.err" &
    spid=$!
    sleep 0.5
    export HORDE DIR SRV_PUB MODE_TOML="$(recovery "$mode")"
    ip netns exec $SRV "$HORDE" shell $LINKS -- sh -c '
o1=$(echo "$HORDE_SHELL_LINK1" | awk -F. "{print \$1\".\"\$2\".\"\$3\".\"(\$4-1)}")
cat > "$DIR/client.toml" <<TOML
key_file = "client.key"
peer_key = "$SRV_PUB"
[tun]
name = "htl0"
addresses = ["10.77.0.2/24"]
[stream.recovery]
$MODE_TOML
[[channels]]
bind = "0.0.0.0:0"
device = "link0"
remote = "$HORDE_SHELL_HOST:7700"
[[channels]]
bind = "0.0.0.0:0"
device = "link1"
remote = "$o1:7700"
TOML
"$HORDE" tunnel client "$DIR/client.toml" --json > "$DIR/client.json" 2> "$DIR/client.err" &
c=$!
# The device exists a moment before its address: wait for the address.
until ip -o addr show dev htl0 2>/dev/null | grep -q '10.77.0.2/'; do sleep 0.05; done
"$HORDE" flow server --tcp-only --listen 10.77.0.2:5201 --count 1 > /dev/null 2>&1 &
f=$!
touch "$DIR/ready"
wait $f
# The answer (count and checksum) may still be crossing the tunnel: stop the client
# only once the sender has it.
until [ -e "$DIR/done" ]; do sleep 0.05; done
kill -INT $c; wait $c' &
    shell=$!
    until [ -e "$DIR/ready" ]; do sleep 0.05; done
    sleep 0.3
    out=$(ip netns exec $SRV "$HORDE" flow client --connect 10.77.0.2:5201 --bytes "$BYTES") || true
    touch "$DIR/done"
    wait $shell
    rm -f "$DIR/ready" "$DIR/done"
    kill -INT $spid; wait $spid || true
    echo "$out" | grep -q '"checksum_ok":true' || { echo "$mode: transfer failed: $out"; exit 1; }
    printf '%-12s %s\n' "$mode" "$(echo "$out" | sed 's/.*"seconds":\([0-9.]*\).*"goodput_mbps":\([0-9.]*\).*/\1 s, \2 Mbit\/s/')"
done
