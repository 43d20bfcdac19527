package main

// The dotprod kernels of the packed Q4_0 and Q8_0 layouts (neon.Packing
// q4_0x8dp, q8_0x8dp; Go side in ../pack_arm64.go). A group holds eight
// rows block by block: per block the rows' eight F16 scales (16 bytes),
// then the quants of rows 0-3 and of rows 4-7, each as 4-byte groups g
// interleaved by row (16 bytes per g: row 0's bytes 4g..4g+3, row 1's,
// ...). SDOT by element then takes a 4-byte group of the activations
// against four rows at once, into lanes that are the rows: no reduction
// tree, no per-row work but the float steps. Q4_0 quants are stored XORed
// with 0x88, so that SHL #4 gives 16·(low nibble - 8) and AND 0xF0 gives
// 16·(high nibble - 8) as int8: the sums come out 16 times too large and
// SCVTF #4 takes that back exactly. Q8_0 quants are stored as they are,
// converted by SCVTF #1 against 2·dy (exact, see rows1DP).
//
// Float steps per block and row as the generic dots (t = (float(sumi)·dx)
// ·dy for Q4_0, float(sumi)·(dx·dy) for Q8_0, sum = sum + t in block
// order), so the outputs are bit-identical to them.
//
// Loop order: groups, then tiles of up to four columns, then blocks: a
// block's weights are loaded and unpacked once per tile and its eight
// accumulators (two per column) live in registers for the whole row.
// Q4_0 from eight columns on: tiles of eight columns that take the rows
// four at a time (mulPackedHalfTile), the unpacking shared by eight
// tokens (llvm-mca, neoverse-n1: 1.69 cycles per 32 weight-tokens, 1.81
// with four columns by eight rows).

const packSig = "(out *float32, ldo int, w *byte, ngroups int, a *byte, aStride, nb, n int)"

// loadPackArgs loads the arguments of the packed kernels: R0 out, R1 ldo
// in bytes, R2 w, R3 ngroups, R4 a, R5 aStride, R6 nb, R7 n.
func (a *asm) loadPackArgs() {
	a.l("MOVD out+0(FP), R0")
	a.l("MOVD ldo+8(FP), R1")
	a.l("MOVD w+16(FP), R2")
	a.l("MOVD ngroups+24(FP), R3")
	a.l("MOVD a+32(FP), R4")
	a.l("MOVD aStride+40(FP), R5")
	a.l("MOVD nb+48(FP), R6")
	a.l("MOVD n+56(FP), R7")
	a.l("LSL $2, R1")
}

// mulPackedDP emits mulQ4_0x8DP or mulQ8_0x8DP.
func (a *asm) mulPackedDP(q8 bool) {
	name, bsize := "mulQ4_0x8DP", 144
	if q8 {
		name, bsize = "mulQ8_0x8DP", 272
	}
	a.text(name, "func "+name+packSig, "$0-64")
	a.loadPackArgs()
	a.l("MOVD ·fp16Table(SB), R20")
	a.l("MOVD $zero32<>(SB), R22")
	if !q8 {
		a.l("VMOVI $0xf0, V31.B16")
	}
	a.packedGroupBegin()
	if !q8 {
		a.l("CMP $8, R8")
		a.l("BGE tile8h")
	}
	a.l("CMP $4, R8")
	a.l("BGE tile4")
	a.l("CMP $2, R8")
	a.l("BLT tile1")
	a.l("BEQ tile2")
	a.l("B tile3")
	for k := 4; k >= 1; k-- {
		a.mulPackedTile(q8, k)
	}
	if !q8 {
		a.mulPackedHalfTile(8)
	}
	a.packedGroupEnd(bsize)
}

