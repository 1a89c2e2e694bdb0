//go:build amd64

#include "textflag.h"

// A byte repeated over 32 bytes, for use as a memory operand: no set-up
// per call (most strings end within a block or two).
#define SPLAT32(name, b) \
	DATA name<>+0(SB)/8, $b \
	DATA name<>+8(SB)/8, $b \
	DATA name<>+16(SB)/8, $b \
	DATA name<>+24(SB)/8, $b \
	GLOBL name<>(SB), RODATA|NOPTR, $32

SPLAT32(quotes, 0x2222222222222222)
SPLAT32(backslashes, 0x5c5c5c5c5c5c5c5c)
SPLAT32(controls, 0x1f1f1f1f1f1f1f1f)

// func specialAVX2(s string, i int) int
//
// The index of the first quote, backslash or control byte (below 0x20) in
// s from i on, read 32 bytes at a time; where fewer than 32 bytes are left
// when none comes before them. plainRun (jsonwalk.go) is its reference and
// reads the rest.
TEXT ·specialAVX2(SB), NOSPLIT, $0-32
	MOVQ s_base+0(FP), SI
	MOVQ s_len+8(FP), DX
	MOVQ i+16(FP), AX
	SUBQ $32, DX // a block at AX fits while AX <= len-32 (signed: len may be below 32)

loop:
	CMPQ AX, DX
	JGT  done
	VMOVDQU   (SI)(AX*1), Y0
	VPCMPEQB  quotes<>(SB), Y0, Y4      // quote
	VPCMPEQB  backslashes<>(SB), Y0, Y5 // backslash
	VPMINUB   controls<>(SB), Y0, Y6
	VPCMPEQB  Y0, Y6, Y6                // min(b, 0x1f) == b: b <= 0x1f
	VPOR      Y4, Y5, Y4
	VPOR      Y4, Y6, Y4
	VPMOVMSKB Y4, CX
	TESTL     CX, CX
	JNZ       found
	ADDQ      $32, AX
	JMP       loop

found:
	BSFL CX, CX // the lowest set bit: the block's first such byte
	ADDQ CX, AX

done:
	VZEROUPPER
	MOVQ AX, ret+24(FP)
	RET
