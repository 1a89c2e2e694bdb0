#!/usr/bin/env bash
# Regenerates scripts/peers/requirements.lock from requirements.in (pins and
# hashes for CPython 3.11 on Linux x86-64). Needs only PyPI; downloads some
# wheels whose metadata PyPI does not serve separately (a few minutes).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${HONE_PEERS_BASE_PYTHON:-$(command -v python3.11 || command -v python3)}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$py" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --upgrade pip
"$tmp/venv/bin/python" "$here/lock.py" "$tmp/venv/bin/pip" "$here/requirements.in" "$here/requirements.lock"
