//go:build amd64

#include "textflag.h"

// AVX2 + FMA matmul micro-kernels (16 YMM registers).

// One k step of the 6x16 tile: two 8-lane rows of the packed B panel, six
// broadcast values of the packed A panel, twelve FMAs into Y0..Y11.
#define STEP6x16(aoff, boff) \
	VMOVUPS boff(DI), Y12 \
	VMOVUPS boff+32(DI), Y13 \
	VBROADCASTSS aoff(SI), Y14 \
	VBROADCASTSS aoff+4(SI), Y15 \
	VFMADD231PS Y12, Y14, Y0 \
	VFMADD231PS Y13, Y14, Y1 \
	VFMADD231PS Y12, Y15, Y2 \
	VFMADD231PS Y13, Y15, Y3 \
	VBROADCASTSS aoff+8(SI), Y14 \
	VBROADCASTSS aoff+12(SI), Y15 \
	VFMADD231PS Y12, Y14, Y4 \
	VFMADD231PS Y13, Y14, Y5 \
	VFMADD231PS Y12, Y15, Y6 \
	VFMADD231PS Y13, Y15, Y7 \
	VBROADCASTSS aoff+16(SI), Y14 \
	VBROADCASTSS aoff+20(SI), Y15 \
	VFMADD231PS Y12, Y14, Y8 \
	VFMADD231PS Y13, Y14, Y9 \
	VFMADD231PS Y12, Y15, Y10 \
	VFMADD231PS Y13, Y15, Y11

// C row (16 values at DX) += alpha (Y15) * accumulators lo, hi.
#define STOREROW16(lo, hi) \
	VMOVUPS (DX), Y12 \
	VMOVUPS 32(DX), Y13 \
	VFMADD231PS lo, Y15, Y12 \
	VFMADD231PS hi, Y15, Y13 \
	VMOVUPS Y12, (DX) \
	VMOVUPS Y13, 32(DX) \
	ADDQ R8, DX

// func kern6x16AVX2(k int, a, b, c *float32, ldc int, alpha float32)
// C[6x16] (rows ldc apart) += alpha * sum_p a[6p+i] * b[16p+j]: a is a packed
// 6-row A panel, b a packed 16-column B panel, both k steps long.
TEXT ·kern6x16AVX2(SB), NOSPLIT, $0-44
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	MOVQ CX, R9
	SHRQ $2, R9
	ANDQ $3, CX
	TESTQ R9, R9
	JZ   tail6

loop6:
	PREFETCHT0 384(SI)
	STEP6x16(0, 0)
	STEP6x16(24, 64)
	PREFETCHT0 512(DI)
	STEP6x16(48, 128)
	STEP6x16(72, 192)
	ADDQ $96, SI
	ADDQ $256, DI
	DECQ R9
	JNZ  loop6

tail6:
	TESTQ CX, CX
	JZ    store6

tailloop6:
	STEP6x16(0, 0)
	ADDQ $24, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  tailloop6

store6:
	VBROADCASTSS alpha+40(FP), Y15
	STOREROW16(Y0, Y1)
	STOREROW16(Y2, Y3)
	STOREROW16(Y4, Y5)
	STOREROW16(Y6, Y7)
	STOREROW16(Y8, Y9)
	STOREROW16(Y10, Y11)
	VZEROUPPER
	RET

// Lanes of the tail mask: the first 8 set, the next 8 clear. Loading 8
// lanes from byte offset 4*(8-r) sets the first r.
DATA maskTail<>+0(SB)/8, $0xffffffffffffffff
DATA maskTail<>+8(SB)/8, $0xffffffffffffffff
DATA maskTail<>+16(SB)/8, $0xffffffffffffffff
DATA maskTail<>+24(SB)/8, $0xffffffffffffffff
DATA maskTail<>+32(SB)/8, $0
DATA maskTail<>+40(SB)/8, $0
DATA maskTail<>+48(SB)/8, $0
DATA maskTail<>+56(SB)/8, $0
GLOBL maskTail<>(SB), RODATA|NOPTR, $64

// Three A rows (Y12..Y14) times one B row (Y15) into column j's accumulators.
#define FMA3(c0, c1, c2) \
	VFMADD231PS Y15, Y12, c0 \
	VFMADD231PS Y15, Y13, c1 \
	VFMADD231PS Y15, Y14, c2

