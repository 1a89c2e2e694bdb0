#!/usr/bin/env bash
# Installs NVIDIA's CUDA compiler, runtime and cuBLAS from their PyPI wheels
# (scripts/cuda/requirements.lock, pinned with hashes) and prints, on its last
# line, the toolkit root (bin/nvcc, include/, lib/).
#
# The toolkit lives outside the clone, ${HONE_CUDA_DIR:-$HOME/.cache/hone/cuda}/toolkit,
# shared by CI runs and clones on one machine. It is installed only when
# missing or when the lock's sha256 differs from the stamp written by the
# last successful install.
#
#   scripts/cuda/ensure.sh              install if needed, print the root
#   scripts/cuda/ensure.sh --print-only print the root if it is current, else
#                                       exit 1 (never installs)
#
# No GPU or driver is needed: the wheels are the compiler (nvcc, cicc,
# ptxas, fatbinary, nvlink), the headers and the shared libraries (libcudart,
# libcublas, libcublasLt). Host compiler: the system g++ (Debian's g++ 12).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
lock="$here/requirements.lock"
dir="${HONE_CUDA_DIR:-$HOME/.cache/hone/cuda}"
root="$dir/toolkit"
stamp="$root/.hone-lock-sha256"
want="$(sha256sum "$lock" | cut -d' ' -f1)"

current() { [ -x "$root/bin/nvcc" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }

if [ "${1:-}" = "--print-only" ]; then
	if current; then echo "$root"; exit 0; fi
	echo "cuda: no current toolkit in $root (run: bash scripts/cuda/ensure.sh)" >&2
	exit 1
fi

mkdir -p "$dir"
# One installer at a time (CI and a developer may share the machine).
exec 9>"$dir/.lock"
flock 9
if current; then echo "$root"; exit 0; fi

py=""
for c in python3.11 python3; do
	if command -v "$c" >/dev/null 2>&1 && "$c" -m pip --version >/dev/null 2>&1; then
		py="$(command -v "$c")"; break
	fi
done
if [ -z "$py" ]; then
	echo "cuda: need a python3 with pip to download the wheels (apt-get install python3-pip)" >&2
	exit 1
fi

start=$(date +%s)
wheels="$dir/wheels"
new="$dir/toolkit.new"
rm -rf "$wheels" "$new"
mkdir -p "$wheels" "$new"
echo "cuda: downloading $(grep -c '^nvidia' "$lock") pinned wheels into $wheels" >&2
# The wheels are py3-none-manylinux: any CPython's pip fetches them. They are
# unpacked rather than pip-installed: the toolkit is not a Python package.
"$py" -m pip download --quiet --disable-pip-version-check --no-deps --require-hashes \
	--only-binary=:all: -r "$lock" -d "$wheels" >&2
for w in "$wheels"/*.whl; do
	"$py" -m zipfile -e "$w" "$new"
done
# nvidia/cu13 is the toolkit root nvcc.profile expects (TOP = bin/..).
mv "$new/nvidia/cu13" "$new/root"
chmod -R u+rwX,go+rX "$new/root"
# zipfile does not restore modes: the executables are the bin/ ones.
chmod +x "$new/root/bin/"* "$new/root/nvvm/bin/"*
# The wheels ship only versioned sonames; the linker's -lcudart wants the
# unversioned names.
for so in "$new/root/lib/"lib*.so.*; do
	base="${so%%.so.*}.so"
	[ -e "$base" ] || ln -s "$(basename "$so")" "$base"
done
rm -rf "$root"
mv "$new/root" "$root"
rm -rf "$new" "$wheels"
# The compiler must run (it needs no GPU).
"$root/bin/nvcc" --version >&2
echo "$want" >"$stamp"
echo "cuda: installed in $(( $(date +%s) - start )) s" >&2
echo "$root"
