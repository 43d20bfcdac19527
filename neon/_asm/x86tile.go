package main

import "fmt"

// The avx512vnni set's tile kernels (tile_vnni_amd64.s): the row-group
// kernels' 8 rows and unpacking (x86rows.go) against activations packed
// once per product, with the outputs of up to 12 columns in registers.

const tileDoc = `AVX-512 VNNI tile kernels (the avx512vnni set's Tile kernels): RowGroup
weight rows × n activation columns like the row-group kernels in
rows_amd64.s, but over activations packed once per matrix product
(packQ8_0VNNI) and with the outputs of up to 12 columns in registers for
the whole row.

The packed activations hold, per block b and column j, a 40-byte entry
at (b*n + j)*40: the 32 int8 quants, the int32 -o*sum(quants) (o = 8, 16
or 128, the weight type's unsigned offset) and the float32 scale da. So
per column and block the kernel needs no offset correction of its own
(the VPDPBUSD chain starts from -o*sum a), no F16 conversion (da is a
broadcast memory operand) and no load or store of its outputs (they
stay in Y16..Y27); the 8 rows' blocks are unpacked once per block for a
tile of up to 12 columns (a verification batch of 1 + 8..11 drafted
tokens is one tile). The integer sums are exact and the float
steps are those of the row-group kernels to the instruction
((sumi*dw)*da for Q4_0, sumi*(dw*da) for Q5_0 and Q8_0, added to the
running sum block after block), so every output is bit-identical to the
generic one-row dot.

Tiles of T = min(columns left, 12) columns run until none are left.
Column position p (0..11) sums into Y16+p from the packed entry at
40p(R9); a tile of T columns takes the last T positions (R9 set back by
12-T entries), entered by a jump on T in every block and again for the
stores. The integer chains of even positions use Y28, Y29, of odd ones
Y30, Y31 (renaming makes every column independent).

Registers: R14 out (the tile's first column), CX ldo*4, SI row 0's
block, AX row 4's block, R10 wStride, R11 3*wStride, DX the tile's
first packed entry of block 0, R9 the tile's entry of the current block,
R8 n*40 (one block's entries), BX columns left, DI the tile's columns,
R12 blocks left, R13 the prefetch address and the scale gather's
temporary. Y8..Y15 the unpacked chunks, Y6 the rows' dw, Y7 the
Q5_0/Q8_0 constant, Y16..Y27 the tile's sums, Y28..Y31 the columns'
integer chains.`

// packEntry is the size of a packed activation entry: 32 quants,
// -o*sum(quants) as int32, the scale as float32.
const packEntry = 40

// jumpT jumps to target(T) for the value T of operand t in lo..hi, after
// checking the values first, in order (the common widths), by a binary
// search (local labels prefix...).
func (a *asm) jumpT(t, prefix string, lo, hi int, first []int, target func(int) string) {
	for _, v := range first {
		a.l("CMPQ %s, $%d", t, v)
		a.l("JEQ %s", target(v))
	}
	a.jumpSearch(t, prefix, lo, hi, target)
}

func (a *asm) jumpSearch(t, prefix string, lo, hi int, target func(int) string) {
	if lo == hi {
		a.l("JMP %s", target(lo))
		return
	}
	mid := (lo + hi + 1) / 2
	a.l("CMPQ %s, $%d", t, mid)
	a.l("JEQ %s", target(mid))
	if mid == hi {
		a.jumpSearch(t, prefix, lo, mid-1, target)
		return
	}
	lt := fmt.Sprintf("%slt%d_%d", prefix, lo, mid)
	a.l("JLT %s", lt)
	a.jumpSearch(t, prefix, mid+1, hi, target)
	a.label(lt, false)
	a.jumpSearch(t, prefix, lo, mid-1, target)
}

