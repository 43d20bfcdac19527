package main

import "fmt"

// The avx2 set's one-row dots (dot_amd64.s): the 32-value block kernels
// (Q4_0, Q5_0, Q8_0; n columns and one column) and the k-quant ones
// (x86kquant.go).

const dotDoc = `AVX2+FMA+F16C dot products of one quantized weight row with up to eight
activation columns (the Go wrappers in dot_amd64.go split larger n and
check every length). Each weight block is loaded and unpacked once and
then applied to every column; column k accumulates in its own register
(Y8+k) with the same instruction sequence whatever n is, so out[k] is
bit-identical to a run with that column alone.

Register use in every dot kernel:
	DI out, SI weight block, DX block of column 0, R8 column stride,
	CX blocks left, BX n (1..8), R9 current column's block,
	Y8..Y15 the column accumulators (8 float32 lanes each).`

const dot32Doc = `The 32-value block kernels (Q4_0, Q5_0, Q8_0) equal the generic code bit
for bit: each block's integer sum is exact, its float factor is formed
with the generic code's roundings ((sumi*dx)*dy for Q4_0, (dx*dy)*sumi
for Q5_0 and Q8_0) and the blocks are added to a float32 sum in block
order. Full groups of 8 blocks are unpacked once into a 32-byte aligned
scratch area (R13); per column the 8 block sums are reduced into the 8
lanes of one vector, the factors are formed in 8 lanes at once and the
lanes are added in order to the column's sum (X8+k). The nb%8 blocks
after the last group go one at a time.

The integer sums are exact for any bytes. Q4_0/Q5_0 weights x = q-8 or
q-16 are signed and the activations are made unsigned, y^0x80 = y+128:
maddubs(y+128, x) has pair sums of at most 255*16*2 (no saturation), and
the block's 128*sum(x), shared by all columns, is subtracted once per
group. Q8_0 sign-extends both sides to 16 bits.

Scratch: 0..255 the group's signed weights (Q8_0: 0..511 as int16),
512..543 the 8 blocks' 128*sum(x).

The one-column kernels (x1) compute the same float operations on the
same values (so the same bits), without the scratch: each block is
unpacked into registers and used at once. Unsigned weights q take the
offset through the activations: sum (q-o)*y = maddubs(q, y) -
maddubs(o, y), exact in int16 (Y15 nibble mask, Y14 the offset bytes,
Y13 ones16).`

// dot32Quant is a 32-value block type of the avx2 dots.
type dot32Quant struct {
	name  string
	label string // label prefix
	bsz   int
	kind  int    // 4, 5 or 8
	ocon  string // the offset bytes (Q4_0, Q5_0)
	bias  string // 128*o*32 in every dword (Q4_0, Q5_0)
}

var dot32Quants = []dot32Quant{
	{"Q4_0", "q4", 18, 4, "eights", "bias4"},
	{"Q5_0", "q5", 22, 5, "sixteens", "bias5"},
	{"Q8_0", "q8", 34, 8, "", ""},
}

// dotData emits the constants of dot_amd64.s.
func (a *asm) dotData() {
	for _, c := range []struct {
		name, doc string
		w         uint64
	}{
		{"nib", "", 0x0f0f0f0f0f0f0f0f}, {"eights", "", 0x0808080808080808},
		{"sixteens", "", 0x1010101010101010}, {"ones16", "", 0x0001000100010001},
	} {
		a.b.WriteString("\n")
		a.splat(c.name, c.w, 32)
	}
	a.b.WriteString("\n// bitShuf spreads a broadcast 32-bit word so that byte i holds byte i/8.\n")
	a.data("bitShuf", 0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303)
	a.b.WriteString("\n// bitMask has every bit but bit i%8 set in byte i.\n")
	a.splat("bitMask", 0x7fbfdfeff7fbfdfe, 32)
	a.b.WriteString("\n// shr4hi: dword shift counts 0 in the low 128-bit lane, 4 in the high one\n// (a broadcast 16-byte nibble row becomes low nibbles | high nibbles).\n")
	a.data("shr4hi", 0, 0, 0x0000000400000004, 0x0000000400000004)
	a.b.WriteString("\n// k4Shuf picks byte 0 into the low byte of every word, zero above.\n")
	a.splat("k4Shuf", 0x8000800080008000, 32)
	a.b.WriteString("\n// k6Shuf picks byte 0 into the low 128-bit lane and byte 1 into the high one.\n")
	a.data("k6Shuf", 0, 0, 0x0101010101010101, 0x0101010101010101)
	for _, c := range []struct {
		name string
		w    uint64
	}{{"twos", 0x0202020202020202}, {"m03", 0x0303030303030303}, {"m0c", 0x0c0c0c0c0c0c0c0c},
		{"m30", 0x3030303030303030}, {"mc0", 0xc0c0c0c0c0c0c0c0}, {"x80", 0x8080808080808080},
		{"allOnes", 0xffffffffffffffff}} {
		a.b.WriteString("\n")
		a.splat(c.name, c.w, 32)
	}
	a.b.WriteString("\n// 128*8*32 and 128*16*32 in every dword: 128*sum(x) = 128*sum(q) - bias.\n")
	a.splat("bias4", 0x0000800000008000, 32)
	a.b.WriteString("\n")
	a.splat("bias5", 0x0001000000010000, 32)
}

