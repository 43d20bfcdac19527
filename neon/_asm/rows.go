package main

import "fmt"

// The row-group kernels (RowsQ4_0Q8_0, RowsQ5_0Q8_0, RowsQ8_0Q8_0): eight
// weight rows × n activation columns per call,
// out[j*ldo+r] = dot(w[r*wStride:], a[j*aStride:], nb), every output
// bit-identical to the generic one-row dot (the same float steps per block
// as dot32: exact integer block sum, t = (float(sumi)*dw)*da for Q4_0 and
// float(sumi)*(dw*da) for Q5_0/Q8_0, sum = sum + t block after block).
//
// Blocks outer, columns inner. Per block the eight rows' weights are
// unpacked once into V0-V15 (row r in V2r, V2r+1) and their eight F16
// scales gathered into V16 and widened to V16 (rows 0-3) and V17 (rows
// 4-7). Per column the activation block is loaded once (V18, V19, its scale
// in V28), the eight integer dots are reduced by ADDP trees into V24 (rows
// 0-3, lane = row) and V25 (rows 4-7), converted and scaled on four lanes,
// and added to the column's accumulators: V26, V27 for one column
// (decode), out[j*ldo : j*ldo+8] itself for several.
//
// Register use: V20-V25 hold the unpack constants and temporaries while
// the block is unpacked and the integer sums while the columns run; V29 is
// the 16-bit product temporary of the ARMv8.0 tier.
//
// General registers: R0 out, R1 w, R2 a, R3 aStride, R4 nb, R5 n, R6
// wStride, R7 ldo in bytes, R8-R15 the rows' block pointers, R16 the Q5_0
// constants, R17 aStride-34, R19 the prefetch pointer, R20 the column's
// activation block, R21 its output, R22 the columns left, R23 column 0's
// activation block.
//
// Prefetch: the eight rows are read block by block, eight streams wStride
// apart that the hardware prefetchers follow badly (as on x86, see
// ../rows_amd64.s), so each block step prefetches its share of the next
// row group's 8*wStride bytes linearly: R19 starts at w + 8*wStride and
// advances by 8 blocks' bytes (144, 176, 272) a block step, with one PRFM
// PLDL1KEEP per 64-byte line (3, 3, 5). Prefetches never fault, so
// running past the matrix is harmless.

const rowsSig = "(out *float32, ldo int, w *byte, wStride int, a *byte, aStride, nb, n int)"

// rowsUnpack describes how a block type's rows are unpacked.
type rowsUnpack struct {
	consts func(a *asm) // per block, into V20-V24
	unpack func(a *asm, base string, d0, d1 int, tmp []int)
	tmp    [][]int // the temporaries of successive rows
}

var rowsUnpacks = map[string]rowsUnpack{
	"Q4_0": {rowsConstsQ4_0, rowsUnpackQ4_0, [][]int{{22}, {23}, {24}, {25}}},
	"Q5_0": {rowsConstsQ5_0, rowsUnpackQ5_0, [][]int{{25, 28, 29, 30}, {31, 18, 19, 25}}},
	"Q8_0": {func(*asm) {}, func(a *asm, base string, d0, d1 int, _ []int) {
		a.l("VLD1.P 32(%s), [V%d.B16, V%d.B16]", base, d0, d1)
	}, [][]int{nil}},
}

func rowsConstsQ4_0(a *asm) {
	a.l("VMOVI $15, V20.B16")
	a.l("VMOVI $8, V21.B16")
}

// rowsUnpackQ4_0: value = nibble - 8 as int8.
func rowsUnpackQ4_0(a *asm, base string, d0, d1 int, tmp []int) {
	t := tmp[0]
	a.l("VLD1.P 16(%s), [V%d.B16]", base, t)
	a.l("VAND V20.B16, V%d.B16, V%d.B16", t, d0)
	a.l("VUSHR $4, V%d.B16, V%d.B16", t, d1)
	a.l("VSUB V21.B16, V%d.B16, V%d.B16", d0, d0)
	a.l("VSUB V21.B16, V%d.B16, V%d.B16", d1, d1)
}

func rowsConstsQ5_0(a *asm) {
	a.l("VLD1 (R16), [V20.B16, V21.B16, V22.B16]") // idx lo, idx hi, bit masks
	a.l("VMOVI $16, V23.B16")
	a.l("VMOVI $15, V24.B16")
}

