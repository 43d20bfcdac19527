// Command _asm generates ../dot_arm64.s: geist's arm64 NEON kernels in two
// tiers, "neon" (ARMv8.0 ASIMD, Cortex-A72) and "neon-dotprod" (ARMv8.2
// SDOT, Cortex-A76). The instructions the Go assembler lacks are emitted as
// WORD directives with the ARM syntax in a comment (see enc.go); the test
// checks every one of them against llvm-mc when it is installed.
//
// Run: cd neon/_asm && go run . > ../dot_arm64.s
package main

import (
	"fmt"
	"os"
	"strings"
)

type asm struct{ b strings.Builder }

func (a *asm) l(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if strings.HasSuffix(s, ":") {
		a.b.WriteString(s + "\n")
		return
	}
	a.b.WriteString("\t" + s + "\n")
}

func (a *asm) comment(s string) {
	a.b.WriteString("\n// " + strings.ReplaceAll(s, "\n", "\n// ") + "\n")
}

// tier is an instruction-set level.
type tier struct {
	suffix string // function name suffix
	dot    bool   // has SDOT
}

var tiers = []tier{{"NE", false}, {"DP", true}}

// idot4 sets the 4 int32 lanes of acc so that their sum is the dot product
// of the int8 vector pairs (x[i], y[i]). Without SDOT it multiplies into
// 16-bit lanes (tmp), which must hold 2*len(pairs) products: callers
// guarantee |x| <= 32, so |sum| <= 4*32*128 fits in int16.
func (a *asm) idot4(t tier, acc, tmp int, pairs [][2]int) {
	if t.dot {
		a.l("VEOR V%d.B16, V%d.B16, V%d.B16", acc, acc, acc)
		for _, p := range pairs {
			a.i(sdot(acc, p[0], p[1]))
		}
		return
	}
	if len(pairs) > 2 {
		panic("idot4: too many pairs for 16-bit lanes")
	}
	for i, p := range pairs {
		if i == 0 {
			a.i(smull8(tmp, p[0], p[1]))
		} else {
			a.i(smlal8(tmp, p[0], p[1]))
		}
		a.i(smlal28(tmp, p[0], p[1]))
	}
	a.i(saddlp8(acc, tmp))
}

// isum sets scalar S(dst) to the dot product of the int8 pairs (as idot4,
// reduced).
func (a *asm) isum(t tier, dst, tmp int, pairs [][2]int) {
	if t.dot {
		a.idot4(t, dst, tmp, pairs)
		a.i(addv4s(dst, dst))
		return
	}
	for i, p := range pairs {
		if i == 0 {
			a.i(smull8(tmp, p[0], p[1]))
		} else {
			a.i(smlal8(tmp, p[0], p[1]))
		}
		a.i(smlal28(tmp, p[0], p[1]))
	}
	a.i(saddlv8(dst, tmp))
}

// isum8 is isum for full-range int8 pairs (Q8_0 weights): no 16-bit
// accumulation of two products.
func (a *asm) isum8(t tier, dst, tmp int, pairs [][2]int) {
	if t.dot {
		a.isum(t, dst, tmp, pairs)
		return
	}
	for i, p := range pairs {
		a.i(smull8(tmp, p[0], p[1]))
		if i == 0 {
			a.i(saddlp8(dst, tmp))
		} else {
			a.i(sadalp8(dst, tmp))
		}
		a.i(smull28(tmp, p[0], p[1]))
		a.i(sadalp8(dst, tmp))
	}
	a.i(addv4s(dst, dst))
}

// header emits the TEXT line of a kernel with the Go signature above it.
func (a *asm) text(name, sig string, frame string) {
	a.b.WriteString("\n// " + sig + "\n")
	a.b.WriteString("TEXT ·" + name + "(SB), NOSPLIT, " + frame + "\n")
}

// dotArgs loads the arguments of the n-column kernels:
// R0 out, R1 w, R2 a, R3 aStride, R4 nb, R5 n, and zeroes out[0:n].
func (a *asm) dotArgs() {
	a.l("MOVD out+0(FP), R0")
	a.l("MOVD w+8(FP), R1")
	a.l("MOVD a+16(FP), R2")
	a.l("MOVD aStride+24(FP), R3")
	a.l("MOVD nb+32(FP), R4")
	a.l("MOVD n+40(FP), R5")
	a.l("MOVD R0, R6")
	a.l("MOVD R5, R7")
	a.l("zero:")
	a.l("MOVW ZR, (R6)")
	a.l("ADD $4, R6")
	a.l("SUBS $1, R7")
	a.l("BNE zero")
}

