#!/bin/bash
# End to end, before/after and PyTorch, interleaved: the model and trainer
# benchmarks on the tiny preset with the generic Go kernels (the code before
# the assembly kernels, built at GOAMD64=v3 as the Makefile used to) and with
# the default variant, then bench/model/torch_bench.py and
# scripts/torch/trainer_bench.py under a python with torch.
#
# usage: bench/kernels/e2e.sh [PYTHON_WITH_TORCH] [ROUNDS]   (from the repository root)
PY=${1:-${HONE_PEERS_DIR:-$HOME/.cache/hone/peers}/venv/bin/python}
ROUNDS=${2:-2}
for r in $(seq "$ROUNDS"); do
  echo "=== round $r load $(cut -d' ' -f1-3 /proc/loadavg)"
  for v in generic avx2; do
    echo "--- model $v"
    HONE_KERNELS=$v GOAMD64=v3 go test -run XXX -bench 'Prefill/tiny|Decode/tiny|TrainStep' -benchtime 1s ./model/ 2>&1 | grep Bench
    echo "--- trainer $v"
    HONE_KERNELS=$v GOAMD64=v3 go test -run XXX -bench 'TrainStep/tiny' -benchtime 3x ./trainer/ 2>&1 | grep Bench
  done
  if "$PY" -c 'import torch' 2>/dev/null; then
    echo "--- torch model"
    "$PY" bench/model/torch_bench.py --seconds 1 --threads 2 2>&1 | grep -v "^matmul"
    echo "--- torch trainer"
    "$PY" scripts/torch/trainer_bench.py --preset tiny --iters 3 2>&1 | tail -3
  fi
done
echo "=== end load $(cut -d' ' -f1-3 /proc/loadavg)"
