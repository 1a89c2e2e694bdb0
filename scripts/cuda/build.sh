#!/usr/bin/env bash
# Builds a Go main package with the real CUDA backend (-tags cuda): the
# toolkit from NVIDIA's wheels (scripts/cuda/ensure.sh), csrc/*.cu compiled by
# nvcc into libhonecuda.a (by kernels/cuda's TestNvccCompiles, so the flags
# are the tested ones; cached in ~/.cache/hone/cuda/obj), linked against
# libcudart and libcublas with an rpath to the toolkit's lib/.
#
#   bash scripts/cuda/build.sh                      bin/hone-cuda from ./cmd/hone
#   bash scripts/cuda/build.sh -o OUT ./bench/gpu   another package
#   bash scripts/cuda/build.sh -test -o OUT ./kernels/cuda
#                                                   a package's test binary (go test -c):
#                                                   the device tests (TestDevice*) of the GPU bundle
#
# No GPU is needed to build. The binary needs the toolkit's lib/ where it was
# built (rpath) and, to run on a GPU, an NVIDIA driver of the 580 series or
# newer (CUDA 13). Without a GPU it runs and says so: hone selftest --backend
# cuda exits 2 with the runtime's reason, bench/gpu prints "not measured".
set -euo pipefail
cd "$(dirname "$0")/../.."
out=bin/hone-cuda
test=0
while [ $# -gt 0 ]; do
	case "$1" in
	-o) out="$2"; shift 2 ;;
	-test) test=1; shift ;;
	*) break ;;
	esac
done
pkg="${1:-./cmd/hone}"
HONE_CUDA_HOME="$(bash scripts/cuda/ensure.sh | tail -n 1)"
export HONE_CUDA_HOME HONE_REQUIRE_CUDA=1
# The first run compiles and caches the library; the second finds it in
# the cache and names the folder.
go test -count=1 -run '^TestNvccCompiles$' ./kernels/cuda >/dev/null
obj="$(go test -count=1 -v -run '^TestNvccCompiles$' ./kernels/cuda | sed -n 's/.*nvcc objects cached in //p' | tail -n 1)"
if [ ! -f "$obj/libhonecuda.a" ]; then
	echo "cuda: no libhonecuda.a after TestNvccCompiles (got '$obj')" >&2
	exit 1
fi
lib="$HONE_CUDA_HOME/lib"
if [ "$test" = 1 ]; then
	CGO_ENABLED=1 CGO_LDFLAGS="-L$obj -L$lib -Wl,-rpath,$lib" go test -c -tags cuda -o "$out" "$pkg"
else
	CGO_ENABLED=1 CGO_LDFLAGS="-L$obj -L$lib -Wl,-rpath,$lib" go build -tags cuda -o "$out" "$pkg"
fi
echo "$out"