// tree8 leaves in Y0 the sums of the int32 lanes of blk(0..7, reg), block
// g in lane g (uses Y0..Y4 and the odd register t).
func (a *asm) tree8(blk func(g int, dst string), t string) {
	blk(0, "Y2")
	blk(1, t)
	a.l("VPHADDD %s, Y2, Y3", t)
	blk(2, "Y2")
	blk(3, t)
	a.l("VPHADDD %s, Y2, Y4", t)
	a.l("VPHADDD Y4, Y3, Y3")
	blk(4, "Y2")
	blk(5, t)
	a.l("VPHADDD %s, Y2, Y4", t)
	blk(6, "Y2")
	blk(7, t)
	a.l("VPHADDD %s, Y2, Y2", t)
	a.l("VPHADDD Y2, Y4, Y4")
	a.l("VPERM2I128 $0x20, Y4, Y3, Y0")
	a.l("VPERM2I128 $0x31, Y4, Y3, Y1")
	a.l("VPADDD Y1, Y0, Y0")
}

// gather8 gathers the F16 scales of 8 blocks (size bytes apart at base)
// into Y(r) as float32 (via X(r) and AX).
func (a *asm) gather8(base string, size, r int) {
	a.l("MOVWLZX (%s), AX", base)
	a.l("VMOVD AX, X%d", r)
	for i := 1; i < 8; i++ {
		a.l("VPINSRW $%d, %d(%s), X%d, X%d", i, i*size, base, r, r)
	}
	a.l("VCVTPH2PS X%d, Y%d", r, r)
}

// add8 adds the 8 float lanes of Y0 to X(acc) in lane order.
func (a *asm) add8(acc int) {
	x := fmt.Sprintf("X%d", acc)
	for h := 0; h < 2; h++ {
		if h == 1 {
			a.l("VEXTRACTF128 $1, Y0, X0")
		}
		a.l("VADDSS X0, %s, %s", x, x)
		a.l("VMOVSHDUP X0, X1")
		a.l("VADDSS X1, %s, %s", x, x)
		a.l("VMOVHLPS X0, X0, X1")
		a.l("VADDSS X1, %s, %s", x, x)
		a.l("VPSHUFD $0xff, X0, X1")
		a.l("VADDSS X1, %s, %s", x, x)
	}
}

// fac applies the float factors, in 8 lanes (dx in Y7, dy in Y1, float
// sums in Y0) or one (X7, X1, X0): Q4_0 rounds (sumi*dx)*dy, Q5_0 and
// Q8_0 (dx*dy)*sumi.
func (a *asm) fac(q4, one bool) {
	mul, r := "VMULPS", "Y"
	if one {
		mul, r = "VMULSS", "X"
	}
	if q4 {
		a.l("%s %s7, %s0, %s0", mul, r, r, r)
	} else {
		a.l("%s %s1, %s7, %s1", mul, r, r, r)
	}
	a.l("%s %s1, %s0, %s0", mul, r, r, r)
}