// vsums leaves in c1, as float32, the exact sums q*a of the rows' chunks
// (v8..v15 of register kind v) with the packed entry at m (its dword k at
// 4k+m, -o*sum at 32+m): two VPDPBUSD chains, c0 starting from -o*sum,
// or one (c1 starting from it) when one is set.
func (a *asm) vsums(v func(int) string, m func(int) string, c0, c1 string, one bool) {
	if one {
		a.l("VPBROADCASTD %s, %s", m(32), c1)
		for k := 0; k < 8; k++ {
			a.l("VPDPBUSD.BCST %s, %s, %s", m(4*k), v(8+k), c1)
		}
	} else {
		a.l("VPBROADCASTD %s, %s", m(32), c0)
		a.l("VPXORD %s, %s, %s", c1, c1, c1)
		for k := 0; k < 8; k++ {
			c := c0
			if k%2 == 1 {
				c = c1
			}
			a.l("VPDPBUSD.BCST %s, %s, %s", m(4*k), v(8+k), c)
		}
		a.l("VPADDD %s, %s, %s", c0, c1, c1)
	}
	a.l("VCVTDQ2PS %s, %s", c1, c1)
}

// vcol adds a column's block (packed entry at m, scale at 36+m) to acc:
// (sumi*dw)*da for Q4_0, sumi*(dw*da) otherwise (dw in register dw).
func (a *asm) vcol(q4 bool, v func(int) string, dw string, m func(int) string, c0, c1, acc string, one bool) {
	a.vsums(v, m, c0, c1, one)
	if q4 {
		a.l("VMULPS %s, %s, %s", dw, c1, c1)
		a.l("VMULPS.BCST %s, %s, %s", m(36), c1, c1)
	} else {
		a.l("VMULPS.BCST %s, %s, %s", m(36), dw, c0)
		a.l("VMULPS %s, %s, %s", c0, c1, c1)
	}
	a.l("VADDPS %s, %s, %s", c1, acc, acc)
}

// tile emits the tile kernel of weight type q.
func (a *asm) tile(q rowsQuant) {
	const maxT = 12
	name := "tile" + q.name + "Q8_0VNNI"
	a.textX86(name, "(out *float32, ldo int, w *byte, wStride int, pack *byte, nb, n int)", "NOSPLIT", "$8-56")
	a.l("MOVQ out+0(FP), R14")
	a.l("MOVQ ldo+8(FP), CX")
	a.l("SHLQ $2, CX")
	a.l("MOVQ w+16(FP), SI")
	a.l("MOVQ wStride+24(FP), R10")
	a.l("LEAQ (R10)(R10*2), R11")
	a.l("MOVQ pack+32(FP), DX")
	a.l("MOVQ n+48(FP), BX")
	a.l("IMUL3Q $%d, BX, R8", packEntry)
	a.pfinit("R13", "R9")
	if !q.q4 {
		a.l("VMOVDQU %s<>(SB), Y7", q.ocon)
	}
	a.label("tile", false)
	a.l("TESTQ BX, BX")
	a.l("JZ end")
	a.l("MOVQ $%d, DI", maxT)
	a.l("CMPQ BX, DI")
	a.l("CMOVQLT BX, DI")
	for p := 0; p < maxT; p++ {
		a.l("VPXORD %s, %s, %s", y(16+p), y(16+p), y(16+p))
	}
	a.l("IMUL3Q $%d, DI, AX", packEntry)
	a.l("LEAQ -%d(DX)(AX*1), R9", maxT*packEntry)
	a.l("MOVQ w+16(FP), SI")
	a.l("MOVQ nb+40(FP), R12")
	a.label("blk", false)
	a.l("LEAQ (SI)(R10*4), AX")
	a.pfnext("R13", q.long)
	q.unpack(a)
	a.rdw("R13")
	pos := func(p int) string { return fmt.Sprintf("c%d", p) }
	a.jumpT("DI", "c", 1, maxT, []int{maxT, 1}, func(t int) string { return pos(maxT - t) })
	for p := 0; p < maxT; p++ {
		a.label(pos(p), false)
		c0, c1 := "Y28", "Y29"
		if p%2 == 1 {
			c0, c1 = "Y30", "Y31"
		}
		m := func(off int) string { return fmt.Sprintf("%d(R9)", p*packEntry+off) }
		a.vcol(q.q4, y, "Y6", m, c0, c1, y(16+p), false)
	}
	a.l("ADDQ $%d, SI", q.bsz)
	a.l("ADDQ R8, R9")
	a.l("DECQ R12")
	a.l("JNZ blk")
	st := func(p int) string { return fmt.Sprintf("s%d", p) }
	a.jumpT("DI", "s", 1, maxT, []int{maxT, 1}, func(t int) string { return st(maxT - t) })
	for p := 0; p < maxT; p++ {
		a.label(st(p), false)
		a.l("VMOVUPS %s, (R14)", y(16+p))
		a.l("ADDQ CX, R14")
	}
	a.l("IMUL3Q $%d, DI, AX", packEntry)
	a.l("ADDQ AX, DX")
	a.l("SUBQ DI, BX")
	a.l("JMP tile")
	a.label("end", false)
	a.l("VZEROUPPER")
	a.l("RET")
}