// mulPackedHalfTile emits the Q4_0 tile of k columns that takes the
// group's rows four at a time (label tileKh): for rows 0-3, then 4-7, the
// block loop with that half's quants unpacked once for the k columns, so
// that the unpacking is shared by more tokens than the registers allow
// for all eight rows. Every output takes the float steps of
// mulPackedTile in the same order (bit for bit the same). Registers:
// V0-V3 the half's low nibbles, V8-V11 its high (vector g: group g), V16
// dx of its rows, V18.. the float sums (column j: V18+j), V26 the integer
// sums (cleared by a load of zeros, R22), V28, V29 the activation quants,
// V30 dy, V31 the 0xF0 mask. General: R11 the weights, R12 blocks left,
// R13-R16, R19, R21, R23, R24 the columns' activations, R17 scratch.
func (a *asm) mulPackedHalfTile(k int) {
	cols := []string{"R13", "R14", "R15", "R16", "R19", "R21", "R23", "R24"}
	a.l("tile%dh:", k)
	for h := 0; h < 2; h++ {
		a.l("MOVD R2, R11")
		a.l("MOVD R6, R12")
		a.l("MOVD R9, R13")
		for j := 1; j < k; j++ {
			a.l("ADD R5, %s, %s", cols[j-1], cols[j])
		}
		for j := 0; j < k; j++ {
			a.zero(18 + j)
		}
		a.l("PCALIGN $16")
		a.l("blk%dh%d:", k, h)
		a.l("VLD1 (R11), [V16.H8]")
		a.l("ADD $%d, R11, R17", 16+64*h)
		a.l("VLD1 (R17), [V8.B16, V9.B16, V10.B16, V11.B16]")
		a.l("ADD $144, R11")
		if h == 0 {
			a.i(fcvtl(16, 16))
		} else {
			a.i(fcvtl2(16, 16))
		}
		for i := 0; i < 4; i++ {
			a.l("VSHL $4, V%d.B16, V%d.B16", 8+i, i)
			a.l("VAND V31.B16, V%d.B16, V%d.B16", 8+i, 8+i)
		}
		for j := 0; j < k; j++ {
			c := cols[j]
			a.l("MOVHU.P 2(%s), R17", c)
			a.l("VLD1.P 32(%s), [V28.B16, V29.B16]", c)
			a.l("FMOVS (R20)(R17<<2), F30")
			a.l("VLD1 (R22), [V26.B16]")
			for g := 0; g < 4; g++ {
				a.i(sdotElem(26, g, 28, g))
				a.i(sdotElem(26, 8+g, 29, g))
			}
			// (float(sumi)·dx)·dy, sumi from 16·sumi
			a.i(scvtf4sFix(26, 26, 4))
			a.i(fmul4s(26, 26, 16))
			a.i(fmulElem(26, 26, 30, 0))
			a.i(fadd4s(18+j, 18+j, 26))
		}
		a.l("SUBS $1, R12")
		a.l("BNE blk%dh%d", k, h)
		a.l("ADD $%d, R10, R17", 16*h)
		for j := 0; j < k; j++ {
			a.l("VST1 [V%d.S4], (R17)", 18+j)
			if j+1 < k {
				a.l("ADD R1, R17")
			}
		}
	}
	a.l("SUB $%d, R8", k)
	a.l("MOVD $%d, R17", k)
	a.l("MADD R5, R9, R17, R9")
	a.l("MADD R1, R10, R17, R10")
	a.l("B next")
}

// packedGroupBegin opens the group loop of a packed kernel (label group)
// and its loop over tiles of columns (label tile): R8 the columns left,
// R9 the tile's first column, R10 its outputs.
func (a *asm) packedGroupBegin() {
	a.l("group:")
	a.l("MOVD R7, R8")
	a.l("MOVD R4, R9")
	a.l("MOVD R0, R10")
	a.l("tile:")
}

// packedGroupEnd closes them (the tiles jump to next): the next group of
// eight rows, nb blocks of bsize bytes on, eight outputs on.
func (a *asm) packedGroupEnd(bsize int) {
	a.l("next:")
	a.l("CBNZ R8, tile")
	a.l("MOVD $%d, R12", bsize)
	a.l("MADD R6, R2, R12, R2")
	a.l("ADD $32, R0")
	a.l("SUBS $1, R3")
	a.l("BNE group")
	a.l("RET")
}