// intsum leaves in X0 lane 0 the sum of the int32 lanes of Y0.
func (a *asm) intsum() {
	a.l("VEXTRACTI128 $1, Y0, X1")
	a.l("VPADDD X1, X0, X0")
	a.l("VPSHUFD $0x4e, X0, X1")
	a.l("VPADDD X1, X0, X0")
	a.l("VPSHUFD $0xb1, X0, X1")
	a.l("VPADDD X1, X0, X0")
}

// dy1 loads the column block's F16 scale into X1 as float32.
func (a *asm) dy1() {
	a.l("VPBROADCASTW (R9), X1")
	a.l("VCVTPH2PS X1, X1")
}

// loadQ leaves in Y0 the 32 unsigned quants of the Q4_0 / Q5_0 block at
// off(SI).
func (a *asm) loadQ(q dot32Quant, off int) {
	qs := off + 2
	if q.kind == 5 {
		qs = off + 6
	}
	a.l("VBROADCASTI128 %d(SI), Y0", qs)
	a.l("VPSRLVD shr4hi<>(SB), Y0, Y0")
	a.l("VPAND nib<>(SB), Y0, Y0")
	if q.kind == 5 {
		a.l("VPBROADCASTD %d(SI), Y1", off+2)
		a.l("VPSHUFB bitShuf<>(SB), Y1, Y1")
		a.l("VPOR bitMask<>(SB), Y1, Y1")
		a.l("VPCMPEQB allOnes<>(SB), Y1, Y1")
		a.l("VPAND sixteens<>(SB), Y1, Y1")
		a.l("VPOR Y1, Y0, Y0")
	}
}

// gunpack unpacks a group of 8 blocks into the scratch: Q4_0/Q5_0 x = q -
// o and 128*sum(x) per block at 512(R13), the column constants in Y5 and
// Y6; Q8_0 the quants as int16; dx in Y7.
func (a *asm) gunpack(q dot32Quant) {
	if q.kind == 8 {
		for g := 0; g < 8; g++ {
			a.l("VPMOVSXBW %d(SI), Y0", 34*g+2)
			a.l("VMOVDQU Y0, %d(R13)", 64*g)
			a.l("VPMOVSXBW %d(SI), Y0", 34*g+18)
			a.l("VMOVDQU Y0, %d(R13)", 64*g+32)
		}
		a.gather8("SI", 34, 7)
		return
	}
	a.l("VPXOR Y7, Y7, Y7")
	a.tree8(func(g int, s string) {
		// The partial sums of q (VPSADBW against the zero Y7).
		a.loadQ(q, q.bsz*g)
		a.l("VPSADBW Y7, Y0, %s", s)
		a.l("VPSUBB %s<>(SB), Y0, Y0", q.ocon)
		a.l("VMOVDQU Y0, %d(R13)", 32*g)
	}, "Y5")
	a.l("VPSLLD $7, Y0, Y0")
	a.l("VPSUBD %s<>(SB), Y0, Y0", q.bias)
	a.l("VMOVDQU Y0, 512(R13)")
	a.gather8("SI", q.bsz, 7)
	a.l("VMOVDQU x80<>(SB), Y5")
	a.l("VMOVDQU ones16<>(SB), Y6")
}

// gcol adds a column's group of 8 blocks to X(acc).
func (a *asm) gcol(q dot32Quant, acc int) {
	if q.kind == 8 {
		a.tree8(func(g int, dst string) {
			a.l("VPMOVSXBW %d(R9), Y0", 2+34*g)
			a.l("VPMADDWD %d(R13), Y0, Y0", 64*g)
			a.l("VPMOVSXBW %d(R9), Y1", 18+34*g)
			a.l("VPMADDWD %d(R13), Y1, Y1", 64*g+32)
			a.l("VPADDD Y1, Y0, %s", dst)
		}, "Y0")
	} else {
		// Sum (y+128)*x per block, less 128*sum(x).
		a.tree8(func(g int, dst string) {
			a.l("VPXOR %d(R9), Y5, Y0", 2+34*g)
			a.l("VPMADDUBSW %d(R13), Y0, Y0", 32*g)
			a.l("VPMADDWD Y6, Y0, %s", dst)
		}, "Y0")
		a.l("VPSUBD 512(R13), Y0, Y0")
	}
	a.l("VCVTDQ2PS Y0, Y0")
	a.gather8("R9", 34, 1)
	a.fac(q.kind == 4, false)
	a.add8(acc)
	a.l("ADDQ R8, R9")
}

