package main

import "fmt"

// The avx512vnni set's kernels over packed weights (pack_vnni_amd64.s for
// Q4_0, Q5_0, Q8_0 and packk_vnni_amd64.s for Q4_K, Q5_K, Q6_K): groups
// of 16 weight rows, one per int32 lane of a zmm register, against tiles
// of activation columns whose sums stay in registers for the whole row.
// Both share the loops over groups and tiles, the column positions, the
// jump into a tile narrower than the widest and the stores (ptiles); they
// differ in the tile width (16 columns of float sums, or 8 columns of
// float sums and int32 totals) and in the block body.

const packDoc = `AVX-512 VNNI kernels over the packed layouts of pack_vnni_amd64.go:
groups of 16 weight rows, one row per int32 lane of a zmm register.
Per 32-value block a group holds the 16 rows' F16 scales (32 bytes),
then chunk k of every row side by side (64 bytes: row r's dword k at
4r): for Q4_0 the 4 bytes of nibbles k (low nibbles values 4k..4k+3,
high ones 16+4k..), for Q5_0 first the 16 rows' qh words, for Q8_0 the
8 chunks of quants already XORed with 0x80. So a block unpacks with
whole-register loads and logic: no transposes, no scale gathers, one
linear stream per group.

The activations are prepared once per product (packQ8_0VNNI): per
column and block a 40-byte entry holding the 32 quants, -o*sum(quants)
(o = 8, 16, 128: the weights enter VPDPBUSD as the unsigned u = q + o)
and the scale as float32; column j's entries are aStride bytes after
column j-1's. Per column and block: two VPDPBUSD chains over the 8
chunks with the activation dwords broadcast from memory (the first
chain starting from -o*sum), their sum converted to float, then the
generic float steps to the instruction: (sumi*dw)*da for Q4_0,
sumi*(dw*da) for Q5_0 and Q8_0, added to the row's running sum block
after block. The integer sums are exact, so every output is
bit-identical to the generic one-row dot.

Columns go in tiles of up to 16 (a verification batch of 1 + 15 drafted
tokens is one tile), their sums in Z16..Z31 for the whole row of
blocks: tile position p (0..15) reads its entries from four column
pointers R9 (position 0), R10 (5), R11 (10), R14 (15) and the strides
R8 = aStride, R13 = 3*aStride. A tile of T columns takes positions
16-T..15 (the pointers are set back by 16-T columns), entered by a jump
on T in every block. Positions 0..11 sum in one VPDPBUSD chain (their
columns run 16 or 12 abreast, so the chains overlap), the last four in
two, so that a tile of one to four columns (decoding) waits less on
latency.

Registers: DI the tile's outputs (row 0 of the group, column 0 of the
tile), CX ldo*4, SI the group's current block, R12 blocks left, BX
columns left, DX the tile's first column, AX temporary, t-8(SP) the
tile's width, grp-16(SP) and gout-24(SP) the group's first block and
outputs, ng-32(SP) the groups left. Z8..Z15 the unpacked chunks, Z6 the
rows' dw, Z7 the nibble mask, Z0..Z3 the integer chains, Z4 temporary.`

