// Package cuda is hone's CUDA kernels backend: kernels.Backend over device
// memory, custom kernels (csrc/*.cu) and cuBLAS.
//
// The same Go code runs two ways:
//
//   - with the build tag cuda, over the kernels compiled by nvcc and linked
//     against libcudart and libcublas (New): the real backend, which no GPU
//     has run yet;
//   - without it (cgo only), over the very same csrc/*.cu sources compiled
//     by g++ against a CUDA-semantics shim (csrc/emu: block threads as
//     fibers with a barrier for __syncthreads, warp shuffles and ballots
//     over 32 lanes, shared memory per block, atomics, and the cuBLAS calls
//     hone makes with their column-major semantics): the emulated backend
//     (NewEmulated) that the conformance suite checks on machines without a
//     GPU.
//
// Each kernel comes as a readable version and, where it matters, a faster
// one beside it (the variants); both are held to the same conformance
// suite. DESIGN.md describes the interface changes of the next phase.
package cuda