// rowsUnpackQ5_0 is unpackQ5_0 with the constants in V20-V24.
func rowsUnpackQ5_0(a *asm, base string, d0, d1 int, tmp []int) {
	t0, t1, t2, t3 := tmp[0], tmp[1], tmp[2], tmp[3]
	a.l("FMOVS.P 4(%s), F%d", base, t1)
	a.l("VLD1.P 16(%s), [V%d.B16]", base, t0)
	a.q5Spread(q5Regs{20, 21, 22, 23, 24}, t0, t1, d0, d1, t2, t3)
	a.l("VSUB V23.B16, V%d.B16, V%d.B16", d0, d0)
	a.l("VSUB V23.B16, V%d.B16, V%d.B16", d1, d1)
}

// rowsBlock unpacks the current block of the eight rows (R8-R15, each
// left at its next block) into V0-V15 and their scales into V16, V17,
// first prefetching the next group's share at R19 (advanced) for blocks
// of wsize bytes.
func (a *asm) rowsBlock(u rowsUnpack, wsize int) {
	step := 8 * wsize
	for off := 0; off < step; off += 64 {
		if off == 0 {
			a.l("PRFM (R19), PLDL1KEEP")
		} else {
			a.l("PRFM %d(R19), PLDL1KEEP", off)
		}
	}
	a.l("ADD $%d, R19", step)
	u.consts(a)
	for r := 0; r < 8; r++ {
		p := fmt.Sprintf("R%d", 8+r)
		a.l("VLD1.P 2(%s), V16.H[%d]", p, r)
		u.unpack(a, p, 2*r, 2*r+1, u.tmp[r%len(u.tmp)])
	}
	a.i(fcvtl2(17, 16))
	a.i(fcvtl(16, 16))
}

// rowsTranspose rearranges the unpacked rows for SDOT by element (the
// dotprod tier with several columns): for each half h (rows 4h..4h+3) and
// part q (values 16q..16q+15) the registers V(2(4h+i)+q), i < 4, holding
// row 4h+i's part q, are transposed as a 4×4 matrix of 4-byte groups, so
// that V(2(4h+g)+q) holds group g (values 16q+4g..16q+4g+3) of the four
// rows, lane = row. V20-V27 are the temporaries.
func (a *asm) rowsTranspose() {
	for h := 0; h < 2; h++ {
		for q := 0; q < 2; q++ {
			s := func(i int) int { return 2*(4*h+i) + q }
			t := 20 + 4*q
			a.l("VTRN1 V%d.S4, V%d.S4, V%d.S4", s(1), s(0), t)
			a.l("VTRN2 V%d.S4, V%d.S4, V%d.S4", s(1), s(0), t+1)
			a.l("VTRN1 V%d.S4, V%d.S4, V%d.S4", s(3), s(2), t+2)
			a.l("VTRN2 V%d.S4, V%d.S4, V%d.S4", s(3), s(2), t+3)
			a.l("VTRN1 V%d.D2, V%d.D2, V%d.D2", t+2, t, s(0))
			a.l("VTRN1 V%d.D2, V%d.D2, V%d.D2", t+3, t+1, s(1))
			a.l("VTRN2 V%d.D2, V%d.D2, V%d.D2", t+2, t, s(2))
			a.l("VTRN2 V%d.D2, V%d.D2, V%d.D2", t+3, t+1, s(3))
		}
	}
}