const packKDoc = `AVX-512 VNNI kernels over the packed k-quant layouts of
packk_vnni_amd64.go: groups of 16 weight rows, one row per int32 lane,
against up to 8 activation columns of Q8_K blocks (the rows QuantizeQ8_K
writes, no preparation) kept in registers for the whole row.

Per super-block and column the integer work is exact: for every
sub-block (32 values for Q4_K and Q5_K, 16 for Q6_K) one VPDPBUSD chain
of the unsigned quants with the activation dwords broadcast from memory,
the sum multiplied by the rows' sub-block scales (VPMULLD) and added to
an int32 total; the Q4_K/Q5_K mins (or Q6_K's -32 offset) enter through
the Q8_K bsums (VPDPWSSD with the rows' mins, or scales, as int16
pairs). The float step per super-block is fixed: Q4_K/Q5_K acc =
fma(d*yd, isum, acc) then acc = fnma(dmin*yd, msum, acc); Q6_K acc =
fma(d*yd, isum-32*msum, acc). The generic dots sum the same exact
integers in 8 float lanes instead, so the outputs differ from them by
float rounding only (kquantTol), and each output is the same whatever
the number of columns or the group that computes it.

Tiles of T <= 8 columns take positions 8-T..7 (pointers set back by 8-T
columns), entered by a jump on T. Registers: DI the tile's outputs, CX
ldo*4, SI the super-block, R12 super-blocks left, BX columns left, DX
the tile's first column, R8 aStride, R13 3*aStride, R9 position 0, R10
position 5, R11 the quants, AX the scales, R14 a counter, t-8(SP) T.
Z16..Z23 the columns' float sums, Z24..Z31 their int32 totals, Z8..Z15
the unpacked quants (later the mins or scale pairs), Z0 the sub-block
scales, Z1..Z7 temporaries.`

const packSigX86 = "(out *float32, ldo int, w *byte, groups int, a *byte, aStride, nb, n int)"

// posAddr is the address off bytes into the entry of tile position p:
// five positions (aStride apart) per column pointer R9, R10, R11, R14.
func posAddr(p, off int) string {
	base := []string{"R9", "R10", "R11", "R14"}[p/5]
	idx := []string{"", "(R8*1)", "(R8*2)", "(R13*1)", "(R8*4)"}[p%5]
	return fmt.Sprintf("%d(%s)%s", off, base, idx)
}

// ptiles holds the state of one packed kernel's emission: its tile width
// and a counter for unique labels.
type ptiles struct {
	a      *asm
	width  int
	labels int
}

// ladder jumps on T (t-8(SP)) to position width-T and emits body(p) for
// the positions p = 0..width-1 in order, each behind its label, so that
// a tile of T columns runs the last T.
func (k *ptiles) ladder(first []int, body func(p int)) {
	k.labels++
	prefix := fmt.Sprintf("l%d", k.labels)
	at := func(p int) string { return fmt.Sprintf("%sp%d", prefix, p) }
	k.a.jumpT("t-8(SP)", prefix, 1, k.width, first, func(t int) string { return at(k.width - t) })
	for p := 0; p < k.width; p++ {
		k.a.label(at(p), false)
		body(p)
	}
}

// begin loads the arguments and opens the loops over groups and tiles:
// per tile T = min(columns left, width), the column pointers set back by
// width-T columns, Z16..Z31 zeroed, SI at the group's first block and
// R12 its blocks.
func (k *ptiles) begin() {
	a := k.a
	a.l("MOVQ out+0(FP), DI")
	a.l("MOVQ ldo+8(FP), CX")
	a.l("SHLQ $2, CX")
	a.l("MOVQ w+16(FP), SI")
	a.l("MOVQ aStride+40(FP), R8")
	a.l("LEAQ (R8)(R8*2), R13")
	a.l("MOVQ groups+24(FP), AX")
	a.l("MOVQ AX, ng-32(SP)")
	a.label("group", false)
	a.l("MOVQ a+32(FP), DX")
	a.l("MOVQ n+56(FP), BX")
	a.l("MOVQ SI, grp-16(SP)")
	a.l("MOVQ DI, gout-24(SP)")
	a.label("tile", false)
	a.l("MOVQ $%d, AX", k.width)
	a.l("CMPQ BX, AX")
	a.l("CMOVQLT BX, AX")
	a.l("MOVQ AX, t-8(SP)")
	a.l("NEGQ AX")
	a.l("ADDQ $%d, AX", k.width)
	a.l("IMULQ R8, AX")
	a.l("MOVQ DX, R9")
	a.l("SUBQ AX, R9")
	for i, r := range []string{"R10", "R11", "R14"}[:(k.width-1)/5] {
		prev := []string{"R9", "R10", "R11"}[i]
		a.l("LEAQ (%s)(R8*4), %s", prev, r)
		a.l("ADDQ R8, %s", r)
	}
	for i := 16; i < 32; i++ {
		a.l("VPXORD %s, %s, %s", z(i), z(i), z(i))
	}
	a.l("MOVQ grp-16(SP), SI")
	a.l("MOVQ nb+48(FP), R12")
}

