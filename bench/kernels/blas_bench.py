#!/usr/bin/python3
"""Matmul GFLOP/s of numpy (Debian's, OpenBLAS) or PyTorch on hone's shapes.

Run by bench/kernels (go run ./bench/kernels), which passes the shapes and
sets the thread count (OPENBLAS_NUM_THREADS / torch.set_num_threads). Prints
one JSON object per shape: {"lib", "op", "m", "k", "n", "wall", "cpu"} with
GFLOP per wall second and per CPU-second of the process (all threads).

Ops follow kernels.Backend.MatMul on row-major float32:
  nt: C[m,n] = A[m,k] * W[n,k]^T   (a linear layer)
  nn: C[m,n] = A[m,k] * B[k,n]     (its input gradient)
  tn: C[m,n] = A[k,m]^T * B[k,n]   (its weight gradient)

usage: blas_bench.py --lib numpy|torch --threads N --seconds S op:m:k:n ...
"""
import argparse
import json
import os
import sys
import time


def timeit(fn, seconds):
    fn()
    n, t0, c0 = 0, time.perf_counter(), time.process_time()
    while True:
        fn()
        n += 1
        el = time.perf_counter() - t0
        if el >= seconds:
            return el / n, (time.process_time() - c0) / n


def blas_loaded():
    """The BLAS library this process mapped: numpy links libblas.so.3, which
    Debian's alternatives (or LD_LIBRARY_PATH) point at OpenBLAS or at the
    reference BLAS."""
    maps = open("/proc/self/maps").read()
    for name, lib in (("openblas", "OpenBLAS"), ("blis", "BLIS"), ("mkl", "MKL"), ("atlas", "ATLAS"),
                      ("/blas/libblas", "reference BLAS")):
        if name in maps:
            return lib
    return "BLAS unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", choices=["numpy", "torch"], required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("shapes", nargs="+")
    args = ap.parse_args()
    if args.lib == "torch":
        import torch
        torch.set_num_threads(args.threads)
        version = "torch " + torch.__version__
        g = torch.Generator().manual_seed(1)
        randn = lambda *s: torch.randn(*s, generator=g, dtype=torch.float32)
        mm = lambda a, b, out: torch.matmul(a, b, out=out)
        empty = lambda *s: torch.empty(*s, dtype=torch.float32)
    else:
        import numpy as np
        version = "numpy " + np.__version__ + " (" + blas_loaded() + ")"
        rng = np.random.default_rng(1)
        randn = lambda *s: rng.standard_normal(s, dtype=np.float32)
        mm = lambda a, b, out: np.matmul(a, b, out=out)
        empty = lambda *s: np.empty(s, dtype=np.float32)
    for spec in args.shapes:
        op, m, k, n = spec.split(":")
        m, k, n = int(m), int(k), int(n)
        c = empty(m, n)
        if op == "nt":
            a, b = randn(m, k), randn(n, k).T
        elif op == "nn":
            a, b = randn(m, k), randn(k, n)
        elif op == "tn":
            a, b = randn(k, m).T, randn(k, n)
        else:
            sys.exit("unknown op " + op)
        wall, cpu = timeit(lambda: mm(a, b, c), args.seconds)
        flop = 2.0 * m * n * k
        print(json.dumps({"lib": version, "op": op, "m": m, "k": k, "n": n,
                          "wall": flop / wall / 1e9, "cpu": flop / cpu / 1e9}), flush=True)


if __name__ == "__main__":
    main()
