package main

// The dotprod kernel of the packed Q4_K layout (neon.Packing q4_Kx8dp; Go
// side in ../pack_arm64.go). A group holds eight rows super-block by
// super-block, 1152 bytes each (as much as the eight rows in ggml layout):
//
//	  0   the eight rows' d (F16)
//	 16   the eight rows' dmin (F16)
//	 32   the scales of rows 0-3, then 80 those of rows 4-7: the three
//	      words A, B, C of ggml's 12-byte scales, each as 16 bytes with
//	      byte i of row r at 4i+r (so that unpacking the 6-bit fields
//	      bytewise leaves sub-block j of row r at byte 4(j%4)+r)
//	128   the nibbles: per sub-block pair p and half h (rows 4h..4h+3) 128
//	      bytes, 4-byte groups g interleaved by row as in the Q4_0 layout
//	      (offset 128 + 256p + 128h + 16g)
//
// SDOT by element then sums a sub-block for four rows at once into lanes
// that are the rows, and one MLA by the four rows' scales applies them;
// the mins are taken per half by SDOT by element too (the mins
// transposed to lanes that are rows, the activation's sub-block sums
// split into two int8 digits: the vector pipes' multiply-only pipe stays
// free for the MLAs). Per super-block, column and half:
// F = F + float(sumi)·(d·yd) - float(summins)·(dmin·yd) on four lanes
// (fused), stored at the end of the row. The outputs are within the
// k-quant tolerance of the generic dot, and each column's are the same
// whatever the number of columns (tiles of two columns or one take the
// same steps per column).

func (a *asm) mulQ4_Kx8DP() {
	name := "mulQ4_Kx8DP"
	a.text(name, "func "+name+packSig, "$0-64")
	a.loadPackArgs()
	a.l("VMOVI $15, V31.B16")
	a.l("MOVD $zero32<>(SB), R22")
	a.packedGroupBegin()
	a.l("CMP $10, R8")
	a.l("BGE tile10")
	a.l("CMP $8, R8")
	a.l("BGE tile8")
	a.l("CMP $6, R8")
	a.l("BGE tile6")
	a.l("CMP $4, R8")
	a.l("BGE tile4")
	a.l("CMP $2, R8")
	a.l("BLT tile1")
	a.kqTile(2)
	a.kqTile(10)
	a.kqTile(8)
	a.kqTile(6)
	a.kqTile(4)
	a.kqTile(1)
	a.packedGroupEnd(1152)
}