// f16 loads the half at off(base) into F(d) as a float32 (via R8).
func (a *asm) f16(d int, off int, base string) {
	a.l("MOVHU %d(%s), R8", off, base)
	a.l("FMOVS R8, F%d", d)
	a.l("FCVTHS F%d, F%d", d, d)
}

// colLoop opens the per-column loop: R9 the column's activation block, R10
// its output, R11 the remaining columns.
func (a *asm) colLoopBegin() {
	a.l("MOVD R2, R9")
	a.l("MOVD R0, R10")
	a.l("MOVD R5, R11")
	a.l("PCALIGN $16")
	a.l("col:")
}

func (a *asm) colLoopEnd() {
	a.l("ADD $4, R10")
	a.l("ADD R3, R9")
	a.l("SUBS $1, R11")
	a.l("BNE col")
}

const dotSig = "(out *float32, w, a *byte, aStride, nb, n int)"

// Q4_0 × Q8_0: per block sumf += (float(sumi)*dx)*dy, exactly the generic
// order, so the result is bit-identical to the generic kernel.
func (a *asm) dotQ4_0(t tier) {
	name := "dotQ4_0Q8_0" + t.suffix
	a.text(name, "func "+name+dotSig, "$0-48")
	a.dotArgs()
	a.l("VMOVI $15, V31.B16")
	a.l("VMOVI $8, V30.B16")
	a.l("PCALIGN $16")
	a.l("block:")
	a.f16(29, 0, "R1")
	a.l("FMOVQ 2(R1), F0")
	a.l("VAND V31.B16, V0.B16, V1.B16")
	a.l("VUSHR $4, V0.B16, V2.B16")
	a.l("VSUB V30.B16, V1.B16, V1.B16")
	a.l("VSUB V30.B16, V2.B16, V2.B16")
	a.colLoopBegin()
	a.f16(3, 0, "R9")
	a.l("FMOVQ 2(R9), F4")
	a.l("FMOVQ 18(R9), F5")
	a.isum(t, 6, 7, [][2]int{{1, 4}, {2, 5}})
	a.i(scvtfS(6, 6))
	a.l("FMULS F29, F6, F6")
	a.l("FMULS F3, F6, F6")
	a.l("FMOVS (R10), F7")
	a.l("FADDS F6, F7, F7")
	a.l("FMOVS F7, (R10)")
	a.colLoopEnd()
	a.l("ADD $18, R1")
	a.l("ADD $34, R2")
	a.l("SUBS $1, R4")
	a.l("BNE block")
	a.l("RET")
}

// Q8_0 × Q8_0: sumf += float(sumi)*(dx*dy), the generic order.
func (a *asm) dotQ8_0(t tier) {
	name := "dotQ8_0Q8_0" + t.suffix
	a.text(name, "func "+name+dotSig, "$0-48")
	a.dotArgs()
	a.l("PCALIGN $16")
	a.l("block:")
	a.f16(29, 0, "R1")
	a.l("FMOVQ 2(R1), F1")
	a.l("FMOVQ 18(R1), F2")
	a.colLoopBegin()
	a.f16(3, 0, "R9")
	a.l("FMOVQ 2(R9), F4")
	a.l("FMOVQ 18(R9), F5")
	a.isum8(t, 6, 7, [][2]int{{1, 4}, {2, 5}})
	a.i(scvtfS(6, 6))
	a.l("FMULS F29, F3, F3")
	a.l("FMULS F3, F6, F6")
	a.l("FMOVS (R10), F7")
	a.l("FADDS F6, F7, F7")
	a.l("FMOVS F7, (R10)")
	a.colLoopEnd()
	a.l("ADD $34, R1")
	a.l("ADD $34, R2")
	a.l("SUBS $1, R4")
	a.l("BNE block")
	a.l("RET")
}