// unpack1 unpacks one block: Q4_0/Q5_0 x in Y2, 128*sum(x) in X3, the
// column constants in Y5 and Y6; Q8_0 the quants as int16 in Y2:Y3; dx in
// X7.
func (a *asm) unpack1(q dot32Quant) {
	if q.kind == 8 {
		a.l("VPMOVSXBW 2(SI), Y2")
		a.l("VPMOVSXBW 18(SI), Y3")
		a.l("VPBROADCASTW (SI), X7")
		a.l("VCVTPH2PS X7, X7")
		return
	}
	a.l("VPXOR Y7, Y7, Y7")
	a.loadQ(q, 0)
	a.l("VPSADBW Y7, Y0, Y3")
	a.l("VEXTRACTI128 $1, Y3, X1")
	a.l("VPADDD X1, X3, X3")
	a.l("VPSHUFD $0x4e, X3, X1")
	a.l("VPADDD X1, X3, X3")
	a.l("VPSLLD $7, X3, X3")
	a.l("VPSUBD %s<>(SB), X3, X3", q.bias)
	a.l("VPSUBB %s<>(SB), Y0, Y2", q.ocon)
	a.l("VPBROADCASTW (SI), X7")
	a.l("VCVTPH2PS X7, X7")
	a.l("VMOVDQU x80<>(SB), Y5")
	a.l("VMOVDQU ones16<>(SB), Y6")
}

// tcol adds a column's single block to X(acc).
func (a *asm) tcol(q dot32Quant, acc int) {
	if q.kind == 8 {
		a.l("VPMOVSXBW 2(R9), Y0")
		a.l("VPMADDWD Y2, Y0, Y0")
		a.l("VPMOVSXBW 18(R9), Y1")
		a.l("VPMADDWD Y3, Y1, Y1")
		a.l("VPADDD Y1, Y0, Y0")
		a.intsum()
	} else {
		a.l("VPXOR 2(R9), Y5, Y0")
		a.l("VPMADDUBSW Y2, Y0, Y0")
		a.l("VPMADDWD Y6, Y0, Y0")
		a.intsum()
		a.l("VPSUBD X3, X0, X0")
	}
	a.l("VCVTDQ2PS X0, X0")
	a.dy1()
	a.fac(q.kind == 4, true)
	a.l("VADDSS X0, X%d, X%d", acc, acc)
	a.l("ADDQ R8, R9")
}

// groupsThenOne emits the loops over the groups of 8 blocks and the nb%8
// single blocks (labels prefix...); the blocks are bsz bytes.
func (a *asm) groupsThenOne(prefix string, bsz int, group, one func(), done func()) {
	a.l("SHRQ $3, CX")
	a.l("JZ %stail", prefix)
	a.label(prefix+"group", true)
	group()
	a.l("ADDQ $%d, SI", 8*bsz)
	a.l("ADDQ $%d, DX", 8*34)
	a.l("DECQ CX")
	a.l("JNZ %sgroup", prefix)
	a.b.WriteString("\n")
	a.label(prefix+"tail", false)
	a.l("MOVQ nb+32(FP), CX")
	a.l("ANDQ $7, CX")
	a.l("JZ %sdone", prefix)
	a.b.WriteString("\n")
	a.label(prefix+"one", false)
	one()
	a.l("ADDQ $%d, SI", bsz)
	a.l("ADDQ $34, DX")
	a.l("DECQ CX")
	a.l("JNZ %sone", prefix)
	a.b.WriteString("\n")
	a.label(prefix+"done", false)
	done()
}

