package main

import "fmt"

// The row-group kernels (rows_amd64.s): RowGroup = 8 weight rows times n
// activation columns of 32-value blocks, in the avx2 set (VPMADDUBSW) and
// the avx512vnni set (VPDPBUSD on ymm registers), from one skeleton; the
// shared pieces (argument loading, prefetch, unpacking, float steps) are
// also used by the tile kernels (x86tile.go).

const rowsAVX2Doc = `AVX2+F16C row-group kernels: RowGroup = 8 weight rows (wStride bytes
apart) times n activation columns (aStride bytes apart) of 32-value
blocks, out[j*ldo+r] (the Go wrappers in rows_amd64.go check every
length). Blocks outer, columns inner: each block of the 8 rows is
unpacked once and applied to every column; the column's 8 integer sums
end up in the 8 int32 lanes of one vector (lane r = row r), are
converted, scaled by the rows' dw (Y6, gathered once per block) and the
column's da, and added to the column's 8 outputs, which accumulate in
out itself (zeroed first).

Every output is bit-identical to the generic one-row dot: the integer
sums are exact for any input bytes; the float factor is rounded like
the generic code ((sumi*dw)*da for Q4_0, (dw*da)*sumi for Q5_0 and
Q8_0) with separate multiplies and adds (no FMA); the blocks are added
to each output in block order.

Q4_0 and Q5_0 transpose the 8 rows' quants once per block so that lane
r of chunk c (c < 8) holds row r's 4 unsigned quants of values 4c..4c+3
(Y8+c). The column's activation dword c is broadcast from memory and
VPMADDUBSW(chunk, broadcast) summed over the chunks gives, per lane,
two int16 word sums of q*a; o*sum(a) (o = 8 or 16, the quant offset,
the same for every row) is formed from VPMADDUBSW(o, a) with the same
word pairing and subtracted in int16. Each word then holds sum (q-o)*a
over at most 16 (Q4_0) or 8 (Q5_0, two halves) values, at most
16*8*128 = 8*16*128 = 16384 in magnitude, so the int16 arithmetic
(exact modulo 2^16) gives the right values, and VPMADDWD with ones
widens to int32. No per-column horizontal reduction. Q8_0 (below) uses
the same transposition with VPSIGNB; its one-column kernel
(rowsQ8_0Q8_0x1AVX2) sign-extends the rows to int16 instead and reduces
them with a VPHADDD tree (cheaper when the unpacking is not shared).

Registers: DI out, SI row 0's block, AX row 4's block (unpack) or the
columns left, R10 wStride, R11 3*wStride, DX column 0's block, R8
aStride, CX ldo*4, BX n, R12 blocks left, R9 the column's block, R14 the
column's outputs, R13 scratch (Q8_0).`

const rowsVNNIDoc = `AVX-512 VNNI row-group kernels (the avx512vnni set): the same skeleton
as the AVX2 ones above (8 rows transposed once per block so that lane r
of chunk c holds row r's 4 quants of values 4c..4c+3; columns inner; the
sums of a column in the 8 int32 lanes of one vector; the outputs
accumulate in out; the next row group prefetched linearly), with the
integer work done by VPDPBUSD on 256-bit registers (EVEX, AVX512VL): per
column and chunk one VPDPBUSD of the chunk (unsigned bytes) with the
column's activation dword c broadcast from memory (signed bytes), 4
products summed into each int32 lane without any int16 step.

The weights enter as unsigned bytes u = q + o (Q4_0: the nibble, value
q = u - 8; Q5_0: the 5-bit quant, q = u - 16; Q8_0: w XOR 0x80 = w + 128)
so sum q*a = sum u*a - o*sum a, with o*sum a formed once per column
block by one VPDPBUSD of o bytes with the 32 activation bytes and a
horizontal sum. Every intermediate is exact in int32 (|sum u*a| <=
32*255*128), so the integer sums equal the generic ones for any bytes
(Q8_0 needs no -128 special case). The float part is the AVX2 kernels'
to the instruction: (sumi*dw)*da for Q4_0, sumi*(dw*da) for Q5_0 and
Q8_0, separate multiplies and adds, blocks added in order; so every
output is bit-identical to the generic one-row dot.

Registers as above; R13 the prefetch address, Y8..Y15 the chunks, Y6 the
rows' dw, Y7 the o bytes.`

