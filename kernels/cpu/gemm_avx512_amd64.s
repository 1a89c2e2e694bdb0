//go:build amd64

#include "textflag.h"

// AVX-512 matmul micro-kernels (32 ZMM registers, AVX512F instructions
// only; the transposes use AVX2 on Y0..Y15).

// One row of the 12x32 tile: broadcast one value of the packed A panel into
// bc and multiply it with both halves of the B row (Z24, Z25).
#define ROW32(aoff, acc0, acc1, bc) \
	VBROADCASTSS aoff(SI), bc \
	VFMADD231PS Z24, bc, acc0 \
	VFMADD231PS Z25, bc, acc1

// One k step of the 12x32 tile: a 32-column row of the packed B panel
// (Z24, Z25), twelve broadcast values of the packed A panel (rotating over
// Z26..Z31), 24 FMAs into Z0..Z23 (row i in Z2i, Z2i+1).
#define STEP12x32(aoff, boff) \
	VMOVUPS boff(DI), Z24 \
	VMOVUPS boff+64(DI), Z25 \
	ROW32(aoff, Z0, Z1, Z26) \
	ROW32(aoff+4, Z2, Z3, Z27) \
	ROW32(aoff+8, Z4, Z5, Z28) \
	ROW32(aoff+12, Z6, Z7, Z29) \
	ROW32(aoff+16, Z8, Z9, Z30) \
	ROW32(aoff+20, Z10, Z11, Z31) \
	ROW32(aoff+24, Z12, Z13, Z26) \
	ROW32(aoff+28, Z14, Z15, Z27) \
	ROW32(aoff+32, Z16, Z17, Z28) \
	ROW32(aoff+36, Z18, Z19, Z29) \
	ROW32(aoff+40, Z20, Z21, Z30) \
	ROW32(aoff+44, Z22, Z23, Z31)

// C row (32 values at DX) += alpha (Z24) * accumulators lo, hi.
#define STOREROW32(lo, hi) \
	VMOVUPS (DX), Z25 \
	VMOVUPS 64(DX), Z26 \
	VFMADD231PS lo, Z24, Z25 \
	VFMADD231PS hi, Z24, Z26 \
	VMOVUPS Z25, (DX) \
	VMOVUPS Z26, 64(DX) \
	ADDQ R8, DX

// func kern12x32AVX512(k int, a, b, c *float32, ldc int, alpha float32)
// C[12x32] (rows ldc apart) += alpha * sum_p a[12p+i] * b[32p+j]: a is a
// packed 12-row A panel, b a packed 32-column B panel, both k steps long.
TEXT ·kern12x32AVX512(SB), NOSPLIT, $0-44
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	MOVQ CX, R9
	SHRQ $2, R9
	ANDQ $3, CX
	TESTQ R9, R9
	JZ   tail12

loop12:
	PREFETCHT0 384(SI)
	STEP12x32(0, 0)
	PREFETCHT0 448(SI)
	STEP12x32(48, 128)
	PREFETCHT0 512(SI)
	STEP12x32(96, 256)
	STEP12x32(144, 384)
	ADDQ $192, SI
	ADDQ $512, DI
	DECQ R9
	JNZ  loop12

tail12:
	TESTQ CX, CX
	JZ    store12

tailloop12:
	STEP12x32(0, 0)
	ADDQ $48, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  tailloop12

store12:
	VBROADCASTSS alpha+40(FP), Z24
	STOREROW32(Z0, Z1)
	STOREROW32(Z2, Z3)
	STOREROW32(Z4, Z5)
	STOREROW32(Z6, Z7)
	STOREROW32(Z8, Z9)
	STOREROW32(Z10, Z11)
	STOREROW32(Z12, Z13)
	STOREROW32(Z14, Z15)
	STOREROW32(Z16, Z17)
	STOREROW32(Z18, Z19)
	STOREROW32(Z20, Z21)
	STOREROW32(Z22, Z23)
	VZEROUPPER
	RET

