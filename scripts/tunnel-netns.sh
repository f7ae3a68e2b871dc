#!/bin/sh
# A Horde tunnel between two network namespaces joined by two veth pairs (two "links"),
# with IPv4 and IPv6 through it. Run as root from the repository root:
#
#   sh scripts/tunnel-netns.sh            # set up, TCP both ways (IPv4, IPv6), tear down
#   KEEP=1 sh scripts/tunnel-netns.sh     # leave it running (tear down: sh scripts/tunnel-netns.sh down)
#
# Namespaces htun-bus (client) and htun-srv (server); links 192.168.71.0/24 and
# 192.168.72.0/24; tunnel 10.77.0.0/24 and fd77::/64. Everything lives inside the two
# namespaces; nothing on the host changes.
set -eu
HORDE=${HORDE:-./target/release/horde}
DIR=${DIR:-$(mktemp -d)}

down() {
    for ns in htun-bus htun-srv; do
        for pid in $(ip netns pids $ns 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
        ip netns del $ns 2>/dev/null || true
    done
}
if [ "${1:-}" = down ]; then down; exit 0; fi
down
# Whatever fails, nothing is left behind (unless asked to keep it running).
[ "${KEEP:-}" = 1 ] || trap down EXIT

# Two namespaces, two links between them.
ip netns add htun-bus
ip netns add htun-srv
for i in 1 2; do
    ip link add veth$i-bus netns htun-bus type veth peer name veth$i-srv netns htun-srv
    ip -n htun-bus addr add 192.168.7$i.2/24 dev veth$i-bus
    ip -n htun-srv addr add 192.168.7$i.1/24 dev veth$i-srv
    ip -n htun-bus link set veth$i-bus up
    ip -n htun-srv link set veth$i-srv up
done
ip -n htun-bus link set lo up
ip -n htun-srv link set lo up

# Keys: each end's public key goes into the other's file.
SRV_PUB=$($HORDE keygen --out "$DIR/server.key")
BUS_PUB=$($HORDE keygen --out "$DIR/client.key")

cat > "$DIR/server.toml" <<TOML
key_file = "server.key"
mtu = 1380
[tun]
name = "horde0"
addresses = ["10.77.0.1/24", "fd77::1/64"]
[[interfaces]]
bind = "0.0.0.0:7700"
[[clients]]
name = "bus-1"
key = "$BUS_PUB"
addresses = ["10.77.0.2/32", "fd77::2/128"]
TOML

cat > "$DIR/client.toml" <<TOML
key_file = "client.key"
peer_key = "$SRV_PUB"
[tun]
name = "horde0"
addresses = ["10.77.0.2/24", "fd77::2/64"]
[[channels]]
name = "link-1"
bind = "0.0.0.0:0"
device = "veth1-bus"
remote = "192.168.71.1:7700"
mtu = 1380
[[channels]]
name = "link-2"
bind = "0.0.0.0:0"
device = "veth2-bus"
remote = "192.168.72.1:7700"
mtu = 1380
TOML

# Wait until LOG has a line starting with TEXT (10 s at most).
wait_for() {
    for _ in $(seq 100); do
        grep -q "^$2" "$1" && return 0
        sleep 0.1
    done
    echo "no \"$2\" in $1 after 10 s:" >&2
    cat "$1" >&2
    exit 1
}
ip netns exec htun-srv "$HORDE" tunnel server "$DIR/server.toml" > "$DIR/server.log" 2>&1 &
# Each end prints that its device is up once the device has its addresses (the device
# itself appears before them, and a listener bound to a missing address fails), and the
# client "connected" once the handshake is done.
wait_for "$DIR/server.log" "tunnel server: device horde0 up"
ip netns exec htun-bus "$HORDE" tunnel client "$DIR/client.toml" > "$DIR/client.log" 2>&1 &
wait_for "$DIR/client.log" "connected"
cat "$DIR/client.log"

# TCP both ways (IPv4 and IPv6) with `horde flow`: each transfer checks every byte.
ip netns exec htun-srv "$HORDE" flow server --tcp-only --listen 10.77.0.1:5201 --count 1 > "$DIR/flow4.log" 2>&1 &
SERVER4=$!
ip netns exec htun-bus "$HORDE" flow server --tcp-only --listen '[fd77::2]:5201' --count 1 > "$DIR/flow6.log" 2>&1 &
SERVER6=$!
wait_for "$DIR/flow4.log" "flow server listening"
wait_for "$DIR/flow6.log" "flow server listening"
ip netns exec htun-bus "$HORDE" flow client --connect 10.77.0.1:5201 --bytes 2000000
ip netns exec htun-srv "$HORDE" flow client --connect '[fd77::2]:5201' --bytes 2000000
wait $SERVER4 $SERVER6
cat "$DIR/flow4.log" "$DIR/flow6.log"

if [ "${KEEP:-}" = 1 ]; then
    echo "running; files in $DIR; stop with: sh scripts/tunnel-netns.sh down"
    exit 0
fi
down
echo "tunnel example: OK"
