//go:build amd64

#include "textflag.h"

// Vectorised elementwise kernels (AVX2 + FMA). Each processes n values, n a
// multiple of 8; the Go callers finish the tails.

// Constants, each replicated over 8 lanes (32 bytes) for use as memory
// operands.
#define CONST8(name, bits) \
	DATA name<>+0(SB)/4, $bits \
	DATA name<>+4(SB)/4, $bits \
	DATA name<>+8(SB)/4, $bits \
	DATA name<>+12(SB)/4, $bits \
	DATA name<>+16(SB)/4, $bits \
	DATA name<>+20(SB)/4, $bits \
	DATA name<>+24(SB)/4, $bits \
	DATA name<>+28(SB)/4, $bits \
	GLOBL name<>(SB), RODATA|NOPTR, $32

CONST8(expHi, 0x42b0c0a5)    // 88.3762626647949
CONST8(expLo, 0xc2aeac50)    // -87.3365447505531 = log(FLT_MIN)
CONST8(log2e, 0x3fb8aa3b)    // 1.44269504088896341
CONST8(ln2hi, 0x3f318000)    // 0.693359375
CONST8(ln2lo, 0xb95e8083)    // -2.12194440e-4
CONST8(expP0, 0x39506967)    // 1.9875691500e-4
CONST8(expP1, 0x3ab743ce)    // 1.3981999507e-3
CONST8(expP2, 0x3c088908)    // 8.3334519073e-3
CONST8(expP3, 0x3d2aa9c1)    // 4.1665795894e-2
CONST8(expP4, 0x3e2aaaaa)    // 1.6666665459e-1
CONST8(expP5, 0x3f000000)    // 5.0000001201e-1
CONST8(one, 0x3f800000)      // 1.0
CONST8(bias127, 0x0000007f)  // 127 (int32)
CONST8(signBit, 0x80000000)

// EXP sets Y0 = exp(Y0) (Cephes expf: range reduction by ln 2, a degree-6
// polynomial; within 2 ulp). Inputs below log(FLT_MIN) give 0, above 88.38
// +Inf, NaN stays NaN. Clobbers Y1..Y4.
#define EXP \
	VMOVUPS expHi<>(SB), Y1 \
	VMINPS Y0, Y1, Y1 \
	VMOVUPS expLo<>(SB), Y2 \
	VMAXPS Y1, Y2, Y1 \
	VMULPS log2e<>(SB), Y1, Y2 \
	VROUNDPS $0, Y2, Y2 \
	VFNMADD231PS ln2hi<>(SB), Y2, Y1 \
	VFNMADD231PS ln2lo<>(SB), Y2, Y1 \
	VMOVUPS expP0<>(SB), Y3 \
	VFMADD213PS expP1<>(SB), Y1, Y3 \
	VFMADD213PS expP2<>(SB), Y1, Y3 \
	VFMADD213PS expP3<>(SB), Y1, Y3 \
	VFMADD213PS expP4<>(SB), Y1, Y3 \
	VFMADD213PS expP5<>(SB), Y1, Y3 \
	VMULPS Y1, Y1, Y4 \
	VFMADD213PS Y1, Y4, Y3 \
	VADDPS one<>(SB), Y3, Y3 \
	VCVTPS2DQ Y2, Y2 \
	VPADDD bias127<>(SB), Y2, Y2 \
	VPSLLD $23, Y2, Y2 \
	VMULPS Y2, Y3, Y3 \
	VCMPPS $5, expLo<>(SB), Y0, Y4 \
	VANDPS Y4, Y3, Y0

// SIGMOID sets Y0 = 1/(1+exp(-Y0)). Clobbers Y1..Y4.
#define SIGMOID \
	VXORPS signBit<>(SB), Y0, Y0 \
	EXP \
	VADDPS one<>(SB), Y0, Y0 \
	VMOVUPS one<>(SB), Y1 \
	VDIVPS Y0, Y1, Y0