// packQ8_0VNNI emits the activation packing of the tile and packed
// kernels.
func (a *asm) packQ8_0VNNI() {
	a.b.WriteString("\n")
	a.splat("tones8", 0x0101010101010101, 32)
	a.textX86("packQ8_0VNNI", "(dst *byte, a *byte, aStride, nb, n, o int)", "NOSPLIT", "$0-48",
		"For each block b and column j: the 32 quants of a[j*aStride + b*34:],\n-o*sum(quants) and the F16 scale as float32, at dst + (b*n + j)*40.")
	a.l("MOVQ dst+0(FP), DI")
	a.l("MOVQ a+8(FP), SI")
	a.l("MOVQ aStride+16(FP), R8")
	a.l("MOVQ nb+24(FP), R12")
	a.l("MOVQ o+40(FP), R10")
	a.l("NEGQ R10")
	a.l("VMOVDQU tones8<>(SB), Y7")
	a.label("pblock", false)
	a.l("MOVQ SI, R9")
	a.l("MOVQ n+32(FP), BX")
	a.label("pcol", false)
	a.l("VMOVDQU 2(R9), Y0")
	a.l("VMOVDQU Y0, (DI)")
	a.l("VPXOR Y1, Y1, Y1")
	a.l("VPDPBUSD Y0, Y7, Y1")
	a.l("VEXTRACTI128 $1, Y1, X2")
	a.l("VPADDD X2, X1, X1")
	a.l("VPSHUFD $0x4e, X1, X2")
	a.l("VPADDD X2, X1, X1")
	a.l("VPSHUFD $0xb1, X1, X2")
	a.l("VPADDD X2, X1, X1")
	a.l("VMOVD X1, AX")
	a.l("IMULL R10, AX")
	a.l("MOVL AX, 32(DI)")
	a.l("MOVWLZX (R9), AX")
	a.l("VMOVD AX, X3")
	a.l("VCVTPH2PS X3, X3")
	a.l("VMOVSS X3, 36(DI)")
	a.l("ADDQ $%d, DI", packEntry)
	a.l("ADDQ R8, R9")
	a.l("DECQ BX")
	a.l("JNZ pcol")
	a.b.WriteString("\n")
	a.l("ADDQ $34, SI")
	a.l("DECQ R12")
	a.l("JNZ pblock")
	a.l("VZEROUPPER")
	a.l("RET")
}

// genTile writes tile_vnni_amd64.s.
func genTile(a *asm) {
	a.b.WriteString("\n")
	a.doc(tileDoc)
	a.rowsData(false)
	for _, q := range rowsQuants {
		a.tile(q)
	}
	a.packQ8_0VNNI()
}
