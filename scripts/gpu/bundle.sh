#!/usr/bin/env bash
# Builds the GPU bundle (make gpu-bundle): one tarball, made on a machine
# without a GPU, that checks, measures and runs hone's CUDA build on a GPU
# host that has only an NVIDIA driver and the CUDA 13 libraries (no Go, no
# compiler, no network):
#
#   dist/hone-gpu-<version>-linux-amd64.tar.gz
#     hone-gpu-<version>-linux-amd64/
#       README.md           what follows, for the GPU host
#       VERSION             version, commit, build date, Go, the CUDA wheels built against
#       run.sh              selftest, device tests, bench, per-kernel profile, PEFT anchor; logs, summary
#       env.sh              finds the GPU and the CUDA 13 libraries, sets LD_LIBRARY_PATH (". ./env.sh")
#       bin/hone-cuda       hone with the CUDA backend (scripts/cuda/build.sh)
#       bin/cuda.test       kernels/cuda's tests built with -tags cuda (the device tests)
#       bin/gpu-bench       bench/gpu with the CUDA backend
#       lib/libcudart.so.13 the CUDA runtime, a fallback when the host has none
#       python/peft_anchor.py  the transformers + PEFT step on the same shapes
#
#   bash scripts/gpu/bundle.sh [-o DIR] [--fake-binaries]
#
# The toolkit comes from NVIDIA's PyPI wheels (scripts/cuda/ensure.sh, once
# per machine); the kernels are compiled by nvcc for sm_80 and sm_90 (+PTX)
# and cached. The finished tarball is unpacked again and its run.sh is run:
# here, without a GPU, it must refuse (exit 2) naming the missing GPU.
# --fake-binaries puts placeholder scripts in bin/ instead of building (the
# packaging test, scripts/gpu/bundle_test.go). VERSION overrides the version
# (default: git describe).
set -euo pipefail
cd "$(dirname "$0")/../.."
outdir=dist
fake=0
while [ $# -gt 0 ]; do
	case "$1" in
	-o) outdir="$2"; shift 2 ;;
	--fake-binaries) fake=1; shift ;;
	*) echo "bundle.sh: unknown argument $1" >&2; exit 64 ;;
	esac
done
start=$(date +%s)
version="${VERSION:-$(git describe --always --dirty 2>/dev/null || echo dev)}"
name="hone-gpu-$version-linux-amd64"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
stage="$tmp/$name"
mkdir -p "$stage/bin" "$stage/lib" "$stage/python" "$outdir"

if [ "$fake" = 1 ]; then
	for b in hone-cuda cuda.test gpu-bench; do
		printf '#!/bin/sh\necho "%s (placeholder of the packaging test) $*"\n' "$b" >"$stage/bin/$b"
		chmod +x "$stage/bin/$b"
	done
	printf 'placeholder\n' >"$stage/lib/libcudart.so.13"
	wheels="(placeholders: --fake-binaries)"
else
	root="$(bash scripts/cuda/ensure.sh | tail -n 1)"
	echo "bundle: building with the CUDA toolkit in $root (the first build compiles every kernel: minutes)" >&2
	# The version goes into hone; -trimpath keeps the build machine's paths out.
	export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath -ldflags=-X=main.version=$version"
	bash scripts/cuda/build.sh -o "$stage/bin/hone-cuda" ./cmd/hone >/dev/null
	bash scripts/cuda/build.sh -o "$stage/bin/gpu-bench" ./bench/gpu >/dev/null
	bash scripts/cuda/build.sh -test -o "$stage/bin/cuda.test" ./kernels/cuda >/dev/null
	cp -L "$root/lib/libcudart.so.13" "$stage/lib/"
	wheels="$(grep '^nvidia' scripts/cuda/requirements.lock | cut -d' ' -f1 | tr '\n' ' ')"
fi
cp scripts/gpu/run.sh scripts/gpu/env.sh "$stage/"
cp scripts/gpu/README.md "$stage/README.md"
cp bench/gpu/peft_anchor.py "$stage/python/"
chmod +x "$stage/run.sh" "$stage/env.sh"
{
	echo "hone $version"
	echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)"
	echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) with $(go version | cut -d' ' -f3-)"
	echo "cuda $wheels"
} >"$stage/VERSION"

tarball="$outdir/$name.tar.gz"
tar -C "$tmp" -czf "$tarball" "$name"

# The tarball as a GPU host gets it: unpacked, its script run. Without a GPU
# here it must refuse cleanly; with one, --check must find the libraries.
check="$tmp/check"
mkdir -p "$check"
tar -C "$check" -xzf "$tarball"
for f in README.md VERSION run.sh env.sh bin/hone-cuda bin/cuda.test bin/gpu-bench lib/libcudart.so.13 python/peft_anchor.py; do
	[ -e "$check/$name/$f" ] || { echo "bundle: $tarball lacks $f" >&2; exit 1; }
done
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU [0-9]'; then
	"$check/$name/run.sh" --check >/dev/null
	echo "bundle: a GPU is here; run.sh --check found it and the CUDA 13 libraries" >&2
else
	set +e
	msg="$("$check/$name/run.sh" --out "$tmp/run" 2>&1)"
	rc=$?
	set -e
	if [ $rc != 2 ] || ! grep -q "no NVIDIA GPU here" <<<"$msg"; then
		echo "bundle: run.sh without a GPU exited $rc, want 2 naming the missing GPU:" >&2
		echo "$msg" >&2
		exit 1
	fi
	echo "bundle: no GPU here; the unpacked run.sh refuses as it should: $(head -n 1 <<<"$msg")" >&2
fi
echo "bundle: $tarball ($(du -h "$tarball" | cut -f1), $(($(date +%s) - start)) s)" >&2
echo "$tarball"