// end stores the tile's T columns' 16 row sums (Z16+p) and moves on to
// the next tile, group or the end.
func (k *ptiles) end(first []int) {
	a := k.a
	k.ladder(first, func(p int) {
		a.l("VMOVUPS %s, (DI)", z(16+p))
		a.l("ADDQ CX, DI")
	})
	a.l("MOVQ t-8(SP), AX")
	a.l("IMULQ R8, AX")
	a.l("ADDQ AX, DX")
	a.l("SUBQ t-8(SP), BX")
	a.l("JNZ tile")
	a.l("MOVQ gout-24(SP), DI")
	a.l("ADDQ $64, DI")
	a.l("DECQ ng-32(SP)")
	a.l("JNZ group")
	a.l("VZEROUPPER")
	a.l("RET")
}

// x16Quant is a 32-value block type of the x16 kernels.
type x16Quant struct {
	name   string
	bsz    int // packed block of 16 rows
	lines  int // prefetched cache lines per block
	q4     bool
	unpack func(a *asm)
}

var x16Quants = []x16Quant{
	{"Q4_0", 288, 5, true, (*asm).unpackQ4x16},
	{"Q5_0", 352, 6, false, (*asm).unpackQ5x16},
	{"Q8_0", 544, 9, false, (*asm).unpackQ8x16},
}

// nib16 splits chunk off of the block at SI into its low (lo) and high
// (hi) nibbles (Z7 the nibble mask; Z0 temporary).
func (a *asm) nib16(off int, lo, hi string) {
	a.l("VMOVDQU64 %d(SI), Z0", off)
	a.l("VPSRLW $4, Z0, %s", hi)
	a.l("VPANDD Z7, Z0, %s", lo)
	a.l("VPANDD Z7, %s, %s", hi, hi)
}

// unpackQ4x16: the 16 rows' dw in Z6, the unsigned quants of values
// 4c..4c+3 of every row in Z8+c.
func (a *asm) unpackQ4x16() {
	a.l("VCVTPH2PS (SI), Z6")
	for k := 0; k < 4; k++ {
		a.nib16(32+64*k, z(8+k), z(12+k))
	}
}

// unpackQ5x16 adds 16 to the bytes of chunk c whose fifth bit is set:
// bits 4c..4c+3 of every row's qh (in Z5), byte c/2 repeated over the
// dword (pqh), tested against 1,2,4,8 or 16,32,64,128 (pbits).
func (a *asm) unpackQ5x16() {
	a.l("VCVTPH2PS (SI), Z6")
	for k := 0; k < 4; k++ {
		a.nib16(96+64*k, z(8+k), z(12+k))
	}
	a.l("VMOVDQU64 32(SI), Z5")
	for c := 0; c < 8; c++ {
		a.l("VPSHUFB pqh<>+%d(SB), Z5, Z0", 64*(c/2))
		a.l("VPTESTMB pbits<>+%d(SB), Z0, K1", 64*(c%2))
		a.l("VPADDB p16s<>(SB), %s, K1, %s", z(8+c), z(8+c))
	}
}

func (a *asm) unpackQ8x16() {
	a.l("VCVTPH2PS (SI), Z6")
	for c := 0; c < 8; c++ {
		a.l("VMOVDQU64 %d(SI), %s", 32+64*c, z(8+c))
	}
}