// kqTile emits the super-block loop of a tile of k (1, 2, 4, 6, 8 or 10)
// columns (label tileK), ending with a jump to next. Registers: V0-V7 the
// low nibbles (sub-block 2p), V8-V15 the high (2p+1) of the current pair
// and half; V16 the scale bytes of sub-blocks 0-3, then 4-7 (byte
// 4j'+r); V18, V19 the pair's two scale vectors (int32 lanes = rows);
// V20 a sub-block's integer sums, cleared by a load of zeros (R22) so
// that the vector pipes do only the arithmetic; V22 its activations, 16
// bytes at a time (one sub-block after the other: the core renames V20
// and V22); V31 the nibble mask. One or two columns: V24-V27 the float
// sums (column c, half h: V24+2c+h), V28, V29 the columns' integer sums
// of the half. Four to ten: V24-V29, V17, V30, V21, V23 the integer sums,
// the float sums in the outputs themselves (zeroed first; loaded, added
// to and stored per super-block and half, the same steps). The mins and
// float steps of a half reuse V0-V16 (and V20). General: R11 the
// super-block, R12 super-blocks left, R13, R14, R16, R19, R20, R21, R24,
// R25, R23, R26 the columns' activation blocks, R15, R17 addresses. Every
// column takes the same steps in the same order whatever k is: the
// outputs do not depend on the tiling. Ten columns share each unpacked
// pair among the most tokens the registers allow (llvm-mca, neoverse-n1:
// 1.68 cycles per 32 weight-tokens; 1.71 with eight, 1.77 with six).
func (a *asm) kqTile(k int) {
	mem := k > 2
	a.l("tile%d:", k)
	a.l("MOVD R2, R11")
	a.l("MOVD R6, R12")
	cols := []string{"R13", "R14", "R16", "R19", "R20", "R21", "R24", "R25", "R23", "R26"}
	a.l("MOVD R9, R13")
	for c := 1; c < k; c++ {
		a.l("ADD R5, %s, %s", cols[c-1], cols[c])
	}
	if mem {
		a.zero(20)
		a.zero(21)
		a.l("MOVD R10, R17")
		for c := 0; c < k; c++ {
			a.l("VST1 [V20.S4, V21.S4], (R17)")
			if c+1 < k {
				a.l("ADD R1, R17")
			}
		}
	} else {
		for v := 24; v < 24+2*k; v++ {
			a.zero(v)
		}
	}
	isum := func(c int) int {
		if mem {
			return []int{24, 25, 26, 27, 28, 29, 17, 30, 21, 23}[c]
		}
		return 28 + c
	}
	a.l("PCALIGN $16")
	a.l("sb%d:", k)
	for h := 0; h < 2; h++ {
		// scale bytes: S03 = A & 0x3f for pairs 0, 1, then S47 = (C &
		// 0xf) | (A >> 6) << 4 for pairs 2, 3, in V16
		for p := 0; p < 4; p++ {
			if p == 0 || p == 2 {
				a.l("ADD $%d, R11, R15", 32+48*h)
				a.l("VLD1 (R15), [V0.B16, V1.B16, V2.B16]")
				if p == 0 {
					a.l("VMOVI $0x3f, V3.B16")
					a.l("VAND V3.B16, V0.B16, V16.B16")
				} else {
					a.l("VAND V31.B16, V2.B16, V16.B16")
					a.l("VUSHR $6, V0.B16, V4.B16")
					a.l("VSLI $4, V4.B16, V16.B16")
				}
			}
			a.l("ADD $%d, R11, R15", 128+256*p+128*h)
			a.l("VLD1.P 64(R15), [V8.B16, V9.B16, V10.B16, V11.B16]")
			a.l("VLD1 (R15), [V12.B16, V13.B16, V14.B16, V15.B16]")
			for i := 0; i < 8; i++ {
				a.l("VAND V31.B16, V%d.B16, V%d.B16", 8+i, i)
				a.l("VUSHR $4, V%d.B16, V%d.B16", 8+i, 8+i)
			}
			// scales of sub-blocks 2p, 2p+1 (bytes 4(2p%4).. of V16)
			if (2*p)%4 == 0 {
				a.i(ushll8(19, 16))
			} else {
				a.i(ushll28(19, 16))
			}
			a.i(ushll16(18, 19))
			a.i(ushll216(19, 19))
			for c := 0; c < k; c++ {
				col := cols[c]
				// each sub-block's SDOT chain (its activations 16
				// bytes at a time in V22), then scaled into the half's
				// sums
				r := isum(c)
				for d := 0; d < 2; d++ {
					a.l("VLD1 (R22), [V20.B16]")
					for g := 0; g < 8; g++ {
						if g%4 == 0 {
							a.l("FMOVQ %d(%s), F22", 4+64*p+32*d+16*(g/4), col)
						}
						a.i(sdotElem(20, 8*d+g, 22, g%4))
					}
					if p == 0 && d == 0 {
						a.i(mul4s(r, 20, 18))
					} else {
						a.i(mla4s(r, 20, 18+d))
					}
				}
			}
		}
		// mins of half h: M03 = B & 0x3f, M47 = (C >> 4) | (B >> 6) << 4
		// (byte 4j+r: sub-block j, row r), transposed by TBL to byte 4r+j
		// (V6: sub-blocks 0-3, V7: 4-7), the shape of SDOT by element
		a.l("ADD $%d, R11, R15", 32+48*h)
		a.l("VLD1 (R15), [V0.B16, V1.B16, V2.B16]")
		a.l("MOVD $tr4x4<>(SB), R15")
		a.l("VLD1 (R15), [V16.B16]")
		a.l("VMOVI $0x3f, V3.B16")
		a.l("VAND V3.B16, V1.B16, V4.B16")
		a.l("VUSHR $4, V2.B16, V5.B16")
		a.l("VUSHR $6, V1.B16, V6.B16")
		a.l("VSLI $4, V6.B16, V5.B16")
		a.i(tbl1(6, 4, 16))
		a.i(tbl1(7, 5, 16))
		// d and dmin of the half's rows
		a.l("FMOVD %d(R11), F10", 8*h)
		a.l("FMOVD %d(R11), F11", 16+8*h)
		a.i(fcvtl(10, 10))
		a.i(fcvtl(11, 11))
		if mem {
			a.l("ADD $%d, R10, R17", 16*h)
		}
		for c := 0; c < k; c++ {
			col := cols[c]
			// summins = Σj min_j·bsum_j with the sub-blocks' sums
			// bsum = 64·hi + lo (lo = bsum & 63, hi = bsum >> 6, both
			// int8 for |bsum| <= 4096, the range of 32 int8 quants):
			// 64·SDOT(mins, hi) + SDOT(mins, lo), exact; the digits
			// lo_0..7, hi_0..7 are at 272 of the prepared activations
			// (neon.prepQ8_KDigits, once per column and product)
			a.l("FMOVQ 272(%s), F8", col)
			a.l("VLD1 (R22), [V13.B16]")
			a.i(sdotElem(13, 6, 8, 2))
			a.i(sdotElem(13, 7, 8, 3))
			a.l("VSHL $6, V13.S4, V13.S4")
			a.i(sdotElem(13, 6, 8, 0))
			a.i(sdotElem(13, 7, 8, 1))
			a.l("FMOVS (%s), F14", col)
			r, f := isum(c), 24+2*c+h
			a.i(scvtf4s(r, r))
			a.i(scvtf4s(13, 13))
			a.i(fmulElem(15, 10, 14, 0))
			a.i(fmulElem(12, 11, 14, 0))
			if mem {
				f = 20
				a.l("VLD1 (R17), [V20.S4]")
			}
			a.i(fmla4s(f, r, 15))
			a.i(fmls4s(f, 13, 12))
			if mem {
				a.l("VST1 [V20.S4], (R17)")
				if c+1 < k {
					a.l("ADD R1, R17")
				}
			}
		}
	}
	a.l("ADD $1152, R11")
	for c := 0; c < k; c++ {
		a.l("ADD $292, %s", cols[c])
	}
	a.l("SUBS $1, R12")
	a.l("BNE sb%d", k)
	if mem {
		a.l("SUB $%d, R8", k)
		a.l("MOVD $%d, R17", k)
		a.l("MADD R5, R9, R17, R9")
		a.l("MADD R1, R10, R17, R10")
	} else {
		a.tileDone(k, 24, "R15")
	}
	a.l("B next")
}