// rowsQuant is a weight type of the row-group and tile kernels.
type rowsQuant struct {
	name   string // "Q4_0"
	label  string // label prefix
	bsz    int    // block size in bytes
	q4     bool   // Q4_0 float order (sumi*dw)*da
	ocon   string // constant of the o bytes (VNNI; AVX2 Q4_0/Q5_0)
	long   bool   // 5 prefetch lines per block step (8*34 bytes)
	unpack func(a *asm)
}

var rowsQuants = []rowsQuant{
	{"Q4_0", "q4", 18, true, "reights", false, (*asm).unpackQ4},
	{"Q5_0", "q5", 22, false, "rsixteens", false, (*asm).unpackQ5},
	{"Q8_0", "q8", 34, false, "rx80", true, (*asm).unpackQ8},
}

// rowsData emits the constants of the row-group and tile kernels (file
// local; avx2 adds the ones of its Q8_0 kernels).
func (a *asm) rowsData(avx2 bool) {
	a.b.WriteString("\n")
	a.splat("rnib", 0x0f0f0f0f0f0f0f0f, 32)
	a.b.WriteString("\n")
	a.splat("reights", 0x0808080808080808, 32)
	a.b.WriteString("\n")
	a.splat("rsixteens", 0x1010101010101010, 32)
	a.b.WriteString("\n")
	a.splat("rones16", 0x0001000100010001, 32)
	a.b.WriteString("\n// rrep<k> repeats byte k of every dword 4 times (VPSHUFB control).\n")
	var rep []uint64
	for k := uint64(0); k < 4; k++ {
		lo := (0x04040404_00000000 + k*0x01010101_01010101)
		hi := (0x0c0c0c0c_08080808 + k*0x01010101_01010101)
		rep = append(rep, lo, hi, lo, hi)
	}
	a.data("rrep", rep...)
	a.b.WriteString("\n// rbits: byte k of every dword has bit k (low nibble), then bit k+4.\n")
	a.data("rbits", 0x0804020108040201, 0x0804020108040201, 0x0804020108040201, 0x0804020108040201,
		0x8040201080402010, 0x8040201080402010, 0x8040201080402010, 0x8040201080402010)
	a.b.WriteString("\n")
	a.splat("rx80", 0x8080808080808080, 32)
	if avx2 {
		a.b.WriteString("\n")
		a.splat("rx81", 0x8181818181818181, 32)
		a.b.WriteString("\n")
		a.splat("rones8", 0x0101010101010101, 32)
	}
}

// rargs loads the arguments of the row-group kernels.
func (a *asm) rargs() {
	a.l("MOVQ out+0(FP), DI")
	a.l("MOVQ ldo+8(FP), CX")
	a.l("SHLQ $2, CX")
	a.l("MOVQ w+16(FP), SI")
	a.l("MOVQ wStride+24(FP), R10")
	a.l("LEAQ (R10)(R10*2), R11")
	a.l("MOVQ a+32(FP), DX")
	a.l("MOVQ aStride+40(FP), R8")
	a.l("MOVQ nb+48(FP), R12")
	a.l("MOVQ n+56(FP), BX")
}

// pfinit and pfnext prefetch the next row group while this one runs: the
// 8 rows are read block by block, 8 streams wStride apart that the
// hardware prefetchers follow badly, so each block step fetches its share
// (8 blocks' worth of bytes, three cache lines, five for Q8_0) of the next
// group's 8*wStride bytes, linearly. pfinit keeps 8*wStride - 7*w in the
// frame so that pfnext finds the address as 8*SI plus it; prefetches
// never fault, so running past the matrix is harmless. (t and u are
// temporaries.)
func (a *asm) pfinit(t, u string) {
	a.l("LEAQ (R10*8), %s", t)
	a.l("MOVQ SI, %s", u)
	a.l("SHLQ $3, %s", u)
	a.l("SUBQ SI, %s", u)
	a.l("SUBQ %s, %s", u, t)
	a.l("MOVQ %s, pf-8(SP)", t)
}