// Horizontal sums of four accumulators into X(s0) = [sum s0, sum s1,
// sum s2, sum s3]; then C row (4 values at DX) += alpha (X15) * them.
#define REDUCE4STORE(s0, s1, s2, s3, xs0, xs1) \
	VHADDPS s1, s0, s0 \
	VHADDPS s3, s2, s2 \
	VHADDPS s2, s0, s0 \
	VEXTRACTF128 $1, s0, xs1 \
	VADDPS xs1, xs0, xs0 \
	VMOVUPS (DX), xs1 \
	VFMADD231PS xs0, X15, xs1 \
	VMOVUPS xs1, (DX) \
	ADDQ R11, DX

// func dot3x4AVX2(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, alpha float32)
// C[i, j] += alpha * dot(a[i*lda:][:k], b[j*ldb:][:k]) for i < 3, j < 4: three
// k-contiguous rows of A against four of B (the A*B^T layout of a linear
// layer with few tokens), C rows ldc apart. Reads exactly k values per row.
TEXT ·dot3x4AVX2(SB), NOSPLIT, $0-60
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
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	MOVQ CX, BX
	SHRQ $3, CX
	ANDQ $7, BX
	TESTQ CX, CX
	JZ   tail34

loop34:
	VMOVUPS (SI), Y12
	VMOVUPS (SI)(R8*1), Y13
	VMOVUPS (SI)(R8*2), Y14
	VMOVUPS (DI), Y15
	FMA3(Y0, Y4, Y8)
	VMOVUPS (DI)(R9*1), Y15
	FMA3(Y1, Y5, Y9)
	VMOVUPS (DI)(R9*2), Y15
	FMA3(Y2, Y6, Y10)
	VMOVUPS (DI)(R10*1), Y15
	FMA3(Y3, Y7, Y11)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  loop34

tail34:
	TESTQ BX, BX
	JZ    reduce34
	// Masked loads of the last k%8 values: the mask lives in memory at R12
	// and is reloaded into Y15 before each B row (Y15 then receives the row).
	MOVQ $8, AX
	SUBQ BX, AX
	LEAQ maskTail<>(SB), R12
	LEAQ (R12)(AX*4), R12
	VMOVDQU (R12), Y15
	VMASKMOVPS (SI), Y15, Y12
	VMASKMOVPS (SI)(R8*1), Y15, Y13
	VMASKMOVPS (SI)(R8*2), Y15, Y14
	VMASKMOVPS (DI), Y15, Y15
	FMA3(Y0, Y4, Y8)
	VMOVDQU (R12), Y15
	VMASKMOVPS (DI)(R9*1), Y15, Y15
	FMA3(Y1, Y5, Y9)
	VMOVDQU (R12), Y15
	VMASKMOVPS (DI)(R9*2), Y15, Y15
	FMA3(Y2, Y6, Y10)
	VMOVDQU (R12), Y15
	VMASKMOVPS (DI)(R10*1), Y15, Y15
	FMA3(Y3, Y7, Y11)

reduce34:
	VBROADCASTSS alpha+56(FP), X15
	REDUCE4STORE(Y0, Y1, Y2, Y3, X0, X1)
	REDUCE4STORE(Y4, Y5, Y6, Y7, X4, X5)
	REDUCE4STORE(Y8, Y9, Y10, Y11, X8, X9)
	VZEROUPPER
	RET

// func packNT8AVX2(dst, src *float32, lds, k int)
// dst[16p+j] = src[j*lds+p] for j < 8, p < k (k a multiple of 8): eight
// k-contiguous rows of B^T into half of a 16-column B panel, by 8x8
// register transposes.
TEXT ·packNT8AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lds+16(FP), R8
	SHLQ $2, R8
	MOVQ k+24(FP), CX
	SHRQ $3, CX
	JZ   donent8
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10

loopnt8:
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
	VMOVUPS Y9, 64(DI)
	VMOVUPS Y10, 128(DI)
	VMOVUPS Y11, 192(DI)
	VMOVUPS Y12, 256(DI)
	VMOVUPS Y13, 320(DI)
	VMOVUPS Y14, 384(DI)
	VMOVUPS Y15, 448(DI)
	ADDQ $32, SI
	ADDQ $32, R10
	ADDQ $512, DI
	DECQ CX
	JNZ  loopnt8

donent8:
	VZEROUPPER
	RET