// func expAVX2(dst, src *float32, n int, shift float32) float32
// dst[i] = exp(src[i] - shift); returns the sum of dst (dst may be src).
TEXT ·expAVX2(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS shift+24(FP), Y7
	VXORPS Y6, Y6, Y6
	SHRQ $3, CX
	JZ   doneexp

loopexp:
	VMOVUPS (SI), Y0
	VSUBPS Y7, Y0, Y0
	EXP
	VMOVUPS Y0, (DI)
	VADDPS Y0, Y6, Y6
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  loopexp

doneexp:
	VEXTRACTF128 $1, Y6, X0
	VADDPS X0, X6, X6
	VHADDPS X6, X6, X6
	VHADDPS X6, X6, X6
	VMOVSS X6, ret+32(FP)
	VZEROUPPER
	RET

// func maxAVX2(x *float32, n int) float32
// The largest of x[:n] (n >= 8; NaN not propagated).
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VMOVUPS (SI), Y0
	SHRQ $3, CX

loopmax:
	VMAXPS (SI), Y0, Y0
	ADDQ $32, SI
	DECQ CX
	JNZ  loopmax
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func scaleAVX2(x *float32, n int, s float32)
// x[i] *= s.
TEXT ·scaleAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS s+16(FP), Y1
	SHRQ $3, CX
	JZ   donescale

loopscale:
	VMULPS (SI), Y1, Y0
	VMOVUPS Y0, (SI)
	ADDQ $32, SI
	DECQ CX
	JNZ  loopscale

donescale:
	VZEROUPPER
	RET

// func siluAVX2(dst, x *float32, n int)
// dst[i] = x[i] * sigmoid(x[i]).
TEXT ·siluAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   donesilu

loopsilu:
	VMOVUPS (SI), Y5
	VMOVAPS Y5, Y0
	SIGMOID
	VMULPS Y5, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  loopsilu

donesilu:
	VZEROUPPER
	RET

// func swigluAVX2(dst, gate, up *float32, n int)
// dst[i] = gate[i] * sigmoid(gate[i]) * up[i].
TEXT ·swigluAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   doneswiglu

loopswiglu:
	VMOVUPS (SI), Y5
	VMOVAPS Y5, Y0
	SIGMOID
	VMULPS Y5, Y0, Y0
	VMULPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  loopswiglu

doneswiglu:
	VZEROUPPER
	RET

// func swigluBackAVX2(dgate, dup, dout, gate, up *float32, n int)
// With s = sigmoid(g): dup = dout*g*s, dgate = dout*u*s*(1 + g*(1-s)).
TEXT ·swigluBackAVX2(SB), NOSPLIT, $0-48
	MOVQ dgate+0(FP), R8
	MOVQ dup+8(FP), R9
	MOVQ dout+16(FP), R10
	MOVQ gate+24(FP), SI
	MOVQ up+32(FP), DX
	MOVQ n+40(FP), CX
	SHRQ $3, CX
	JZ   doneswb
	VMOVUPS one<>(SB), Y9

loopswb:
	VMOVUPS (SI), Y5  // g
	VMOVAPS Y5, Y0
	SIGMOID           // Y0 = s
	VMOVUPS (R10), Y6 // dout
	VMULPS Y0, Y5, Y7 // g*s
	VMULPS Y6, Y7, Y8 // dout*g*s
	VMOVUPS Y8, (R9)
	VSUBPS Y0, Y9, Y1 // 1-s
	VMULPS Y1, Y5, Y1 // g*(1-s)
	VADDPS Y9, Y1, Y1 // 1 + g*(1-s)
	VMULPS (DX), Y6, Y2 // dout*u
	VMULPS Y0, Y2, Y2 // dout*u*s
	VMULPS Y1, Y2, Y2
	VMOVUPS Y2, (R8)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	DECQ CX
	JNZ  loopswb

doneswb:
	VZEROUPPER
	RET

// func weightedRowsAVX2(o *float32, hd int, p *float32, rows int, v *float32, ldv int)
// o[d] = sum_j p[j] * v[j*ldv+d] for d < hd (hd a multiple of 8, rows >= 1):
// attention's probabilities times values, 32 columns at a time.
TEXT ·weightedRowsAVX2(SB), NOSPLIT, $0-48
	MOVQ o+0(FP), DI
	MOVQ hd+8(FP), R8
	MOVQ p+16(FP), R9
	MOVQ rows+24(FP), R10
	MOVQ v+32(FP), R11
	MOVQ ldv+40(FP), R12
	SHLQ $2, R12

blk32:
	CMPQ R8, $32
	JLT  blk8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ R9, SI
	MOVQ R11, DX
	MOVQ R10, CX

row32:
	VBROADCASTSS (SI), Y4
	VFMADD231PS (DX), Y4, Y0
	VFMADD231PS 32(DX), Y4, Y1
	VFMADD231PS 64(DX), Y4, Y2
	VFMADD231PS 96(DX), Y4, Y3
	ADDQ $4, SI
	ADDQ R12, DX
	DECQ CX
	JNZ  row32
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $128, R11
	SUBQ $32, R8
	JMP  blk32

blk8:
	CMPQ R8, $8
	JLT  donewr
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	MOVQ R9, SI
	MOVQ R11, DX
	MOVQ R10, CX

row8:
	VBROADCASTSS (SI), Y4
	VFMADD231PS (DX), Y4, Y0
	ADDQ $4, SI
	ADDQ R12, DX
	DECQ CX
	JNZ  row8
	VMOVUPS Y0, (DI)
	ADDQ $32, DI
	ADDQ $32, R11
	SUBQ $8, R8
	JMP  blk8

donewr:
	VZEROUPPER
	RET