// func packT8x8(dst, src *float32, lds, k, ldd int)
// dst[p*ldd+j] = src[j*lds+p] for j < 8, p < k (k a multiple of 8): eight
// k-contiguous rows into eight columns of a packed panel whose k steps are
// ldd floats apart, by 8x8 register transposes (AVX2). The AVX-512 packing
// builds its 12-row A panels and 32-column B panels from these.
TEXT ·packT8x8(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lds+16(FP), R8
	SHLQ $2, R8
	MOVQ k+24(FP), CX
	MOVQ ldd+32(FP), R11
	SHLQ $2, R11
	SHRQ $3, CX
	JZ   donet8
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10
	LEAQ (R11)(R11*2), R12

loopt8:
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(R8*1), Y1
	VMOVUPS (SI)(R8*2), Y2
	VMOVUPS (SI)(R9*1), Y3
	VMOVUPS (R10), Y4
	VMOVUPS (R10)(R8*1), Y5
	VMOVUPS (R10)(R8*2), Y6
	VMOVUPS (R10)(R9*1), Y7
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15
	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xEE, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, (DI)(R11*1)
	VMOVUPS Y10, (DI)(R11*2)
	VMOVUPS Y11, (DI)(R12*1)
	LEAQ (DI)(R11*4), DI
	VMOVUPS Y12, (DI)
	VMOVUPS Y13, (DI)(R11*1)
	VMOVUPS Y14, (DI)(R11*2)
	VMOVUPS Y15, (DI)(R12*1)
	LEAQ (DI)(R11*4), DI
	ADDQ $32, SI
	ADDQ $32, R10
	DECQ CX
	JNZ  loopt8

donet8:
	VZEROUPPER
	RET

// Three A rows (Z12..Z14) times one B row (Z15) into column j's accumulators.
#define FMA3Z(c0, c1, c2) \
	VFMADD231PS Z15, Z12, c0 \
	VFMADD231PS Z15, Z13, c1 \
	VFMADD231PS Z15, Z14, c2

// Fold the upper 256 bits of a ZMM accumulator onto its lower half (Y).
#define FOLD(z, y) \
	VEXTRACTF64X4 $1, z, Y15 \
	VADDPS Y15, y, y

// Horizontal sums of four 8-lane accumulators into X(s0) = [sum s0, sum s1,
// sum s2, sum s3]; then C row (4 values at DX) += alpha (X14) * them.
#define REDUCE4STOREZ(s0, s1, s2, s3, xs0, xs1) \
	VHADDPS s1, s0, s0 \
	VHADDPS s3, s2, s2 \
	VHADDPS s2, s0, s0 \
	VEXTRACTF128 $1, s0, xs1 \
	VADDPS xs1, xs0, xs0 \
	VMOVUPS (DX), xs1 \
	VFMADD231PS xs0, X14, xs1 \
	VMOVUPS xs1, (DX) \
	ADDQ R11, DX

// func dot3x4AVX512(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, alpha float32)
// C[i, j] += alpha * dot(a[i*lda:][:k], b[j*ldb:][:k]) for i < 3, j < 4, as
// dot3x4AVX2 with 16-lane registers; the last k%16 values are read under an
// opmask, so exactly k values per row are read.
TEXT ·dot3x4AVX512(SB), NOSPLIT, $0-60
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R8
	SHLQ $2, R8
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R11
	SHLQ $2, R11
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	MOVQ CX, BX
	SHRQ $4, CX
	ANDQ $15, BX
	TESTQ CX, CX
	JZ   tailz34

loopz34:
	VMOVUPS (SI), Z12
	VMOVUPS (SI)(R8*1), Z13
	VMOVUPS (SI)(R8*2), Z14
	VMOVUPS (DI), Z15
	FMA3Z(Z0, Z4, Z8)
	VMOVUPS (DI)(R9*1), Z15
	FMA3Z(Z1, Z5, Z9)
	VMOVUPS (DI)(R9*2), Z15
	FMA3Z(Z2, Z6, Z10)
	VMOVUPS (DI)(R10*1), Z15
	FMA3Z(Z3, Z7, Z11)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loopz34

tailz34:
	TESTQ BX, BX
	JZ    reducez34
	// K1 = the low k%16 lanes; masked-off lanes load as zero and do not fault.
	MOVQ BX, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z (SI), K1, Z12
	VMOVUPS.Z (SI)(R8*1), K1, Z13
	VMOVUPS.Z (SI)(R8*2), K1, Z14
	VMOVUPS.Z (DI), K1, Z15
	FMA3Z(Z0, Z4, Z8)
	VMOVUPS.Z (DI)(R9*1), K1, Z15
	FMA3Z(Z1, Z5, Z9)
	VMOVUPS.Z (DI)(R9*2), K1, Z15
	FMA3Z(Z2, Z6, Z10)
	VMOVUPS.Z (DI)(R10*1), K1, Z15
	FMA3Z(Z3, Z7, Z11)

reducez34:
	FOLD(Z0, Y0)
	FOLD(Z1, Y1)
	FOLD(Z2, Y2)
	FOLD(Z3, Y3)
	FOLD(Z4, Y4)
	FOLD(Z5, Y5)
	FOLD(Z6, Y6)
	FOLD(Z7, Y7)
	FOLD(Z8, Y8)
	FOLD(Z9, Y9)
	FOLD(Z10, Y10)
	FOLD(Z11, Y11)
	VBROADCASTSS alpha+56(FP), X14
	REDUCE4STOREZ(Y0, Y1, Y2, Y3, X0, X1)
	REDUCE4STOREZ(Y4, Y5, Y6, Y7, X4, X5)
	REDUCE4STOREZ(Y8, Y9, Y10, Y11, X8, X9)
	VZEROUPPER
	RET

// func dot1x4AVX512(k int, a, b *float32, ldb int, c *float32, alpha float32)
// c[j] += alpha * dot(a[:k], b[j*ldb:][:k]) for j < 4: one row of A against
// four of B with two 16-lane k-blocks in flight (8 accumulators); the last
// k%16 values under an opmask.
TEXT ·dot1x4AVX512(SB), NOSPLIT, $0-44
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ ldb+24(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10
	MOVQ c+32(FP), DX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	MOVQ CX, BX
	SHRQ $5, CX
	ANDQ $31, BX
	TESTQ CX, CX
	JZ   tailz14

loopz14:
	VMOVUPS (SI), Z8
	VMOVUPS 64(SI), Z9
	VMOVUPS (DI), Z10
	VFMADD231PS Z10, Z8, Z0
	VMOVUPS (DI)(R9*1), Z11
	VFMADD231PS Z11, Z8, Z1
	VMOVUPS (DI)(R9*2), Z12
	VFMADD231PS Z12, Z8, Z2
	VMOVUPS (DI)(R10*1), Z13
	VFMADD231PS Z13, Z8, Z3
	VMOVUPS 64(DI), Z10
	VFMADD231PS Z10, Z9, Z4
	VMOVUPS 64(DI)(R9*1), Z11
	VFMADD231PS Z11, Z9, Z5
	VMOVUPS 64(DI)(R9*2), Z12
	VFMADD231PS Z12, Z9, Z6
	VMOVUPS 64(DI)(R10*1), Z13
	VFMADD231PS Z13, Z9, Z7
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  loopz14

tailz14:
	CMPQ BX, $16
	JLT  maskz14
	VMOVUPS (SI), Z8
	VMOVUPS (DI), Z10
	VFMADD231PS Z10, Z8, Z0
	VMOVUPS (DI)(R9*1), Z11
	VFMADD231PS Z11, Z8, Z1
	VMOVUPS (DI)(R9*2), Z12
	VFMADD231PS Z12, Z8, Z2
	VMOVUPS (DI)(R10*1), Z13
	VFMADD231PS Z13, Z8, Z3
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, BX

maskz14:
	TESTQ BX, BX
	JZ    reducez14
	MOVQ BX, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z (SI), K1, Z8
	VMOVUPS.Z (DI), K1, Z10
	VFMADD231PS Z10, Z8, Z4
	VMOVUPS.Z (DI)(R9*1), K1, Z11
	VFMADD231PS Z11, Z8, Z5
	VMOVUPS.Z (DI)(R9*2), K1, Z12
	VFMADD231PS Z12, Z8, Z6
	VMOVUPS.Z (DI)(R10*1), K1, Z13
	VFMADD231PS Z13, Z8, Z7

reducez14:
	VADDPS Z4, Z0, Z0
	VADDPS Z5, Z1, Z1
	VADDPS Z6, Z2, Z2
	VADDPS Z7, Z3, Z3
	FOLD(Z0, Y0)
	FOLD(Z1, Y1)
	FOLD(Z2, Y2)
	FOLD(Z3, Y3)
	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VHADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VBROADCASTSS alpha+40(FP), X14
	VMOVUPS (DX), X1
	VFMADD231PS X0, X14, X1
	VMOVUPS X1, (DX)
	VZEROUPPER
	RET

// func fmaLoopAVX512(n int)
// n iterations of 16 independent 16-lane VFMADD231PS on registers only:
// 256 float32 multiply-adds (512 FLOP) per iteration; the AVX-512 FMA peak
// the micro-kernel benchmarks compare with.
TEXT ·fmaLoopAVX512(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17

fmaz:
	VFMADD231PS Z16, Z17, Z0
	VFMADD231PS Z16, Z17, Z1
	VFMADD231PS Z16, Z17, Z2
	VFMADD231PS Z16, Z17, Z3
	VFMADD231PS Z16, Z17, Z4
	VFMADD231PS Z16, Z17, Z5
	VFMADD231PS Z16, Z17, Z6
	VFMADD231PS Z16, Z17, Z7
	VFMADD231PS Z16, Z17, Z8
	VFMADD231PS Z16, Z17, Z9
	VFMADD231PS Z16, Z17, Z10
	VFMADD231PS Z16, Z17, Z11
	VFMADD231PS Z16, Z17, Z12
	VFMADD231PS Z16, Z17, Z13
	VFMADD231PS Z16, Z17, Z14
	VFMADD231PS Z16, Z17, Z15
	DECQ CX
	JNZ  fmaz
	VZEROUPPER
	RET

// Fold a ZMM accumulator's upper 256 bits onto its lower half (AVX512F only:
// VSHUFF64X2 moves lanes 8..15 down, a 512-bit add; the sums are then in y).
#define FOLDZ(z, tmp) \
	VSHUFF64X2 $0xEE, z, z, tmp \
	VADDPS tmp, z, z

// Horizontal sums of four 8-lane accumulators into xs0 = [sum s0, sum s1,
// sum s2, sum s3] (xs1 is clobbered).
#define HSUM4(s0, s1, s2, s3, xs0, xs1) \
	VHADDPS s1, s0, s0 \
	VHADDPS s3, s2, s2 \
	VHADDPS s2, s0, s0 \
	VEXTRACTF128 $1, s0, xs1 \
	VADDPS xs1, xs0, xs0

// C row (4 values at DX) += alpha (xa) * xs; xt is clobbered.
#define STORE4(xs, xt, xa) \
	VMOVUPS (DX), xt \
	VFMADD231PS xs, xa, xt \
	VMOVUPS xt, (DX) \
	ADDQ R11, DX

// Four A rows (Z16..Z19) times one B row (Z20) into column j's accumulators.
#define FMA4Z(c0, c1, c2, c3) \
	VFMADD231PS Z20, Z16, c0 \
	VFMADD231PS Z20, Z17, c1 \
	VFMADD231PS Z20, Z18, c2 \
	VFMADD231PS Z20, Z19, c3

// func dot4x4AVX512(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, alpha float32)
// C[i, j] += alpha * dot(a[i*lda:][:k], b[j*ldb:][:k]) for i < 4, j < 4:
// 16 ZMM accumulators (row i, column j in Z(4j+i)), 8 loads per 16 FMAs; the
// last k%16 values under an opmask. Reads exactly k values per row.
TEXT ·dot4x4AVX512(SB), NOSPLIT, $0-60
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R8
	SHLQ $2, R8
	LEAQ (R8)(R8*2), R12
	MOVQ b+24(FP), DI
	MOVQ ldb+32(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10
	MOVQ c+40(FP), DX
	MOVQ ldc+48(FP), R11
	SHLQ $2, R11
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	MOVQ CX, BX
	SHRQ $4, CX
	ANDQ $15, BX
	TESTQ CX, CX
	JZ   tailz44

loopz44:
	VMOVUPS (SI), Z16
	VMOVUPS (SI)(R8*1), Z17
	VMOVUPS (SI)(R8*2), Z18
	VMOVUPS (SI)(R12*1), Z19
	VMOVUPS (DI), Z20
	FMA4Z(Z0, Z1, Z2, Z3)
	VMOVUPS (DI)(R9*1), Z20
	FMA4Z(Z4, Z5, Z6, Z7)
	VMOVUPS (DI)(R9*2), Z20
	FMA4Z(Z8, Z9, Z10, Z11)
	VMOVUPS (DI)(R10*1), Z20
	FMA4Z(Z12, Z13, Z14, Z15)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loopz44

tailz44:
	TESTQ BX, BX
	JZ    reducez44
	MOVQ BX, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z (SI), K1, Z16
	VMOVUPS.Z (SI)(R8*1), K1, Z17
	VMOVUPS.Z (SI)(R8*2), K1, Z18
	VMOVUPS.Z (SI)(R12*1), K1, Z19
	VMOVUPS.Z (DI), K1, Z20
	FMA4Z(Z0, Z1, Z2, Z3)
	VMOVUPS.Z (DI)(R9*1), K1, Z20
	FMA4Z(Z4, Z5, Z6, Z7)
	VMOVUPS.Z (DI)(R9*2), K1, Z20
	FMA4Z(Z8, Z9, Z10, Z11)
	VMOVUPS.Z (DI)(R10*1), K1, Z20
	FMA4Z(Z12, Z13, Z14, Z15)

reducez44:
	FOLDZ(Z0, Z16)
	FOLDZ(Z1, Z17)
	FOLDZ(Z2, Z18)
	FOLDZ(Z3, Z19)
	FOLDZ(Z4, Z20)
	FOLDZ(Z5, Z21)
	FOLDZ(Z6, Z22)
	FOLDZ(Z7, Z23)
	FOLDZ(Z8, Z24)
	FOLDZ(Z9, Z25)
	FOLDZ(Z10, Z26)
	FOLDZ(Z11, Z27)
	FOLDZ(Z12, Z28)
	FOLDZ(Z13, Z29)
	FOLDZ(Z14, Z30)
	FOLDZ(Z15, Z31)
	// Row i's four columns are Y(i), Y(4+i), Y(8+i), Y(12+i).
	HSUM4(Y0, Y4, Y8, Y12, X0, X4)
	HSUM4(Y1, Y5, Y9, Y13, X1, X5)
	HSUM4(Y2, Y6, Y10, Y14, X2, X6)
	HSUM4(Y3, Y7, Y11, Y15, X3, X7)
	VBROADCASTSS alpha+56(FP), X15
	STORE4(X0, X4, X15)
	STORE4(X1, X4, X15)
	STORE4(X2, X4, X15)
	STORE4(X3, X4, X15)
	VZEROUPPER
	RET