// Q5_0 × Q8_0: the fifth bits come from qh through a table lookup that
// spreads its bytes over the lanes and a bit test per lane; sumf +=
// (dx*dy)*float(sumi), the generic order.
func (a *asm) dotQ5_0(t tier) {
	name := "dotQ5_0Q8_0" + t.suffix
	a.text(name, "func "+name+dotSig, "$0-48")
	a.dotArgs()
	a.l("VMOVI $15, V31.B16")
	a.l("VMOVI $16, V30.B16")
	a.l("MOVD $q5consts<>(SB), R12")
	a.l("VLD1 (R12), [V26.B16, V27.B16, V28.B16]") // idx lo, idx hi, bit masks
	a.l("PCALIGN $16")
	a.l("block:")
	a.f16(29, 0, "R1")
	a.l("FMOVS 2(R1), F8")
	a.l("FMOVQ 6(R1), F0")
	a.l("VTBL V26.B16, [V8.B16], V9.B16")
	a.l("VTBL V27.B16, [V8.B16], V10.B16")
	a.i(cmtst(9, 9, 28))
	a.i(cmtst(10, 10, 28))
	a.l("VAND V30.B16, V9.B16, V9.B16")
	a.l("VAND V30.B16, V10.B16, V10.B16")
	a.l("VAND V31.B16, V0.B16, V1.B16")
	a.l("VUSHR $4, V0.B16, V2.B16")
	a.l("VORR V9.B16, V1.B16, V1.B16")
	a.l("VORR V10.B16, V2.B16, V2.B16")
	a.l("VSUB V30.B16, V1.B16, V1.B16")
	a.l("VSUB V30.B16, V2.B16, V2.B16")
	a.colLoopBegin()
	a.f16(3, 0, "R9")
	a.l("FMOVQ 2(R9), F4")
	a.l("FMOVQ 18(R9), F5")
	a.isum(t, 6, 7, [][2]int{{1, 4}, {2, 5}})
	a.i(scvtfS(6, 6))
	a.l("FMULS F29, F3, F3")
	a.l("FMULS F6, F3, F6")
	a.l("FMOVS (R10), F7")
	a.l("FADDS F6, F7, F7")
	a.l("FMOVS F7, (R10)")
	a.colLoopEnd()
	a.l("ADD $22, R1")
	a.l("ADD $34, R2")
	a.l("SUBS $1, R4")
	a.l("BNE block")
	a.l("RET")
}

// kquantTail combines a Q8_K column's integer sums into its output: F28 is
// the activation scale yd, F25 sumi (int), F27 summins (int, or none), F29
// d and F30 dmin of the weights:
// out = out + float(sumi)*(d*yd) - float(summins)*(dmin*yd).
func (a *asm) kquantTail(mins bool) {
	a.i(scvtfS(25, 25))
	a.l("FMULS F28, F29, F16")
	a.l("FMULS F16, F25, F25")
	a.l("FMOVS (R10), F17")
	a.l("FADDS F25, F17, F17")
	if mins {
		a.i(scvtfS(27, 27))
		a.l("FMULS F28, F30, F16")
		a.l("FMULS F16, F27, F27")
		a.l("FSUBS F27, F17, F17")
	}
	a.l("FMOVS F17, (R10)")
}

