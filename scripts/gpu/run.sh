#!/usr/bin/env bash
# run.sh: checks and measures hone's CUDA build on this machine's GPU, from
# the unpacked GPU bundle (make gpu-bundle), with nothing but an NVIDIA
# driver (580 or newer: CUDA 13) and the CUDA 13 libraries (a CUDA install,
# or NVIDIA's wheels in a Python's site-packages: env.sh finds them). No Go,
# no compiler, no network.
#
#   ./run.sh [--out DIR] [--quick] [--only STEPS] [--skip STEPS] [--python PY]
#   ./run.sh --check        only look for the GPU and the libraries (env.sh)
#
# Steps, in order, each under its own timeout, each logging to DIR/<step>.log
# (DIR: hone-gpu-run-<date> here by default):
#
#   selftest      bin/hone-cuda selftest --backend cuda: the kernels conformance
#                 suite and the LoRA-step parity on the device (10 min)
#   device-tests  bin/cuda.test -test.run '^TestDevice': kernels/cuda's device
#                 tests, every kernel variant, LoRA step against the CPU (15 min)
#   bench         bin/gpu-bench -compare -lora-autocast both: LoRA-step
#                 tokens/s and MFU, float32 and bf16 (what hone serve --train
#                 runs), bf16 also with its LoRA GEMMs in float32, with the
#                 per-op-class table timed by CUDA events (25 min)
#   profile       per-kernel GPU time of one 0.6B-shape step by Nsight Compute
#                 (ncu), when ncu is installed (15 min)
#   peft-anchor   transformers + PEFT on the same shapes (python/peft_anchor.py),
#                 when the python has torch, transformers and peft (20 min)
#
# --quick runs the 0.6B shape only, one timed step. DIR/summary.txt lists
# each step (pass, FAIL, TIMEOUT, skipped), its time and log, and the
# measured tables. Exit status: 0 when no step failed, 1 when one did, 2 when
# there is no usable GPU here, 3 when the CUDA 13 libraries are missing (both
# before any step runs, with the reason).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="" quick=0 only="" skip="" check=0
while [ $# -gt 0 ]; do
	case "$1" in
	--out) out="$2"; shift 2 ;;
	--quick) quick=1; shift ;;
	--only) only=",$2,"; shift 2 ;;
	--skip) skip=",$2,"; shift 2 ;;
	--python) export PYTHON="$2"; shift 2 ;;
	--check) check=1; shift ;;
	-h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run.sh: unknown argument $1 (--help)" >&2; exit 64 ;;
	esac
done

# shellcheck source=env.sh
. "$here/env.sh"
rc=$?
if [ $rc != 0 ]; then
	echo "run.sh: refusing to run (exit $rc): nothing was measured" >&2
	exit $rc
fi
[ $check = 1 ] && { echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; exit 0; }

[ -n "$out" ] || out="$PWD/hone-gpu-run-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out" || exit 1
summary="$out/summary.txt"
py="${PYTHON:-python3}"
shapes="qwen3-0.6b,qwen3-8b" steps=3
[ $quick = 1 ] && shapes="qwen3-0.6b" steps=1

{
	echo "hone GPU bundle run, $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
	sed 's/^/bundle: /' "$here/VERSION" 2>/dev/null
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
	echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
	echo
} >"$summary"

results=()
failed=0
# step NAME TIMEOUT_SECONDS [--fail-on ERE] COMMAND...: runs COMMAND with
# its output in $out/NAME.log and records the outcome; with --fail-on, a
# zero exit whose log matches ERE fails too (a test that skipped, a bench
# that found no GPU: env.sh found one, so the CUDA runtime could not open it).
step() {
	local name="$1" limit="$2" failon=""
	shift 2
	if [ "$1" = --fail-on ]; then failon="$2"; shift 2; fi
	if [ -n "$only" ] && [[ "$only" != *",$name,"* ]]; then return; fi
	if [[ "$skip" == *",$name,"* ]]; then results+=("$name|skipped (--skip)|0|-"); return; fi
	local log="$out/$name.log" start status
	echo "run.sh: $name (up to $((limit / 60)) min) -> $log" >&2
	start=$(date +%s)
	{ echo "\$ $*"; echo; } >"$log"
	timeout --kill-after=30 "$limit" "$@" >>"$log" 2>&1
	status=$?
	local took=$(($(date +%s) - start)) what
	if [ $status = 0 ] && [ -n "$failon" ] && grep -Eq -- "$failon" "$log"; then
		what="FAIL (log: $(grep -Eo -m 1 -- "$failon" "$log"))"
		failed=1
	else case $status in
	0) what="pass" ;;
	124 | 137) what="TIMEOUT after ${limit}s"; failed=1 ;;
	*) what="FAIL (exit $status)"; failed=1 ;;
	esac; fi
	echo "run.sh: $name: $what in ${took}s" >&2
	results+=("$name|$what|$took|$log")
}
# skipped NAME REASON records a step that cannot run here.
skipped() {
	if [ -n "$only" ] && [[ "$only" != *",$1,"* ]]; then return; fi
	echo "run.sh: $1: skipped: $2" >&2
	results+=("$1|skipped: $2|0|-")
}

cd "$here" || exit 1
step selftest 600 bin/hone-cuda selftest --backend cuda
step device-tests 900 --fail-on '^--- SKIP: TestDevice' bin/cuda.test -test.run '^TestDevice' -test.v -test.timeout 14m
step bench 1500 --fail-on 'not measured: no GPU' bin/gpu-bench -compare -lora-autocast both -shapes "$shapes" -steps "$steps"
ncu_bin="$(command -v ncu || true)"
[ -z "$ncu_bin" ] && [ -x /usr/local/cuda/bin/ncu ] && ncu_bin=/usr/local/cuda/bin/ncu
if [ -n "$ncu_bin" ]; then
	step profile 900 --fail-on 'not measured: no GPU|No kernels were profiled' "$ncu_bin" --clock-control none --metrics gpu__time_duration.sum --csv --print-summary per-kernel \
		bin/gpu-bench -shapes qwen3-0.6b -steps 1 -profile=false
else
	skipped profile "no ncu (Nsight Compute) here; the bench step's per-op-class table (CUDA events) stands in"
fi
if "$py" -c 'import torch, transformers, peft' >/dev/null 2>&1; then
	if "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
		step peft-anchor 1200 "$py" python/peft_anchor.py --shapes "$shapes" --steps "$steps" --json "$out/peft-anchor.jsonl"
	else
		skipped peft-anchor "$py has torch, but torch sees no GPU"
	fi
else
	skipped peft-anchor "$py lacks torch, transformers or peft (--python PY names another)"
fi

{
	printf '%-14s %-34s %8s  %s\n' step outcome seconds log
	for r in "${results[@]}"; do
		IFS='|' read -r n w s l <<<"$r"
		printf '%-14s %-34s %8s  %s\n' "$n" "$w" "$s" "$l"
	done
	for n in bench peft-anchor; do
		if [ -f "$out/$n.log" ]; then
			echo
			echo "== $n"
			grep -v '^\$ ' "$out/$n.log" | sed '/^$/N;/^\n$/D' | tail -n 80
		fi
	done
	if [ -f "$out/profile.log" ]; then
		echo
		echo "== profile: ncu's per-kernel summary (CSV, first 40 rows; all of it in $out/profile.log)"
		grep '^"' "$out/profile.log" | head -n 41
	fi
} >>"$summary"
cat "$summary"
echo "run.sh: summary in $summary" >&2
exit $failed