// func dot1x4AVX2(k int, a, b *float32, ldb int, c *float32, alpha float32)
// c[j] += alpha * dot(a[:k], b[j*ldb:][:k]) for j < 4: one row of A against
// four of B, with two k-blocks in flight (8 accumulators) so one row keeps
// the FMA pipes busy.
TEXT ·dot1x4AVX2(SB), NOSPLIT, $0-44
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ ldb+24(FP), R9
	SHLQ $2, R9
	LEAQ (R9)(R9*2), R10
	MOVQ c+32(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ CX, BX
	SHRQ $4, CX
	ANDQ $15, BX
	TESTQ CX, CX
	JZ   tail14

loop14:
	VMOVUPS (SI), Y8
	VMOVUPS 32(SI), Y9
	VMOVUPS (DI), Y10
	VFMADD231PS Y10, Y8, Y0
	VMOVUPS (DI)(R9*1), Y11
	VFMADD231PS Y11, Y8, Y1
	VMOVUPS (DI)(R9*2), Y12
	VFMADD231PS Y12, Y8, Y2
	VMOVUPS (DI)(R10*1), Y13
	VFMADD231PS Y13, Y8, Y3
	VMOVUPS 32(DI), Y10
	VFMADD231PS Y10, Y9, Y4
	VMOVUPS 32(DI)(R9*1), Y11
	VFMADD231PS Y11, Y9, Y5
	VMOVUPS 32(DI)(R9*2), Y12
	VFMADD231PS Y12, Y9, Y6
	VMOVUPS 32(DI)(R10*1), Y13
	VFMADD231PS Y13, Y9, Y7
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop14

tail14:
	CMPQ BX, $8
	JLT  mask14
	VMOVUPS (SI), Y8
	VMOVUPS (DI), Y10
	VFMADD231PS Y10, Y8, Y0
	VMOVUPS (DI)(R9*1), Y11
	VFMADD231PS Y11, Y8, Y1
	VMOVUPS (DI)(R9*2), Y12
	VFMADD231PS Y12, Y8, Y2
	VMOVUPS (DI)(R10*1), Y13
	VFMADD231PS Y13, Y8, Y3
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, BX

mask14:
	TESTQ BX, BX
	JZ    reduce14
	MOVQ $8, AX
	SUBQ BX, AX
	LEAQ maskTail<>(SB), R12
	VMOVDQU (R12)(AX*4), Y15
	VMASKMOVPS (SI), Y15, Y8
	VMASKMOVPS (DI), Y15, Y10
	VFMADD231PS Y10, Y8, Y0
	VMASKMOVPS (DI)(R9*1), Y15, Y11
	VFMADD231PS Y11, Y8, Y1
	VMASKMOVPS (DI)(R9*2), Y15, Y12
	VFMADD231PS Y12, Y8, Y2
	VMASKMOVPS (DI)(R10*1), Y15, Y13
	VFMADD231PS Y13, Y8, Y3

reduce14:
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	VHADDPS Y1, Y0, Y0
	VHADDPS Y3, Y2, Y2
	VHADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VBROADCASTSS alpha+40(FP), X15
	VMOVUPS (DX), X1
	VFMADD231PS X0, X15, X1
	VMOVUPS X1, (DX)
	VZEROUPPER
	RET

// func packA6AVX2(dst, src *float32, lds, k int)
// dst[6p+i] = src[i*lds+p] for i < 6, p < k (k a multiple of 8): six
// k-contiguous rows of A into a 6-row A panel by 8x8 register transposes
// (rows 6 and 7 repeat row 5). Each column is stored as 8 floats, the last
// two overwritten by the next column: the final store writes 2 floats past
// dst[6k], which the caller must own.
TEXT ·packA6AVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lds+16(FP), R8
	SHLQ $2, R8
	MOVQ k+24(FP), CX
	SHRQ $3, CX
	JZ   donea6
	LEAQ (R8)(R8*2), R9
	LEAQ (SI)(R8*4), R10

loopa6:
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(R8*1), Y1
	VMOVUPS (SI)(R8*2), Y2
	VMOVUPS (SI)(R9*1), Y3
	VMOVUPS (R10), Y4
	VMOVUPS (R10)(R8*1), Y5
	VMOVAPS Y5, Y6
	VMOVAPS Y5, Y7
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
	VMOVUPS Y9, 24(DI)
	VMOVUPS Y10, 48(DI)
	VMOVUPS Y11, 72(DI)
	VMOVUPS Y12, 96(DI)
	VMOVUPS Y13, 120(DI)
	VMOVUPS Y14, 144(DI)
	VMOVUPS Y15, 168(DI)
	ADDQ $32, SI
	ADDQ $32, R10
	ADDQ $192, DI
	DECQ CX
	JNZ  loopa6

donea6:
	VZEROUPPER
	RET