// Q4_K × Q8_K: the super-block's 256 weights are unpacked once into V0-V15
// (per 32-byte chunk c: low nibbles V4c, V4c+1, high nibbles V4c+2, V4c+3),
// scales as int32 lanes in V20, V21 and mins as int16 in V22; then every
// column takes exact integer sums (sumi = Σ scale·dot, summins = Σ min·bsum)
// and one float combination per super-block (kquantTail).
func (a *asm) dotQ4_K(t tier) {
	name := "dotQ4_KQ8_K" + t.suffix
	a.text(name, "func "+name+dotSig, "$0-48")
	a.dotArgs()
	a.l("PCALIGN $16")
	a.l("block:")
	a.l("VMOVI $15, V31.B16")
	a.f16(29, 0, "R1")
	a.f16(30, 2, "R1")
	// 6-bit scales and mins: A, B, C are the three words of scales[12].
	a.l("MOVWU 4(R1), R12")
	a.l("MOVWU 8(R1), R13")
	a.l("MOVWU 12(R1), R14")
	a.l("ANDW $0x3f3f3f3f, R12, R15") // sc[0:4]
	a.l("ANDW $0x3f3f3f3f, R13, R16") // m[0:4]
	a.l("ANDW $0x0f0f0f0f, R14, R17") // sc[4:8] low bits
	a.l("LSRW $6, R12, R19")
	a.l("ANDW $0x03030303, R19, R19")
	a.l("ORRW R19<<4, R17, R17")
	a.l("LSRW $4, R14, R19")
	a.l("ANDW $0x0f0f0f0f, R19, R19") // m[4:8] low bits
	a.l("LSRW $6, R13, R20")
	a.l("ANDW $0x03030303, R20, R20")
	a.l("ORRW R20<<4, R19, R19")
	a.l("ORR R17<<32, R15, R15") // scales
	a.l("ORR R19<<32, R16, R16") // mins
	a.l("VMOV R15, V20.D[0]")
	a.l("VMOV R16, V22.D[0]")
	a.i(ushll8(20, 20))
	a.i(ushll8(22, 22))
	a.i(ushll216(21, 20))
	a.i(ushll16(20, 20))
	// nibbles
	a.l("ADD $16, R1, R12")
	for h := 0; h < 2; h++ {
		a.l("VLD1.P 64(R12), [V16.B16, V17.B16, V18.B16, V19.B16]")
		for c := 0; c < 2; c++ {
			base := 8*h + 4*c
			a.l("VAND V31.B16, V%d.B16, V%d.B16", 16+2*c, base)
			a.l("VAND V31.B16, V%d.B16, V%d.B16", 17+2*c, base+1)
			a.l("VUSHR $4, V%d.B16, V%d.B16", 16+2*c, base+2)
			a.l("VUSHR $4, V%d.B16, V%d.B16", 17+2*c, base+3)
		}
	}
	a.colLoopBegin()
	a.l("FMOVS (R9), F28")
	a.l("ADD $4, R9, R13")
	a.l("VEOR V25.B16, V25.B16, V25.B16")
	for c := 0; c < 4; c++ {
		a.l("VLD1.P 64(R13), [V16.B16, V17.B16, V18.B16, V19.B16]")
		a.idot4(t, 23, 26, [][2]int{{4 * c, 16}, {4*c + 1, 17}})
		a.idot4(t, 24, 27, [][2]int{{4*c + 2, 18}, {4*c + 3, 19}})
		s := 2 * c
		a.i(mlaElem(25, 23, 20+s/4, s%4))
		a.i(mlaElem(25, 24, 20+(s+1)/4, (s+1)%4))
	}
	a.i(addv4s(25, 25))
	// R13 now points at bsums: pairwise sums are the 8 sub-block sums.
	a.l("VLD1 (R13), [V26.H8, V27.H8]")
	a.l("VADDP V27.H8, V26.H8, V26.H8")
	a.i(smull16(27, 26, 22))
	a.i(smlal216(27, 26, 22))
	a.i(addv4s(27, 27))
	a.kquantTail(true)
	a.colLoopEnd()
	a.l("ADD $144, R1")
	a.l("ADD $292, R2")
	a.l("SUBS $1, R4")
	a.l("BNE block")
	a.l("RET")
}

