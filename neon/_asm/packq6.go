package main

// The dotprod kernel of the packed Q6_K layout (neon.Packing q6_Kx8dp; Go
// side in ../pack_arm64.go). A group holds eight rows super-block by
// super-block, 1680 bytes each (as much as the eight rows in ggml layout):
//
//	  0   the eight rows' d (F16)
//	 16   the scales of rows 0-3, then 80 those of rows 4-7: for each
//	      (128-value half hh, 16-value chunk c) the four sub-blocks
//	      j = 8hh+c+2i (i < 4) that one unpack step yields, four rows each
//	      (byte 16(2hh+c) + 4i + r)
//	144   the quants of rows 0-3, then 912 those of rows 4-7: per (hh, c)
//	      192 bytes, the three 16-byte sources of one unpack step (ql
//	      bytes 64hh+16c.., 64hh+32+16c.., qh bytes 32hh+16c.. XORed
//	      with 0xAA), each as four 4-byte groups interleaved by row (16
//	      bytes per group g)
//
// The values are built as in the one-row kernel (4·(v-32) by shifts and
// inserts, see q6Unpack), now for four rows at once, and SDOT by element
// sums a sub-block for four rows into lanes that are the rows; one MLA by
// the four rows' scales per sub-block. Per super-block, column and half:
// F = F + float(sumi)·(d·yd) on four lanes (fused), stored at the end of
// the row (by tiles of several columns: in the outputs themselves): within
// the k-quant tolerance of the generic dot; tiles of four, two or one
// columns take the same steps per column.

func (a *asm) mulQ6_Kx8DP() {
	name := "mulQ6_Kx8DP"
	a.text(name, "func "+name+packSig, "$0-64")
	a.loadPackArgs()
	a.l("MOVD $zero32<>(SB), R22")
	a.l("VMOVI $0xf0, V31.B16")
	a.packedGroupBegin()
	a.l("CMP $9, R8")
	a.l("BGE tile9")
	a.l("CMP $8, R8")
	a.l("BGE tile8")
	a.l("CMP $6, R8")
	a.l("BGE tile6")
	a.l("CMP $4, R8")
	a.l("BGE tile4")
	a.l("CMP $2, R8")
	a.l("BLT tile1")
	a.q6Tile(2)
	a.q6Tile(9)
	a.q6Tile(8)
	a.q6Tile(6)
	a.q6Tile(4)
	a.q6Tile(1)
	a.packedGroupEnd(1680)
}

// q6Tile emits the super-block loop of a tile of k (1, 2, 4, 6, 8 or 9)
// columns. Registers: V0-V15 the values of one (half, hh, c) step
// (vector 4g+i: sub-block 8hh+c+2i, values 4g..4g+3 of four rows);
// V16-V19 the step's four scale vectors (int32 lanes = rows); V20 a
// sub-block's activations; V22 its integer sums, cleared by a load of
// zeros (R22: no vector-pipe instruction); V24-V29, V21, V23, V30 the
// columns' integer sums of the half (up to nine); V31 the unpack
// constant 0xF0 (set once; qh is stored XORed with 0xAA, so the unpack
// needs no EOR and no second constant). The float sums: one column in
// V28 (rows 0-3) and V29 (4-7); several in the outputs themselves
// (zeroed first; loaded, added to and stored per super-block and half).
// General: R11 the super-block, R12 super-blocks left, R13, R14, R16,
// R19, R21, R23, R20, R24, R25 the columns' activation blocks, R15/R17
// addresses. Nine columns share each unpacked step among the most tokens
// the registers allow (llvm-mca, neoverse-n1: see scripts/armproj.sh).
func (a *asm) q6Tile(k int) {
	mem := k > 1
	a.l("tile%d:", k)
	a.l("MOVD R2, R11")
	a.l("MOVD R6, R12")
	cols := []string{"R13", "R14", "R16", "R19", "R21", "R23", "R20", "R24", "R25"}
	a.l("MOVD R9, R13")
	for c := 1; c < k; c++ {
		a.l("ADD R5, %s, %s", cols[c-1], cols[c])
	}
	a.zero(28)
	a.zero(29)
	if mem {
		a.l("MOVD R10, R17")
		for c := 0; c < k; c++ {
			a.l("VST1 [V28.S4, V29.S4], (R17)")
			if c+1 < k {
				a.l("ADD R1, R17")
			}
		}
	}
	isum := []int{24, 25, 26, 27, 28, 29, 21, 23, 30}
	a.l("PCALIGN $16")
	a.l("q6sb%d:", k)
	for h := 0; h < 2; h++ {
		for s := 0; s < 4; s++ { // s = 2hh + c
			hh, c := s/2, s%2
			a.l("ADD $%d, R11, R15", 144+768*h+192*s)
			for g := 0; g < 4; g++ {
				a.l("FMOVQ %d(R15), F16", 16*g)
				a.l("FMOVQ %d(R15), F17", 64+16*g)
				a.l("FMOVQ %d(R15), F%d", 128+16*g, 4*g+3)
				a.q6UnpackX(16, 17, 4*g+3, 4*g, 4*g+1, 4*g+2, 4*g+3, 18)
			}
			// the four sub-blocks' scales, int32 lanes = rows
			a.l("FMOVQ %d(R11), F20", 16+64*h+16*s)
			a.i(sshll8(17, 20))
			a.i(sshll28(19, 20))
			a.i(sshll16(16, 17))
			a.i(sshll216(17, 17))
			a.i(sshll16(18, 19))
			a.i(sshll216(19, 19))
			for col := 0; col < k; col++ {
				r := isum[col]
				for i := 0; i < 4; i++ { // sub-block 8hh+c+2i
					a.l("FMOVQ %d(%s), F20", 4+16*(8*hh+c+2*i), cols[col])
					a.l("VLD1 (R22), [V22.B16]")
					for g := 0; g < 4; g++ {
						a.i(sdotElem(22, 4*g+i, 20, g))
					}
					if s == 0 && i == 0 {
						a.i(mul4s(r, 22, 16))
					} else {
						a.i(mla4s(r, 22, 16+i))
					}
				}
			}
		}
		// F += float(4·sumi)/4 · (d·yd), d of the half's rows
		a.l("FMOVD %d(R11), F16", 8*h)
		a.i(fcvtl(16, 16))
		if mem {
			a.l("ADD $%d, R10, R17", 16*h)
		}
		for col := 0; col < k; col++ {
			r, f := isum[col], 28+h
			a.l("FMOVS (%s), F17", cols[col])
			a.i(fmulElem(18, 16, 17, 0))
			a.i(scvtf4sFix(r, r, 2))
			if mem {
				f = 19
				a.l("VLD1 (R17), [V19.S4]")
			}
			a.i(fmla4s(f, r, 18))
			if mem {
				a.l("VST1 [V19.S4], (R17)")
				if col+1 < k {
					a.l("ADD R1, R17")
				}
			}
		}
	}
	a.l("ADD $1680, R11")
	for col := 0; col < k; col++ {
		a.l("ADD $292, %s", cols[col])
	}
	a.l("SUBS $1, R12")
	a.l("BNE q6sb%d", k)
	if mem {
		a.l("SUB $%d, R8", k)
		a.l("MOVD $%d, R17", k)
		a.l("MADD R5, R9, R17, R9")
		a.l("MADD R1, R10, R17, R10")
	} else {
		a.tileDone(k, 28, "R17")
	}
	a.l("B next")
}