// mulX16 emits the x16 kernel of weight type q.
func (a *asm) mulX16(q x16Quant) {
	a.textX86("mul"+q.name+"x16VNNI", packSigX86, "NOSPLIT", "$32-64")
	k := &ptiles{a: a, width: 16}
	a.l("MOVL $0x0f0f0f0f, AX")
	a.l("VPBROADCASTD AX, Z7")
	k.begin()
	a.label("blk", false)
	for i := 0; i < q.lines; i++ {
		// The block 2048 bytes ahead.
		a.l("PREFETCHT0 %d(SI)", 2048+64*i)
	}
	q.unpack(a)
	k.ladder([]int{16, 1}, func(p int) {
		c0, c1 := "Z0", "Z1"
		if p%2 == 1 {
			c0, c1 = "Z2", "Z3"
		}
		m := func(off int) string { return posAddr(p, off) }
		a.vcol(q.q4, z, "Z6", m, c0, c1, z(16+p), p < 12)
	})
	for _, r := range []string{"R9", "R10", "R11", "R14"} {
		a.l("ADDQ $%d, %s", packEntry, r)
	}
	a.l("ADDQ $%d, SI", q.bsz)
	a.l("DECQ R12")
	a.l("JNZ blk")
	k.end([]int{16, 1})
}

// genPack writes pack_vnni_amd64.s.
func genPack(a *asm) {
	a.b.WriteString("\n")
	a.doc(packDoc)
	for _, q := range x16Quants {
		a.mulX16(q)
	}
	a.b.WriteString("\n// pqh: VPSHUFB controls repeating byte c of every dword over the dword\n// (c = 0..3, 64 bytes each).\n")
	var qh []uint64
	for c := uint64(0); c < 4; c++ {
		for i := 0; i < 4; i++ {
			qh = append(qh, 0x04040404_00000000+c*0x01010101_01010101, 0x0c0c0c0c_08080808+c*0x01010101_01010101)
		}
	}
	a.data("pqh", qh...)
	a.b.WriteString("\n// pbits: byte k of every dword tests bit k (low nibble), then bit k+4.\n")
	var bits []uint64
	for i := 0; i < 16; i++ {
		bits = append(bits, []uint64{0x0804020108040201, 0x8040201080402010}[i/8])
	}
	a.data("pbits", bits...)
	a.b.WriteString("\n")
	a.splat("p16s", 0x1010101010101010, 64)
}

// ksub adds one sub-block of a column (entry at position p, its
// activation dwords at off) to the int32 total isum: a VPDPBUSD chain in
// tc over the chunks w, times the rows' scales sc.
func (a *asm) ksub(p, off int, w []string, sc, tc, isum string) {
	a.l("VPXORD %s, %s, %s", tc, tc, tc)
	for k, r := range w {
		a.l("VPDPBUSD.BCST %s, %s, %s", posAddr(p, off+4*k), r, tc)
	}
	a.l("VPMULLD %s, %s, %s", sc, tc, tc)
	a.l("VPADDD %s, %s, %s", tc, isum, isum)
}

// zs returns the registers Z(from)..Z(from+n-1).
func zs(from, n int) []string {
	r := make([]string, n)
	for i := range r {
		r[i] = z(from + i)
	}
	return r
}

// k4cols runs a 32-value sub-block (chunks Z8..Z15, scales Z0,
// activations at off) for the tile's columns.
func (k *ptiles) k4cols(off int) {
	k.ladder(nil, func(p int) {
		tc := []string{"Z1", "Z2"}[p%2]
		k.a.ksub(p, off, zs(8, 8), "Z0", tc, z(24+p))
	})
}

// kfins runs fin (a super-block's end) for the tile's columns.
func (k *ptiles) kfins(fin func(p int, acc, isum string)) {
	k.ladder(nil, func(p int) { fin(p, z(16+p), z(24+p)) })
}