func (a *asm) pfnext(t string, long bool) {
	a.l("MOVQ pf-8(SP), %s", t)
	a.l("LEAQ (%s)(SI*8), %s", t, t)
	n := 3
	if long {
		n = 5
	}
	for i := 0; i < n; i++ {
		if i == 0 {
			a.l("PREFETCHT0 (%s)", t)
		} else {
			a.l("PREFETCHT0 %d(%s)", 64*i, t)
		}
	}
}

// rzero zeroes the n columns' 8 outputs.
func (a *asm) rzero(loop string) {
	a.l("VXORPS Y0, Y0, Y0")
	a.l("MOVQ DI, R14")
	a.l("MOVQ BX, AX")
	a.label(loop, false)
	a.l("VMOVUPS Y0, (R14)")
	a.l("ADDQ CX, R14")
	a.l("DECQ AX")
	a.l("JNZ %s", loop)
}

// rowAddr is the address of row r's byte off (SI row 0, AX row 4).
func rowAddr(off, r int) string {
	base, idx := "SI", ""
	if r >= 4 {
		base = "AX"
	}
	switch r % 4 {
	case 1:
		idx = "(R10*1)"
	case 2:
		idx = "(R10*2)"
	case 3:
		idx = "(R11*1)"
	}
	if off == 0 {
		return "(" + base + ")" + idx
	}
	return fmt.Sprintf("%d(%s)%s", off, base, idx)
}

// rdw gathers the F16 scales of the 8 rows' blocks into Y6 as float32
// (AX = row 4's block; t a temporary).
func (a *asm) rdw(t string) {
	a.l("MOVWLZX (SI), %s", t)
	a.l("VMOVD %s, X6", t)
	for r := 1; r < 8; r++ {
		a.l("VPINSRW $%d, %s, X6, X6", r, rowAddr(0, r))
	}
	a.l("VCVTPH2PS X6, Y6")
}

// trans4 loads the 16 bytes at off of the 8 rows' blocks and transposes
// them into Y2..Y5: lane r of Y(k+2) = row r's dword k (uses Y0..Y5).
func (a *asm) trans4(off int) {
	for r := 0; r < 4; r++ {
		a.l("VMOVDQU %s, X%d", rowAddr(off, r), r)
		a.l("VINSERTI128 $1, %s, Y%d, Y%d", rowAddr(off, r+4), r, r)
	}
	a.l("VPUNPCKLDQ Y1, Y0, Y4")
	a.l("VPUNPCKHDQ Y1, Y0, Y5")
	a.l("VPUNPCKLDQ Y3, Y2, Y0")
	a.l("VPUNPCKHDQ Y3, Y2, Y1")
	a.l("VPUNPCKLQDQ Y0, Y4, Y2")
	a.l("VPUNPCKHQDQ Y0, Y4, Y3")
	a.l("VPUNPCKLQDQ Y1, Y5, Y4")
	a.l("VPUNPCKHQDQ Y1, Y5, Y5")
}

// nibs4 splits Y2..Y5 (dword k of every row) into the low nibbles (chunk
// k, Y8+k) and the high nibbles (chunk k+4, Y12+k), Y6 rnib.
func (a *asm) nibs4() {
	a.l("VMOVDQU rnib<>(SB), Y6")
	for k := 0; k < 4; k++ {
		d := y(2 + k)
		a.l("VPAND Y6, %s, %s", d, y(8+k))
		a.l("VPSRLW $4, %s, %s", d, d)
		a.l("VPAND Y6, %s, %s", d, y(12+k))
	}
}

// unpackQ4 leaves the 8 rows' Q4_0 quants of the block at SI (AX = row
// 4's block) transposed in Y8..Y15: lane r of Y8+c = row r's 4 unsigned
// quants of values 4c..4c+3 (uses Y0..Y6).
func (a *asm) unpackQ4() {
	a.trans4(2)
	a.nibs4()
}

