#!/bin/sh
# Build the Debian package: target/debian/horde_VERSION-1_ARCH.deb.
#
#   sh scripts/deb.sh           build it (installs cargo-deb first when it is missing)
#   sh scripts/deb.sh --check   build it, then install it, check what it installed, remove it (root)
#
# The package carries the binary, a man page per subcommand, bash and zsh completions, the
# systemd unit for `horde up`, and the example configs under /usr/share/doc/horde/examples.
set -eu
cd "$(dirname "$0")/.."

check=false
case "${1:-}" in
    "") ;;
    --check) check=true ;;
    *) echo "usage: sh scripts/deb.sh [--check]" >&2; exit 2 ;;
esac

command -v cargo-deb >/dev/null 2>&1 || cargo install cargo-deb --locked
cargo build --release -p horde-cli

assets=target/release/deb-assets
rm -rf "$assets"
mkdir -p "$assets/man" "$assets/completions"
./target/release/horde man --out "$assets/man" >/dev/null
gzip -9n "$assets"/man/*.1
./target/release/horde completions bash > "$assets/completions/horde"
./target/release/horde completions zsh > "$assets/completions/_horde"

deb=$(cargo deb -p horde-cli --no-build --output target/debian | tail -n 1)
echo "built $deb"

$check || exit 0

# What a user gets from `dpkg -i`: each piece where Debian puts it, and a binary that runs.
if [ "$(id -u)" != 0 ]; then
    echo "scripts/deb.sh --check installs the package and needs root" >&2
    exit 1
fi
fail() { echo "deb check: $*" >&2; dpkg -r horde >/dev/null 2>&1 || true; exit 1; }
dpkg -i "$deb" >/dev/null
for f in /usr/bin/horde \
         /usr/share/man/man1/horde.1.gz /usr/share/man/man1/horde-up.1.gz \
         /usr/share/bash-completion/completions/horde /usr/share/zsh/vendor-completions/_horde \
         /lib/systemd/system/horde-up@.service \
         /usr/share/doc/horde/examples/tunnel-client.toml /usr/share/doc/horde/deploy.md; do
    [ -e "$f" ] || fail "$f is missing"
done
[ "$(stat -c %a /etc/horde)" = 700 ] || fail "/etc/horde is not mode 0700"
/usr/bin/horde --version | grep -q '^horde ' || fail "/usr/bin/horde --version did not run"
grep -q '^ExecStart=/usr/bin/horde up' /lib/systemd/system/horde-up@.service ||
    fail "the unit does not start /usr/bin/horde up"
dpkg -r horde >/dev/null
[ ! -e /usr/bin/horde ] || fail "dpkg -r left /usr/bin/horde behind"
echo "deb check: installed, checked and removed $deb"