// mulPackedTile emits the block loop of a tile of k columns (label tileK),
// ending with a jump to next. Registers: V0-V15 the block's quants (Q4_0:
// low nibbles V0-V7, high V8-V15, vector 4h+g for rows 4h.., group g;
// Q8_0: V0-V15 = 8h+g for groups g < 8), V16, V17 dx of rows 0-3, 4-7,
// V18-V25 the float sums (column j: V18+2j, V19+2j), V26, V27 the integer
// sums (cleared by a load of zeros, R22: no vector-pipe instruction),
// V28, V29 the activation quants, V30 dy, V31 the 0xF0 mask. General:
// R11 the weights, R12 blocks left, R13-R16 the columns' activations.
func (a *asm) mulPackedTile(q8 bool, k int) {
	a.l("tile%d:", k)
	a.l("MOVD R2, R11")
	a.l("MOVD R6, R12")
	cols := []string{"R13", "R14", "R15", "R16"}
	a.l("MOVD R9, R13")
	for j := 1; j < k; j++ {
		a.l("ADD R5, %s, %s", cols[j-1], cols[j])
	}
	for j := 0; j < 2*k; j++ {
		a.zero(18 + j)
	}
	a.l("PCALIGN $16")
	a.l("blk%d:", k)
	a.l("VLD1.P 16(R11), [V16.H8]")
	a.i(fcvtl2(17, 16))
	a.i(fcvtl(16, 16))
	if q8 {
		for i := 0; i < 16; i += 4 {
			a.l("VLD1.P 64(R11), [V%d.B16, V%d.B16, V%d.B16, V%d.B16]", i, i+1, i+2, i+3)
		}
	} else {
		a.l("VLD1.P 64(R11), [V8.B16, V9.B16, V10.B16, V11.B16]")
		a.l("VLD1.P 64(R11), [V12.B16, V13.B16, V14.B16, V15.B16]")
		for i := 0; i < 8; i++ {
			a.l("VSHL $4, V%d.B16, V%d.B16", 8+i, i)
			a.l("VAND V31.B16, V%d.B16, V%d.B16", 8+i, 8+i)
		}
	}
	for j := 0; j < k; j++ {
		c := cols[j]
		a.l("MOVHU.P 2(%s), R17", c)
		a.l("VLD1.P 32(%s), [V28.B16, V29.B16]", c)
		a.l("FMOVS (R20)(R17<<2), F30")
		a.l("VLD1 (R22), [V26.B16, V27.B16]")
		for g := 0; g < 4; g++ {
			for h := 0; h < 2; h++ {
				if q8 {
					a.i(sdotElem(26+h, 8*h+g, 28, g))
					a.i(sdotElem(26+h, 8*h+4+g, 29, g))
				} else {
					a.i(sdotElem(26+h, 4*h+g, 28, g))
					a.i(sdotElem(26+h, 8+4*h+g, 29, g))
				}
			}
		}
		s0, s1 := 18+2*j, 19+2*j
		if q8 {
			// float(sumi)/2 · (dx · 2dy)
			a.l("FADDS F30, F30, F30")
			a.i(scvtf4sFix(26, 26, 1))
			a.i(scvtf4sFix(27, 27, 1))
			a.i(fmulElem(28, 16, 30, 0))
			a.i(fmulElem(29, 17, 30, 0))
			a.i(fmul4s(26, 26, 28))
			a.i(fmul4s(27, 27, 29))
		} else {
			// (float(sumi)·dx)·dy, sumi from 16·sumi
			a.i(scvtf4sFix(26, 26, 4))
			a.i(scvtf4sFix(27, 27, 4))
			a.i(fmul4s(26, 26, 16))
			a.i(fmul4s(27, 27, 17))
			a.i(fmulElem(26, 26, 30, 0))
			a.i(fmulElem(27, 27, 30, 0))
		}
		a.i(fadd4s(s0, s0, 26))
		a.i(fadd4s(s1, s1, 27))
	}
	a.l("SUBS $1, R12")
	a.l("BNE blk%d", k)
	a.tileDone(k, 18, "R17")
	a.l("B next")
}

// tileDone stores a tile's k columns of eight float sums (column j in
// V(sum+2j), V(sum+2j+1)) at R10 + j·ldo (R1) and moves the tile's column
// pointers on (R8 columns left, R9 activations aStride (R5) apart, R10
// outputs); t is a scratch register.
func (a *asm) tileDone(k, sum int, t string) {
	a.l("MOVD R10, %s", t)
	for j := 0; j < k; j++ {
		a.l("VST1 [V%d.S4, V%d.S4], (%s)", sum+2*j, sum+2*j+1, t)
		if j+1 < k {
			a.l("ADD R1, %s", t)
		}
	}
	a.l("SUB $%d, R8", k)
	a.l("MOVD $%d, %s", k, t)
	a.l("MADD R5, R9, %s, R9", t)
	a.l("MADD R1, R10, %s, R10", t)
}