// unpackQ5 is unpackQ4 for Q5_0 blocks, the fifth bits (qh, gathered from
// the 8 rows and spread by rrep/rbits) ored in as 16 (Y7 rsixteens).
func (a *asm) unpackQ5() {
	a.trans4(6)
	a.nibs4()
	for h, base := range []string{"X0", "X1"} {
		a.l("VMOVD %s, %s", rowAddr(2, 4*h), base)
		for r := 1; r < 4; r++ {
			a.l("VPINSRD $%d, %s, %s, %s", r, rowAddr(2, 4*h+r), base, base)
		}
	}
	a.l("VINSERTI128 $1, X1, Y0, Y0")
	for k := 0; k < 4; k++ {
		a.l("VPSHUFB rrep<>+%d(SB), Y0, Y1", 32*k)
		for h := 0; h < 2; h++ {
			// Or 16 into the bytes whose bit is set in the repeated qh bytes.
			a.l("VPAND rbits<>+%d(SB), Y1, Y2", 32*h)
			a.l("VPCMPEQB rbits<>+%d(SB), Y2, Y2", 32*h)
			a.l("VPAND Y7, Y2, Y2")
			a.l("VPOR Y2, %s, %s", y(8+2*k+h), y(8+2*k+h))
		}
	}
}

// unpackQ8 transposes the 8 rows' Q8_0 quants into Y8..Y15 as unsigned
// bytes w XOR 0x80 (Y7 rx80): o = 128.
func (a *asm) unpackQ8() {
	for h := 0; h < 2; h++ {
		a.trans4(2 + 16*h)
		for k := 0; k < 4; k++ {
			a.l("VPXOR Y7, %s, %s", y(2+k), y(8+4*h+k))
		}
	}
}

// rfac applies the float factors of the column block at R9 (int sums in
// Y1, dw in Y6): (sumi*dw)*da for Q4_0, sumi*(dw*da) otherwise.
func (a *asm) rfac(q4 bool) {
	a.l("VCVTDQ2PS Y1, Y1")
	a.l("VPBROADCASTW (R9), X3")
	a.l("VCVTPH2PS X3, Y3")
	if q4 {
		a.l("VMULPS Y6, Y1, Y1")
		a.l("VMULPS Y3, Y1, Y1")
	} else {
		a.l("VMULPS Y6, Y3, Y3")
		a.l("VMULPS Y3, Y1, Y1")
	}
}

// racc adds Y1 to the column's outputs and steps to the next column.
func (a *asm) racc() {
	a.l("VADDPS (R14), Y1, Y1")
	a.l("VMOVUPS Y1, (R14)")
	a.l("ADDQ R8, R9")
	a.l("ADDQ CX, R14")
	a.l("DECQ AX")
}

// rblockEnd steps to the next block and returns at the end.
func (a *asm) rblockEnd(bsz int, block string) {
	a.b.WriteString("\n")
	a.l("ADDQ $%d, SI", bsz)
	a.l("ADDQ $34, DX")
	a.l("DECQ R12")
	a.l("JNZ %s", block)
	a.l("VZEROUPPER")
	a.l("RET")
}

// mchunk leaves in d the int16 word sums VPMADDUBSW(chunk c, the column's
// activation dword c broadcast).
func (a *asm) mchunk(c int, d string) {
	a.l("VPBROADCASTD %d(R9), %s", 2+4*c, d)
	a.l("VPMADDUBSW %s, %s, %s", d, y(8+c), d)
}

// corr8 leaves in Y3 (every dword) the word pair sums of maddubs(o, a) of
// the column block at R9 over its 8 dwords (o bytes in Y7).
func (a *asm) corr8() {
	a.l("VPMADDUBSW 2(R9), Y7, Y3")
	a.l("VPSHUFD $0x4e, Y3, Y2")
	a.l("VPADDW Y2, Y3, Y3")
	a.l("VPSHUFD $0xb1, Y3, Y2")
	a.l("VPADDW Y2, Y3, Y3")
}

// mquad leaves in d the int16 word sums of chunks c..c+3 (mchunk) as
// (c + c+1) + (c+2 + c+3) (temporaries t1, t2).
func (a *asm) mquad(c int, d, t1, t2 string) {
	a.mchunk(c, d)
	a.mchunk(c+1, t1)
	a.l("VPADDW %s, %s, %s", t1, d, d)
	a.mchunk(c+2, t1)
	a.mchunk(c+3, t2)
	a.l("VPADDW %s, %s, %s", t2, t1, t1)
	a.l("VPADDW %s, %s, %s", t1, d, d)
}