// dot32X86 emits the n-column kernel of q.
func (a *asm) dot32X86(q dot32Quant) {
	p := q.label + "0"
	a.textX86("dot"+q.name+"Q8_0AVX2", dotSigX86, "NOSPLIT", "$576-48")
	a.dargs()
	a.zero8()
	a.scratch()
	a.groupsThenOne(p, q.bsz, func() {
		a.gunpack(q)
		a.eachCol(func(acc int) { a.gcol(q, acc) }, p+"gnext")
		a.label(p+"gnext", false)
	}, func() {
		a.unpack1(q)
		a.eachCol(func(acc int) { a.tcol(q, acc) }, p+"onext")
		a.label(p+"onext", false)
	}, func() {
		// The n column sums X8.. to out.
		for c := 0; c < 8; c++ {
			if c > 0 {
				a.l("CMPQ BX, $%d", c)
				a.l("JEQ %sret", p)
			}
			a.l("VMOVSS X%d, %d(DI)", 8+c, 4*c)
		}
		a.b.WriteString("\n")
		a.label(p+"ret", false)
		a.l("VZEROUPPER")
		a.l("RET")
	})
}

// b1 leaves in dst the int32 lanes of block g's sum (weights at SI,
// activations at DX; temporaries Y0, Y1 and Y5).
func (a *asm) b1(q dot32Quant, g int, dst string) {
	act := 34*g + 2
	switch q.kind {
	case 4:
		a.l("VBROADCASTI128 %d(SI), Y0", 18*g+2)
		a.l("VPSRLVD shr4hi<>(SB), Y0, Y0")
		a.l("VPAND Y15, Y0, Y0")
	case 5:
		a.loadQ(q, 22*g)
	case 8:
		a.l("VPMOVSXBW %d(SI), Y0", act)
		a.l("VPMOVSXBW %d(DX), Y1", act)
		a.l("VPMADDWD Y1, Y0, Y0")
		a.l("VPMOVSXBW %d(SI), Y1", act+16)
		a.l("VPMOVSXBW %d(DX), Y5", act+16)
		a.l("VPMADDWD Y5, Y1, Y1")
		a.l("VPADDD Y1, Y0, %s", dst)
		return
	}
	a.l("VPMADDUBSW %d(DX), Y14, Y1", act)
	a.l("VPMADDUBSW %d(DX), Y0, Y0", act)
	a.l("VPSUBW Y1, Y0, Y0")
	a.l("VPMADDWD Y13, Y0, %s", dst)
}

// dot32x1 emits the one-column kernel of q.
func (a *asm) dot32x1(q dot32Quant) {
	p := q.label + "1"
	a.textX86("dot"+q.name+"Q8_0x1AVX2", dotSigX86, "NOSPLIT", "$0-48")
	a.l("MOVQ out+0(FP), DI")
	a.l("MOVQ w+8(FP), SI")
	a.l("MOVQ a+16(FP), DX")
	a.l("MOVQ nb+32(FP), CX")
	a.l("VXORPS X8, X8, X8")
	a.l("VMOVDQU nib<>(SB), Y15")
	a.l("VMOVDQU ones16<>(SB), Y13")
	if q.kind != 8 {
		a.l("VMOVDQU %s<>(SB), Y14", q.ocon)
	}
	a.groupsThenOne(p, q.bsz, func() {
		a.tree8(func(g int, dst string) { a.b1(q, g, dst) }, "Y0")
		a.l("VCVTDQ2PS Y0, Y0")
		a.gather8("SI", q.bsz, 7)
		a.l("MOVQ DX, R9")
		a.gather8("R9", 34, 1)
		a.fac(q.kind == 4, false)
		a.add8(8)
	}, func() {
		a.b1(q, 0, "Y0")
		a.intsum()
		a.l("VCVTDQ2PS X0, X0")
		a.l("VPBROADCASTW (SI), X7")
		a.l("VCVTPH2PS X7, X7")
		a.l("MOVQ DX, R9")
		a.dy1()
		a.fac(q.kind == 4, true)
		a.l("VADDSS X0, X8, X8")
	}, func() {
		a.l("VMOVSS X8, (DI)")
		a.l("VZEROUPPER")
		a.l("RET")
	})
}

// genDot writes dot_amd64.s.
func genDot(a *asm) {
	a.b.WriteString("\n")
	a.doc(dotDoc)
	a.dotData()
	a.b.WriteString("\n")
	a.doc(dot32Doc)
	for _, q := range dot32Quants {
		a.dot32X86(q)
	}
	for _, q := range dot32Quants {
		a.dot32x1(q)
	}
	a.kquantAVX2()
}