// k4fin is Q4_K's (and Q5_K's) end of a super-block for the column at
// position p (its pointer 256 bytes into its block): msum from the bsum
// pairs and the rows' mins (Z8..Z15, (m_j, m_j) int16 pairs), then the
// float step.
func (a *asm) k4fin(p int, acc, isum string) {
	a.l("VPXORD Z1, Z1, Z1")
	for j := 0; j < 8; j++ {
		a.l("VPDPWSSD.BCST %s, %s, Z1", posAddr(p, 4+4*j), z(8+j))
	}
	a.l("VCVTDQ2PS Z1, Z1")
	a.l("VCVTDQ2PS %s, Z2", isum)
	a.l("VMULPS.BCST %s, Z6, Z3", posAddr(p, -256))
	a.l("VFMADD231PS Z2, Z3, %s", acc)
	a.l("VMULPS.BCST %s, Z7, Z3", posAddr(p, -256))
	a.l("VFNMADD231PS Z1, Z3, %s", acc)
	a.l("VPXORD %s, %s, %s", isum, isum, isum)
}

// k4mins puts the 16 rows' mins of every sub-block j as (m, m) int16
// pairs in Z8+j (the low 2 bits from the top of the scale bytes at
// 64+16j, the high 4 from nibble 4*(j%2) of the bytes at 192+16*(j/2)),
// d in Z6 and dmin in Z7.
func (a *asm) k4mins() {
	for j := 0; j < 8; j++ {
		a.l("VPMOVZXBD %d(SI), Z1", 64+16*j)
		a.l("VPSRLD $6, Z1, Z1")
		a.l("VPMOVZXBD %d(SI), Z2", 192+16*(j/2))
		a.l("VPSRLD $%d, Z2, Z2", 4*(j%2))
		a.l("VPANDD.BCST k0f<>(SB), Z2, Z2")
		a.l("VPSLLD $2, Z2, Z2")
		a.l("VPORD Z2, Z1, Z1")
		a.l("VPSLLD $16, Z1, Z2")
		a.l("VPORD Z2, Z1, %s", z(8+j))
	}
	a.l("VCVTPH2PS (SI), Z6")
	a.l("VCVTPH2PS 32(SI), Z7")
}

// ksc puts sub-block j's 6-bit scales (bytes at off(SI)) as int32 in Z0.
func (a *asm) ksc(off int) {
	a.l("VPMOVZXBD %d(SI), Z0", off)
	a.l("VPANDD.BCST k3f<>(SB), Z0, Z0")
}

// kblockEnd steps the column pointers by step, SI to the next
// super-block (sbsz bytes), and loops.
func (a *asm) kblockEnd(step, sbsz int) {
	a.l("ADDQ $%d, R9", step)
	a.l("ADDQ $%d, R10", step)
	a.l("ADDQ $%d, SI", sbsz)
	a.l("DECQ R12")
	a.l("JNZ sblk")
}

// mulQ4_K emits mulQ4_Kx16VNNI.
func (a *asm) mulQ4_K() {
	a.textX86("mulQ4_Kx16VNNI", packSigX86, "NOSPLIT", "$32-64")
	k := &ptiles{a: a, width: 8}
	k.begin()
	a.label("sblk", false)
	a.l("PREFETCHT0 2304(SI)")
	a.l("LEAQ 256(SI), R11")
	a.l("LEAQ 64(SI), AX")
	a.l("MOVQ $4, R14")
	a.l("VPBROADCASTD k0f<>(SB), Z4")
	a.label("pair", false)
	// Sub-block 2p: the low nibbles of the chunks at R11, its scales.
	for c := 0; c < 8; c++ {
		a.l("VPANDD %d(R11), Z4, %s", 64*c, z(8+c))
	}
	a.l("VPMOVZXBD (AX), Z0")
	a.l("VPANDD.BCST k3f<>(SB), Z0, Z0")
	k.k4cols(4)
	// Sub-block 2p+1: the high nibbles.
	for c := 0; c < 8; c++ {
		a.l("VPSRLW $4, %d(R11), %s", 64*c, z(8+c))
		a.l("VPANDD Z4, %s, %s", z(8+c), z(8+c))
	}
	a.l("VPMOVZXBD 16(AX), Z0")
	a.l("VPANDD.BCST k3f<>(SB), Z0, Z0")
	k.k4cols(36)
	a.l("ADDQ $512, R11")
	a.l("ADDQ $32, AX")
	a.l("ADDQ $64, R9")
	a.l("ADDQ $64, R10")
	a.l("DECQ R14")
	a.l("JNZ pair")
	// The mins, d and dmin; each column's float step.
	a.k4mins()
	k.kfins(a.k4fin)
	a.kblockEnd(36, 2304)
	k.end(nil)
}