// sumsAVX2 leaves in Y1 the 8 rows' exact int32 sums (q-o)*a with the
// column block at R9 (Q4_0, Q5_0; Y5 ones16).
func (a *asm) sumsAVX2(q rowsQuant) {
	if q.q4 {
		// All 8 chunks in one int16 sum (16 values per word).
		a.mquad(0, "Y0", "Y1", "Y2")
		a.mquad(4, "Y1", "Y2", "Y3")
		a.l("VPADDW Y1, Y0, Y0")
		a.corr8()
		a.l("VPERM2I128 $0x01, Y3, Y3, Y2")
		a.l("VPADDW Y2, Y3, Y3")
		a.l("VPSUBW Y3, Y0, Y0")
		a.l("VPMADDWD Y5, Y0, Y1")
		return
	}
	// Two halves of 4 chunks (8 values per word each).
	a.mquad(0, "Y0", "Y2", "Y3")
	a.mquad(4, "Y1", "Y2", "Y3")
	a.corr8()
	a.l("VPERM2I128 $0x00, Y3, Y3, Y2")
	a.l("VPSUBW Y2, Y0, Y0")
	a.l("VPERM2I128 $0x11, Y3, Y3, Y3")
	a.l("VPSUBW Y3, Y1, Y1")
	a.l("VPMADDWD Y5, Y0, Y0")
	a.l("VPMADDWD Y5, Y1, Y1")
	a.l("VPADDD Y0, Y1, Y1")
}

// sumsVNNI leaves in Y1 the 8 rows' exact sums q*a with the column block
// at R9: the chunks' VPDPBUSD in two chains (Y0, Y1) and o*sum a (Y7 the
// o bytes) summed over the 8 dwords in Y2 (temporary Y3).
func (a *asm) sumsVNNI() {
	a.l("VPXOR Y2, Y2, Y2")
	a.l("VPDPBUSD 2(R9), Y7, Y2")
	a.l("VPXOR Y0, Y0, Y0")
	a.l("VPXOR Y1, Y1, Y1")
	red := []string{"$0x4e", "$0xb1"}
	for c := 0; c < 8; c += 2 {
		a.l("VPDPBUSD.BCST %d(R9), %s, Y0", 2+4*c, y(8+c))
		a.l("VPDPBUSD.BCST %d(R9), %s, Y1", 6+4*c, y(9+c))
		switch c / 2 {
		case 1, 2:
			a.l("VPSHUFD %s, Y2, Y3", red[c/2-1])
			a.l("VPADDD Y3, Y2, Y2")
		case 3:
			a.l("VPERM2I128 $0x01, Y2, Y2, Y3")
			a.l("VPADDD Y3, Y2, Y2")
		}
	}
	a.l("VPADDD Y0, Y1, Y1")
	a.l("VPSUBD Y2, Y1, Y1")
}

// rows emits the row-group kernel of weight type q in tier t (all but
// the avx2 Q8_0 ones, rowsQ8AVX2).
func (a *asm) rows(t x86Tier, q rowsQuant) {
	name := "rows" + q.name + "Q8_0" + t.suffix
	block, col := q.label+"block", q.label+"col"
	a.textX86(name, rowsSig, "NOSPLIT", "$8-64")
	a.rargs()
	a.rzero(q.label + "zero")
	a.l("VMOVDQU %s<>(SB), Y7", q.ocon)
	a.pfinit("R13", "R9")
	a.label(block, true)
	a.l("LEAQ (SI)(R10*4), AX")
	a.pfnext("R13", q.long)
	q.unpack(a)
	a.rdw("R9")
	if !t.vnni {
		a.l("VMOVDQU rones16<>(SB), Y5")
	}
	a.l("MOVQ DX, R9")
	a.l("MOVQ DI, R14")
	a.l("MOVQ BX, AX")
	a.label(col, true)
	if t.vnni {
		a.sumsVNNI()
	} else {
		a.sumsAVX2(q)
	}
	a.rfac(q.q4)
	a.racc()
	a.l("JNZ %s", col)
	a.rblockEnd(q.bsz, block)
}

const rowsQ8AVX2Doc = `Q8_0: both sides signed. The rows are transposed like Q4_0 (chunk c,
lane r = row r's int8 quants 4c..4c+3): |w| in Y8..Y15, w itself in the
scratch at 32c(R13). Per column and chunk: VPSIGNB gives a*sign(w),
VPMADDUBSW(|w|, a*sign(w)) the pair sums w*a (at most 2*128*127, no
saturation) and VPMADDWD with ones the int32 lanes. This is exact unless
an activation is -128 (VPSIGNB cannot negate it), so a column block
holding one takes a slower exact path: a' = max(a, -127), the same sums,
and sum w over the values where a = -128 (VPMADDUBSW of their 0/1 mask
with w, at most 2048 per word) subtracted: a*w = a'*w - w there.
Quantized activations (QuantizeQ8_0) never hold -128.`