// Q6_K × Q8_K: the 256 weights are unpacked once into V0-V15 (vector j is
// sub-block j of 16 values, minus 32), the 16 int8 scales as int32 lanes in
// V16-V19; every column takes sumi = Σ scale_j·dot_j exactly and adds
// float(sumi)*(d*yd).
func (a *asm) dotQ6_K(t tier) {
	name := "dotQ6_KQ8_K" + t.suffix
	a.text(name, "func "+name+dotSig, "$0-48")
	a.dotArgs()
	a.l("PCALIGN $16")
	a.l("block:")
	a.l("VMOVI $15, V29.B16")
	a.l("VMOVI $48, V30.B16")
	a.l("VMOVI $32, V31.B16")
	for h := 0; h < 2; h++ {
		a.l("ADD $%d, R1, R12", 64*h)
		a.l("ADD $%d, R1, R13", 128+32*h)
		a.l("VLD1 (R12), [V16.B16, V17.B16, V18.B16, V19.B16]")
		a.l("VLD1 (R13), [V20.B16, V21.B16]")
		o := 8 * h
		// low nibbles with qh bits 0-1 and 2-3
		a.l("VSHL $4, V20.B16, V22.B16")
		a.l("VSHL $4, V21.B16, V23.B16")
		a.l("VAND V30.B16, V22.B16, V22.B16")
		a.l("VAND V30.B16, V23.B16, V23.B16")
		a.l("VAND V29.B16, V16.B16, V%d.B16", o+0)
		a.l("VAND V29.B16, V17.B16, V%d.B16", o+1)
		a.l("VORR V22.B16, V%d.B16, V%d.B16", o+0, o+0)
		a.l("VORR V23.B16, V%d.B16, V%d.B16", o+1, o+1)
		a.l("VSHL $2, V20.B16, V22.B16")
		a.l("VSHL $2, V21.B16, V23.B16")
		a.l("VAND V30.B16, V22.B16, V22.B16")
		a.l("VAND V30.B16, V23.B16, V23.B16")
		a.l("VAND V29.B16, V18.B16, V%d.B16", o+2)
		a.l("VAND V29.B16, V19.B16, V%d.B16", o+3)
		a.l("VORR V22.B16, V%d.B16, V%d.B16", o+2, o+2)
		a.l("VORR V23.B16, V%d.B16, V%d.B16", o+3, o+3)
		// high nibbles with qh bits 4-5 and 6-7
		a.l("VAND V30.B16, V20.B16, V22.B16")
		a.l("VAND V30.B16, V21.B16, V23.B16")
		a.l("VUSHR $4, V16.B16, V%d.B16", o+4)
		a.l("VUSHR $4, V17.B16, V%d.B16", o+5)
		a.l("VORR V22.B16, V%d.B16, V%d.B16", o+4, o+4)
		a.l("VORR V23.B16, V%d.B16, V%d.B16", o+5, o+5)
		a.l("VUSHR $2, V20.B16, V22.B16")
		a.l("VUSHR $2, V21.B16, V23.B16")
		a.l("VAND V30.B16, V22.B16, V22.B16")
		a.l("VAND V30.B16, V23.B16, V23.B16")
		a.l("VUSHR $4, V18.B16, V%d.B16", o+6)
		a.l("VUSHR $4, V19.B16, V%d.B16", o+7)
		a.l("VORR V22.B16, V%d.B16, V%d.B16", o+6, o+6)
		a.l("VORR V23.B16, V%d.B16, V%d.B16", o+7, o+7)
		for k := 0; k < 8; k++ {
			a.l("VSUB V31.B16, V%d.B16, V%d.B16", o+k, o+k)
		}
	}
	a.f16(31, 208, "R1") // d, kept in F31 through the column loop
	// scales
	a.l("FMOVQ 192(R1), F16")
	a.i(sshll28(18, 16))
	a.i(sshll8(16, 16))
	a.i(sshll216(19, 18))
	a.i(sshll16(18, 18))
	a.i(sshll216(17, 16))
	a.i(sshll16(16, 16))
	a.colLoopBegin()
	a.l("FMOVS (R9), F29")
	a.l("ADD $4, R9, R13")
	a.l("VEOR V28.B16, V28.B16, V28.B16")
	for g := 0; g < 4; g++ {
		a.l("VLD1.P 64(R13), [V20.B16, V21.B16, V22.B16, V23.B16]")
		for k := 0; k < 4; k++ {
			j := 4*g + k
			a.idot4(t, 24+k, 30, [][2]int{{j, 20 + k}})
		}
		for k := 0; k < 4; k++ {
			j := 4*g + k
			a.i(mlaElem(28, 24+k, 16+j/4, j%4))
		}
	}
	a.i(addv4s(28, 28))
	a.i(scvtfS(28, 28))
	a.l("FMULS F31, F29, F29") // d*yd (d kept in F31)
	a.l("FMULS F29, F28, F28")
	a.l("FMOVS (R10), F27")
	a.l("FADDS F28, F27, F27")
	a.l("FMOVS F27, (R10)")
	a.colLoopEnd()
	a.l("ADD $210, R1")
	a.l("ADD $292, R2")
	a.l("SUBS $1, R4")
	a.l("BNE block")
	a.l("RET")
}

func main() {
	a := &asm{}
	a.b.WriteString("// Code generated by neon/_asm; DO NOT EDIT.\n\n//go:build arm64 && !purego\n\n#include \"textflag.h\"\n")
	a.b.WriteString(`
// q5consts: TBL indices spreading qh bytes 0,1 (then 2,3) over 16 lanes,
// and the bit each lane tests.
DATA q5consts<>+0(SB)/8, $0x0000000000000000
DATA q5consts<>+8(SB)/8, $0x0101010101010101
DATA q5consts<>+16(SB)/8, $0x0202020202020202
DATA q5consts<>+24(SB)/8, $0x0303030303030303
DATA q5consts<>+32(SB)/8, $0x8040201008040201
DATA q5consts<>+40(SB)/8, $0x8040201008040201
GLOBL q5consts<>(SB), RODATA|NOPTR, $48
`)
	for _, t := range tiers {
		a.dotQ4_0(t)
		a.dotQ5_0(t)
		a.dotQ8_0(t)
		a.dotQ4_K(t)
		a.dotQ6_K(t)
	}
	a.vector()
	os.Stdout.WriteString(a.b.String())
}

// i emits one instruction line as is.
func (a *asm) i(s string) { a.b.WriteString("\t" + s + "\n") }