// mulQ5_K emits mulQ5_Kx16VNNI: as Q4_K, each sub-block's quants with
// their fifth bit: bit j of the qh chunk c (16 rows' dwords at
// 256+64c(SI)) shifted into bit 4 (VPSLLW by 4-j or VPSRLW by j-4),
// masked (Z5, 0x10) and combined with the nibbles (Z4, 0x0F) by
// VPTERNLOGD as (Z4 & nib) | (~Z4 & bit).
func (a *asm) mulQ5_K() {
	a.textX86("mulQ5_Kx16VNNI", packSigX86, "NOSPLIT", "$32-64")
	k := &ptiles{a: a, width: 8}
	k.begin()
	a.l("VPBROADCASTD k0f<>(SB), Z4")
	a.l("VPBROADCASTD k10<>(SB), Z5")
	a.label("sblk", false)
	a.l("PREFETCHT0 2816(SI)")
	a.l("LEAQ 768(SI), R11")
	for j := 0; j < 8; j++ {
		if j > 0 && j%2 == 0 {
			a.l("ADDQ $512, R11")
		}
		shift, sh := "VPSLLW", 4-j
		if j >= 4 {
			shift, sh = "VPSRLW", j-4
		}
		for c := 0; c < 8; c++ {
			nib := fmt.Sprintf("%d(R11)", 64*c)
			if j%2 == 1 {
				// Sub-block 2p+1: the high nibbles.
				a.l("VPSRLW $4, %d(R11), Z1", 64*c)
				nib = "Z1"
			}
			a.l("%s $%d, %d(SI), %s", shift, sh, 256+64*c, z(8+c))
			a.l("VPANDD Z5, %s, %s", z(8+c), z(8+c))
			a.l("VPTERNLOGD $0xb8, %s, Z4, %s", nib, z(8+c))
		}
		a.ksc(64 + 16*j)
		k.k4cols(4 + 32*j)
	}
	// The mins, d and dmin; each column's float step (k4fin reads the
	// activations 256 bytes into the block).
	a.k4mins()
	a.l("ADDQ $256, R9")
	a.l("ADDQ $256, R10")
	k.kfins(a.k4fin)
	a.kblockEnd(36, 2816)
	k.end(nil)
}

// k6fin is Q6_K's end of a super-block for the column at position p
// (pointers at the block): msum = sum of scale*bsum (Z8..Z15 the scale
// pairs), the total minus 32*msum, then acc = fma(d*yd, total, acc).
func (a *asm) k6fin(p int, acc, isum string) {
	a.l("VPXORD Z1, Z1, Z1")
	for j := 0; j < 8; j++ {
		a.l("VPDPWSSD.BCST %s, %s, Z1", posAddr(p, 260+4*j), z(8+j))
	}
	a.l("VPSLLD $5, Z1, Z1")
	a.l("VPSUBD Z1, %s, %s", isum, isum)
	a.l("VCVTDQ2PS %s, Z2", isum)
	a.l("VMULPS.BCST %s, Z6, Z3", posAddr(p, 0))
	a.l("VFMADD231PS Z2, Z3, %s", acc)
	a.l("VPXORD %s, %s, %s", isum, isum, isum)
}