// schunk leaves in d the int32 lanes of chunk c's sums with the column
// (|w| chunk Y8+c, ones16 in Y5); clamp replaces an activation -128 by
// -127.
func (a *asm) schunk(c int, d string, clamp bool) {
	a.l("VPBROADCASTD %d(R9), %s", 2+4*c, d)
	if clamp {
		a.l("VPMAXSB rx81<>(SB), %s, %s", d, d)
	}
	a.l("VPSIGNB %d(R13), %s, %s", 32*c, d, d)
	a.l("VPMADDUBSW %s, %s, %s", d, y(8+c), d)
	a.l("VPMADDWD Y5, %s, %s", d, d)
}

// ssum leaves in Y1 the 8 rows' int32 sums (temporaries Y0, Y2, Y3).
func (a *asm) ssum(clamp bool) {
	a.schunk(0, "Y0", clamp)
	a.schunk(1, "Y1", clamp)
	a.l("VPADDD Y1, Y0, Y0")
	a.schunk(2, "Y1", clamp)
	a.schunk(3, "Y2", clamp)
	a.l("VPADDD Y2, Y1, Y1")
	a.l("VPADDD Y1, Y0, Y0")
	a.schunk(4, "Y1", clamp)
	a.schunk(5, "Y2", clamp)
	a.l("VPADDD Y2, Y1, Y1")
	a.schunk(6, "Y2", clamp)
	a.schunk(7, "Y3", clamp)
	a.l("VPADDD Y3, Y2, Y2")
	a.l("VPADDD Y2, Y1, Y1")
	a.l("VPADDD Y0, Y1, Y1")
}

// echunk leaves in d the int16 pair sums of w over chunk c's values where
// a = -128 (rx80 in Y4).
func (a *asm) echunk(c int, d string) {
	a.l("VPBROADCASTD %d(R9), %s", 2+4*c, d)
	a.l("VPCMPEQB Y4, %s, %s", d, d)
	a.l("VPAND rones8<>(SB), %s, %s", d, d)
	a.l("VPMADDUBSW %d(R13), %s, %s", 32*c, d, d)
}

// rowsQ8AVX2 emits rowsQ8_0Q8_0AVX2 (see rowsQ8AVX2Doc).
func (a *asm) rowsQ8AVX2() {
	a.b.WriteString("\n")
	a.doc(rowsQ8AVX2Doc)
	a.textX86("rowsQ8_0Q8_0AVX2", rowsSig, "NOSPLIT", "$296-64")
	a.rargs()
	a.rzero("q8zero")
	a.pfinit("R13", "R9")
	a.l("LEAQ 31(SP), R13")
	a.l("ANDQ $-32, R13")
	a.label("q8block", true)
	a.l("LEAQ (SI)(R10*4), AX")
	a.pfnext("R9", true)
	for h := 0; h < 2; h++ {
		// The 16 bytes at 2+16h of the 8 rows (chunks 4h..4h+3) to the
		// scratch, their absolute values to Y8+4h..
		a.trans4(2 + 16*h)
		for k := 0; k < 4; k++ {
			a.l("VMOVDQU %s, %d(R13)", y(2+k), 32*(4*h+k))
		}
		for k := 0; k < 4; k++ {
			a.l("VPABSB %s, %s", y(2+k), y(8+4*h+k))
		}
	}
	a.rdw("R9")
	a.l("VMOVDQU rones16<>(SB), Y5")
	a.l("VMOVDQU rx80<>(SB), Y4")
	a.l("MOVQ DX, R9")
	a.l("MOVQ DI, R14")
	a.l("MOVQ BX, AX")
	a.label("q8col", true)
	a.l("VPCMPEQB 2(R9), Y4, Y0")
	a.l("VPTEST Y0, Y0")
	a.l("JNZ q8slow")
	a.ssum(false)
	a.b.WriteString("\n")
	a.label("q8fac", false)
	a.rfac(false)
	a.racc()
	a.l("JNZ q8col")
	a.rblockEnd(34, "q8block")
	a.b.WriteString("\n")
	a.label("q8slow", false)
	a.ssum(true)
	a.echunk(0, "Y0")
	a.echunk(1, "Y2")
	a.l("VPADDW Y2, Y0, Y0")
	for c := 2; c < 8; c += 2 {
		a.echunk(c, "Y2")
		a.echunk(c+1, "Y3")
		a.l("VPADDW Y3, Y2, Y2")
		a.l("VPADDW Y2, Y0, Y0")
	}
	a.l("VPMADDWD Y5, Y0, Y0")
	a.l("VPSUBD Y0, Y1, Y1")
	a.l("JMP q8fac")
}

