//go:build cgo && !cuda

// emu.cc: the kernel sources of csrc/, compiled for the host against the
// CUDA-semantics shim (HONE_CUDA_EMU, set in emu.go) as one translation
// unit. sources.go embeds csrc/ so that editing a kernel rebuilds this.
#include "csrc/attention.cu"
#include "csrc/attention_flash.cu"
#include "csrc/bf16.cu"
#include "csrc/context.cu"
#include "csrc/elementwise.cu"
#include "csrc/embedding.cu"
#include "csrc/logprob.cu"
#include "csrc/reduce.cu"
#include "csrc/rmsnorm.cu"
#include "csrc/rope.cu"
#include "csrc/sample.cu"
#include "csrc/emu/selftest.cuh"
// Global-memory racecheck's store hooks, in the build that instruments
// stores (TestRacecheckGlobal).
#ifdef HONE_EMU_STORE_HOOKS
#include "csrc/emu/store_hooks.h"
#endif
