#!/bin/sh
# Soak test of `horde send`/`horde recv` over `horde emu`: scripts/soak.sh --minutes N
# (see scripts/soak.py for the checks; needs python3, standard library only).
exec python3 "$(dirname "$0")/soak.py" "$@"