// q8r1 leaves in d the int32 lanes of row r's sum with the column
// (activations as int16 in Y0:Y1), the weights sign-extended on the fly.
func (a *asm) q8r1(r int, d, t string) {
	a.l("VPMOVSXBW %s, %s", rowAddr(2, r), d)
	a.l("VPMADDWD Y0, %s, %s", d, d)
	a.l("VPMOVSXBW %s, %s", rowAddr(18, r), t)
	a.l("VPMADDWD Y1, %s, %s", t, t)
	a.l("VPADDD %s, %s, %s", t, d, d)
}

// rowsQ8x1AVX2 emits rowsQ8_0Q8_0x1AVX2, the one-column case (n == 1):
// the integer sums of the 8 rows (int16 VPMADDWD, exact for any bytes)
// reduced with a VPHADDD tree, the same float operations as
// rowsQ8_0Q8_0AVX2 (the sum in Y15).
func (a *asm) rowsQ8x1AVX2() {
	a.textX86("rowsQ8_0Q8_0x1AVX2", rowsSig, "NOSPLIT", "$8-64")
	a.rargs()
	a.l("VXORPS Y15, Y15, Y15")
	a.pfinit("R13", "R9")
	a.label("q81block", true)
	a.l("LEAQ (SI)(R10*4), AX")
	a.pfnext("R13", true)
	a.l("VPMOVSXBW 2(DX), Y0")
	a.l("VPMOVSXBW 18(DX), Y1")
	// Rows r and r+1 into Y(2+..) pairwise added, a tree per half.
	for h := 0; h < 2; h++ {
		a.q8r1(4*h, y(2+h), "Y"+fmt.Sprint(7+4*h))
		a.q8r1(4*h+1, y(3+h), "Y"+fmt.Sprint(8+4*h))
		a.l("VPHADDD %s, %s, %s", y(3+h), y(2+h), y(2+h))
		a.q8r1(4*h+2, y(3+h), "Y"+fmt.Sprint(9+4*h))
		a.q8r1(4*h+3, y(4+h), "Y"+fmt.Sprint(10+4*h))
		a.l("VPHADDD %s, %s, %s", y(4+h), y(3+h), y(3+h))
		a.l("VPHADDD %s, %s, %s", y(3+h), y(2+h), y(2+h))
	}
	a.l("VPERM2I128 $0x21, Y3, Y2, Y4")
	a.l("VPBLENDD $0xf0, Y3, Y2, Y1")
	a.l("VPADDD Y4, Y1, Y1")
	a.rdw("R9")
	a.l("MOVQ DX, R9")
	a.rfac(false)
	a.l("VADDPS Y1, Y15, Y15")
	a.l("ADDQ $34, SI")
	a.l("ADDQ $34, DX")
	a.l("DECQ R12")
	a.l("JNZ q81block")
	a.l("VMOVUPS Y15, (DI)")
	a.l("VZEROUPPER")
	a.l("RET")
}

// genRows writes rows_amd64.s.
func genRows(a *asm) {
	a.b.WriteString("\n")
	a.doc(rowsAVX2Doc)
	a.rowsData(true)
	for _, q := range rowsQuants[:2] {
		a.rows(tierAVX2, q)
	}
	a.rowsQ8AVX2()
	a.rowsQ8x1AVX2()
	a.b.WriteString("\n")
	a.doc(rowsVNNIDoc)
	for _, q := range rowsQuants {
		a.rows(tierVNNI, q)
	}
}