// rowsColumn takes one column's activation block at R20 (left just past
// it) against the unpacked rows: V24 and V25 get the eight terms of this
// block (lane = row), which are then added to V26, V27 (mem false) or to
// the eight floats at (R21). With transposed rows (rowsTranspose) the
// integer sums come from SDOT by element straight into lanes, else from
// one dot per row and ADDP trees.
func (a *asm) rowsColumn(k block32, t tier, mem, transposed bool) {
	a.l("VLD1.P 2(R20), V28.H[0]")
	a.l("VLD1.P 32(R20), [V18.B16, V19.B16]")
	if transposed {
		a.l("VEOR V24.B16, V24.B16, V24.B16")
		a.l("VEOR V25.B16, V25.B16, V25.B16")
		for g := 0; g < 4; g++ {
			for q := 0; q < 2; q++ {
				for h := 0; h < 2; h++ {
					a.i(sdotElem(24+h, 2*(4*h+g)+q, 18+q, g))
				}
			}
		}
	} else {
		for h := 0; h < 2; h++ {
			for p := 0; p < 2; p++ {
				r := 4*h + 2*p
				a.idot4x(t, k.full, 20, 29, 2*r, 18, 2*r+1, 19)
				a.idot4x(t, k.full, 21, 29, 2*r+2, 18, 2*r+3, 19)
				a.l("VADDP V21.S4, V20.S4, V%d.S4", 22+p)
			}
			a.l("VADDP V23.S4, V22.S4, V%d.S4", 24+h)
		}
	}
	a.i(fcvtl(28, 28))
	a.i(scvtf4s(24, 24))
	a.i(scvtf4s(25, 25))
	if k.q4 {
		a.i(fmul4s(24, 24, 16))
		a.i(fmul4s(25, 25, 17))
		a.i(fmulElem(24, 24, 28, 0))
		a.i(fmulElem(25, 25, 28, 0))
	} else {
		a.i(fmulElem(20, 16, 28, 0))
		a.i(fmulElem(21, 17, 28, 0))
		a.i(fmul4s(24, 24, 20))
		a.i(fmul4s(25, 25, 21))
	}
	if !mem {
		a.i(fadd4s(26, 26, 24))
		a.i(fadd4s(27, 27, 25))
		return
	}
	a.l("VLD1 (R21), [V20.S4, V21.S4]")
	a.i(fadd4s(20, 20, 24))
	a.i(fadd4s(21, 21, 25))
	a.l("VST1 [V20.S4, V21.S4], (R21)")
}

func (a *asm) rows32(k block32, t tier) {
	u := rowsUnpacks[k.name]
	name := "rows" + k.name + "Q8_0" + t.suffix
	a.text(name, "func "+name+rowsSig, "$0-64")
	a.l("MOVD out+0(FP), R0")
	a.l("MOVD ldo+8(FP), R7")
	a.l("MOVD w+16(FP), R1")
	a.l("MOVD wStride+24(FP), R6")
	a.l("MOVD a+32(FP), R2")
	a.l("MOVD aStride+40(FP), R3")
	a.l("MOVD nb+48(FP), R4")
	a.l("MOVD n+56(FP), R5")
	a.l("LSL $2, R7")
	a.l("MOVD R1, R8")
	for r := 1; r < 8; r++ {
		a.l("ADD R6, R%d, R%d", 7+r, 8+r)
	}
	a.l("ADD R6<<3, R1, R19")
	if k.name == "Q5_0" {
		a.l("MOVD $q5consts<>(SB), R16")
	}
	a.l("VEOR V26.B16, V26.B16, V26.B16")
	a.l("VEOR V27.B16, V27.B16, V27.B16")
	a.l("CMP $1, R5")
	a.l("BNE multi")

	if t.dot {
		a.rows1DP(k)
	} else {
		a.rows1NE(k)
	}

	// Several columns: the accumulators are the outputs, zeroed first.
	a.l("multi:")
	a.l("MOVD R0, R21")
	a.l("MOVD R5, R22")
	a.l("zero:")
	a.l("VST1 [V26.S4, V27.S4], (R21)")
	a.l("ADD R7, R21")
	a.l("SUBS $1, R22")
	a.l("BNE zero")
	a.l("SUB $34, R3, R17")
	a.l("MOVD R2, R23")
	if !t.dot {
		a.rowsMulti(k, t, u, "m", false)
		return
	}
	// dotprod: from four columns on, transposing the rows once per block
	// (32 TRNs) costs less than the per-column zeroing and ADDP trees it
	// saves (12 instructions a column).
	a.l("CMP $4, R5")
	a.l("BGE transposed")
	a.rowsMulti(k, t, u, "m", false)
	a.l("transposed:")
	a.rowsMulti(k, t, u, "t", true)
}

// rowsMulti emits the block loop of several columns (labels suffixed by
// sfx), ending in RET.
func (a *asm) rowsMulti(k block32, t tier, u rowsUnpack, sfx string, transposed bool) {
	a.l("PCALIGN $16")
	a.l("block%s:", sfx)
	a.rowsBlock(u, k.wsize)
	if transposed {
		a.rowsTranspose()
	}
	a.l("MOVD R23, R20")
	a.l("MOVD R0, R21")
	a.l("MOVD R5, R22")
	a.l("PCALIGN $16")
	a.l("col%s:", sfx)
	a.rowsColumn(k, t, true, transposed)
	a.l("ADD R17, R20")
	a.l("ADD R7, R21")
	a.l("SUBS $1, R22")
	a.l("BNE col%s", sfx)
	a.l("ADD $34, R23")
	a.l("SUBS $1, R4")
	a.l("BNE block%s", sfx)
	a.l("RET")
}
