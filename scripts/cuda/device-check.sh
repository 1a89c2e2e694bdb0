#!/usr/bin/env bash
# Checks the CUDA backend on this machine's first GPU: installs the toolkit
# if needed (scripts/cuda/ensure.sh), compiles the kernels with nvcc, links
# the cuda-tagged backend against libcudart and libcublas, and runs the
# kernels conformance suite on the device for every kernel variant
# and the LoRA-step parity against the CPU backend (kernels/cuda
# TestCudaTagLinks -> TestDevice, TestDeviceLoRAStep). Without a GPU it reports
# that no device was found and exits 0.
#
# The CUDA 13 runtime needs an NVIDIA driver of the 580 series or newer.
set -euo pipefail
cd "$(dirname "$0")/../.."
HONE_CUDA_HOME="$(bash scripts/cuda/ensure.sh | tail -n 1)"
export HONE_CUDA_HOME HONE_REQUIRE_CUDA=1
go test -count=1 -run 'TestNvccCompiles|TestCudaTagLinks' -v ./kernels/cuda