// k6quad emits quad (h, u) of a Q6_K super-block: its 12 chunks at q(SI)
// (4 ql chunks A, 4 ql chunks B, 4 qh chunks H), its scale pairs at
// sc(SI) (the even member for u = 0, the odd one for u = 1), its first
// sub-block's activations at act: sub-blocks s0 = 8h+u (A low, qh bits
// 0-1) and s0+2 (B low, bits 2-3), then s0+4 (A high, bits 4-5) and s0+6
// (B high, bits 6-7), 32 bytes of activations apart. The 6-bit quants:
// the nibbles of the ql chunk, the two bits of the qh chunk shifted into
// bits 4-5, combined by VPTERNLOGD as Z | (Z4 & ql) (Z4 the nibble mask).
func (k *ptiles) k6quad(q, sc int, odd bool, act int) {
	a := k.a
	scale := func(off int, r string) {
		a.l("VPMOVSXBW %d(SI), %s", off, r)
		if !odd {
			a.l("VPSLLD $16, %s, %s", r, r)
		}
		a.l("VPSRAD $16, %s, %s", r, r)
	}
	for half := 0; half < 2; half++ {
		for c := 0; c < 8; c++ {
			qoff, hoff := q+64*c, q+512+64*(c%4)
			r := z(8 + c)
			// Bits 0-1 (A) or 2-3 (B) of qh into bits 4-5 for the low
			// nibbles, bits 4-5 or 6-7 for the high ones.
			if half == 0 {
				a.l("VPSLLW $%d, %d(SI), %s", 4-2*(c/4), hoff, r)
				a.l("VPANDD.BCST k30<>(SB), %s, %s", r, r)
				a.l("VPTERNLOGD $0xf8, %d(SI), Z4, %s", qoff, r)
			} else {
				a.l("VPSRLW $4, %d(SI), Z1", qoff)
				a.l("VPSRLW $%d, %d(SI), %s", 2*(c/4), hoff, r)
				a.l("VPANDD.BCST k30<>(SB), %s, %s", r, r)
				a.l("VPTERNLOGD $0xf8, Z1, Z4, %s", r)
			}
		}
		scale(sc+64*half, "Z0")
		scale(sc+64*half+32, "Z7")
		offa, offb := act+64*half, act+64*half+32
		k.ladder(nil, func(p int) {
			tc := []string{"Z1", "Z2"}[p%2]
			a.ksub(p, offa, zs(8, 4), "Z0", tc, z(24+p))
			a.ksub(p, offb, zs(12, 4), "Z7", tc, z(24+p))
		})
	}
}

// mulQ6_K emits mulQ6_Kx16VNNI.
func (a *asm) mulQ6_K() {
	a.textX86("mulQ6_Kx16VNNI", packSigX86, "NOSPLIT", "$32-64")
	k := &ptiles{a: a, width: 8}
	k.begin()
	a.l("VPBROADCASTD k0f<>(SB), Z4")
	a.label("sblk", false)
	a.l("PREFETCHT0 3360(SI)")
	// Quads (0,0), (0,1), (1,0), (1,1): chunks at 288+768Q, scale pairs
	// 4h.. at 32+128h, activations of s0 = 8h+u at 4+128h+16u.
	for qd := 0; qd < 4; qd++ {
		h, u := qd/2, qd%2
		k.k6quad(288+768*qd, 32+128*h, u == 1, 4+128*h+16*u)
	}
	// The scale pairs, d; each column's end.
	for j := 0; j < 8; j++ {
		a.l("VPMOVSXBW %d(SI), %s", 32+32*j, z(8+j))
	}
	a.l("VCVTPH2PS (SI), Z6")
	k.kfins(a.k6fin)
	a.kblockEnd(292, 3360)
	k.end(nil)
}

// data4 emits a 4-byte read-only constant.
func (a *asm) data4(name string, w uint32) {
	a.b.WriteString(fmt.Sprintf("\nDATA %s<>+0(SB)/4, $0x%08x\nGLOBL %s<>(SB), RODATA|NOPTR, $4\n", name, w, name))
}

// genPackK writes packk_vnni_amd64.s.
func genPackK(a *asm) {
	a.b.WriteString("\n")
	a.doc(packKDoc)
	a.mulQ4_K()
	a.mulQ6_K()
	a.mulQ5_K()
	a.data4("k10", 0x10101010)
	a.data4("k0f", 0x0f0f0f0f)
	a.data4("k3f", 0x0000003f)
	a.data4("k30", 0x30303030)
}
