package main

import "fmt"

// The avx2 set's kernels over the avx512vnni packed layouts
// (pack_avx2_amd64.s), for CPUs without AVX-512.

const packAVX2Doc = `AVX2 kernels over the avx512vnni set's packed layouts (16-row groups,
see pack_vnni_amd64.go), for CPUs without AVX-512: each group in two
halves of 8 rows (the first or last 32 bytes of every 64-byte chunk,
the first or last 8 scales), one row per int32 lane of a ymm register.

Q4_0 and Q5_0, per block and column: VPMADDUBSW of each chunk (unsigned
quants) with the activation dword broadcast (signed), the int16 pair
sums added in int16 (exact: at most 8*2*15*128 for Q4_0, 4*2*31*128 for
Q5_0 before VPMADDWD widens them to int32), -o*sum a from the prepared
entry, then the generic float steps ((sumi*dw)*da for Q4_0, sumi*(dw*da)
for Q5_0): bit-identical to the generic dots. The columns' sums live in
out (zeroed first, added to block after block), so any number of
columns runs in one call.

Registers: DI the half-group's outputs (column 0), CX ldo*4, SI the
half's block, R12 blocks left, DX column 0's entries, R8 aStride, BX
columns left, R9 the column's entries, R14 the column's outputs, R13 the
group, R11 halves left, R10 groups left. Y8..Y15 the chunks, Y6 dw.`

const packKAVX2Doc = `K-quants on AVX2: per half-group (8 rows) tiles of 2 columns (1 for an
odd last one, T in t-8(SP)), their int32 totals in Y2, Y3 and float
sums in Y4, Y5 for the whole row. Per sub-block the quants' VPMADDUBSW
pair sums are added in int16 while exact (Q4_K 8 chunks, Q5_K 4, Q6_K
2), then VPMADDWD multiplies them by the rows' sub-block scales given as
(scale, scale) int16 pairs: scale*sum in int32. The mins (Q4_K, Q5_K)
and Q6_K's -32 offset through the Q8_K bsums, the float step per
super-block with FMA, all as the avx512vnni kernels: the same integers
and the same float operations, so the same bits.

Registers: DI the tile's outputs, CX ldo*4, R13 the group, AX the half
(0 or 1), SI the super-block, R12 super-blocks left, DX the tile's
first column, R8 aStride, BX columns left, R9/R10 the tile's columns,
R11 the quants, R14 the scales; t-8(SP) T, hout-16(SP) the half's
outputs, ng-24(SP) groups left, pc-32(SP) a loop count, hh-40(SP) the
half. Y8..Y15 the quants (later the mins or scale pairs), Y7 the
sub-block scale pairs, Y0, Y1, Y6 temporaries.`

// i16chain leaves in d the int16 sums of VPMADDUBSW(w[k], the dword at
// mem(k) broadcast) over the chunks w (t a temporary).
func (a *asm) i16chain(d, t string, w []string, mem func(k int) string) {
	a.l("VPBROADCASTD %s, %s", mem(0), d)
	a.l("VPMADDUBSW %s, %s, %s", d, w[0], d)
	for k := 1; k < len(w); k++ {
		a.l("VPBROADCASTD %s, %s", mem(k), t)
		a.l("VPMADDUBSW %s, %s, %s", t, w[k], t)
		a.l("VPADDW %s, %s, %s", t, d, d)
	}
}

// ys returns the registers Y(from)..Y(from+n-1).
func ys(from, n int) []string {
	r := make([]string, n)
	for i := range r {
		r[i] = y(from + i)
	}
	return r
}

// memAt returns the addresses off+4k(r).
func memAt(r string, off int) func(k int) string {
	return func(k int) string { return fmt.Sprintf("%d(%s)", off+4*k, r) }
}

// a2sum leaves in Y0 the 8 rows' int32 sums of the column's entry at R9
// over the chunks Y8..Y15, widened after every `every` chunks.
func (a *asm) a2sum(every int) {
	m := memAt("R9", 0)
	if every == 8 {
		a.i16chain("Y0", "Y1", ys(8, 8), m)
		a.l("VPMADDWD a2ones<>(SB), Y0, Y0")
		return
	}
	a.i16chain("Y0", "Y1", ys(8, 4), m)
	a.l("VPMADDWD a2ones<>(SB), Y0, Y0")
	a.i16chain("Y1", "Y2", ys(12, 4), func(k int) string { return m(k + 4) })
	a.l("VPMADDWD a2ones<>(SB), Y1, Y1")
	a.l("VPADDD Y1, Y0, Y0")
}

// a2unpack unpacks the half of the block at SI (AX = 16*half for the
// scales, 32*half for the chunks, added in): dw in Y6, the chunks in
// Y8..Y15 (Q5_0: the fifth bits from the qh words, Y7, ored in as 16).
func (a *asm) a2unpack(q5 bool) {
	a.l("VCVTPH2PS (SI)(AX*1), Y6")
	a.l("LEAQ (SI)(AX*2), R9")
	a.l("XCHGQ SI, R9")
	base := 32
	if q5 {
		base = 96
	}
	for k := 0; k < 4; k++ {
		lo, hi := y(8+k), y(12+k)
		a.l("VMOVDQU %d(SI), %s", base+64*k, lo)
		a.l("VPSRLW $4, %s, %s", lo, hi)
		a.l("VPAND a2nib<>(SB), %s, %s", lo, lo)
		a.l("VPAND a2nib<>(SB), %s, %s", hi, hi)
	}
	if !q5 {
		a.l("XCHGQ SI, R9")
		return
	}
	a.l("VMOVDQU 32(SI), Y7")
	a.l("XCHGQ SI, R9")
	for c := 0; c < 8; c++ {
		a.l("VPSHUFB a2qh<>+%d(SB), Y7, Y0", 32*(c/2))
		a.l("VPAND a2bits<>+%d(SB), Y0, Y0", 32*(c%2))
		a.l("VPCMPEQB a2bits<>+%d(SB), Y0, Y0", 32*(c%2))
		a.l("VPAND a2sixteen<>(SB), Y0, Y0")
		a.l("VPOR Y0, %s, %s", y(8+c), y(8+c))
	}
}

// a2fac adds the column's block (int sums in Y0, the entry at R9) to the
// 8 outputs at R14: (sumi*dw)*da for Q4_0, sumi*(dw*da) for Q5_0.
func (a *asm) a2fac(q4 bool) {
	a.l("VPBROADCASTD 32(R9), Y1")
	a.l("VPADDD Y1, Y0, Y0")
	a.l("VCVTDQ2PS Y0, Y0")
	if q4 {
		a.l("VMULPS Y6, Y0, Y0")
		a.l("VBROADCASTSS 36(R9), Y1")
		a.l("VMULPS Y1, Y0, Y0")
	} else {
		a.l("VBROADCASTSS 36(R9), Y1")
		a.l("VMULPS Y6, Y1, Y1")
		a.l("VMULPS Y1, Y0, Y0")
	}
	a.l("VADDPS (R14), Y0, Y0")
	a.l("VMOVUPS Y0, (R14)")
}

// mulX16AVX2 emits mulQ4_0x16AVX2 or mulQ5_0x16AVX2: every group, half
// by half, the n columns' 8 outputs zeroed, then per block the half
// unpacked once and every column's block added.
func (a *asm) mulX16AVX2(q5 bool) {
	name, bsz := "mulQ4_0x16AVX2", 288
	if q5 {
		name, bsz = "mulQ5_0x16AVX2", 352
	}
	a.textX86(name, packSigX86, "NOSPLIT", "$0-64")
	a.l("MOVQ out+0(FP), DI")
	a.l("MOVQ ldo+8(FP), CX")
	a.l("SHLQ $2, CX")
	a.l("MOVQ w+16(FP), R13")
	a.l("MOVQ groups+24(FP), R10")
	a.l("MOVQ aStride+40(FP), R8")
	a.label("group", false)
	a.l("XORQ AX, AX")
	a.label("half", false)
	a.l("MOVQ n+56(FP), BX")
	a.l("MOVQ DI, R14")
	a.l("VXORPS Y0, Y0, Y0")
	a.label("zero", false)
	a.l("VMOVUPS Y0, (R14)")
	a.l("ADDQ CX, R14")
	a.l("DECQ BX")
	a.l("JNZ zero")
	a.l("MOVQ R13, SI")
	a.l("MOVQ a+32(FP), DX")
	a.l("MOVQ nb+48(FP), R12")
	a.label("blk", false)
	a.l("PREFETCHT0 1024(SI)")
	a.l("PREFETCHT0 1088(SI)")
	a.a2unpack(q5)
	a.l("MOVQ DX, R9")
	a.l("MOVQ DI, R14")
	a.l("MOVQ n+56(FP), BX")
	a.label("col", false)
	if q5 {
		a.a2sum(4)
	} else {
		a.a2sum(8)
	}
	a.a2fac(!q5)
	a.l("ADDQ R8, R9")
	a.l("ADDQ CX, R14")
	a.l("DECQ BX")
	a.l("JNZ col")
	a.l("ADDQ $%d, DX", packEntry)
	a.l("ADDQ $%d, SI", bsz)
	a.l("DECQ R12")
	a.l("JNZ blk")
	a.l("ADDQ $32, DI")
	a.l("ADDQ $16, AX")
	a.l("CMPQ AX, $32")
	a.l("JLT half")
	a.l("MOVQ SI, R13")
	a.l("DECQ R10")
	a.l("JNZ group")
	a.l("VZEROUPPER")
	a.l("RET")
}

// k2cols runs dot(r, isum) for the tile's column 0 (R9, Y2) and, unless
// T == 1, column 1 (R10, Y3); skip a label.
func (a *asm) k2cols(skip string, dot func(r, isum string)) {
	dot("R9", "Y2")
	a.l("CMPQ t-8(SP), $1")
	a.l("JEQ %s", skip)
	dot("R10", "Y3")
	a.label(skip, false)
}

// k2dot adds to isum scale*sum over the chunks w of the column's act
// dwords at off(r), the int16 pair sums widened (times the scale pairs
// sc) after every `every` chunks.
func (a *asm) k2dot(r string, off int, w []string, every int, sc, isum string) {
	for i := 0; i < len(w); i += every {
		a.i16chain("Y0", "Y1", w[i:i+every], memAt(r, off+4*i))
		a.l("VPMADDWD %s, Y0, Y0", sc)
		a.l("VPADDD Y0, %s, %s", isum, isum)
	}
}

// k2scale puts the 8 rows' scales of a sub-block (bytes at sc(R14)) as
// (scale, scale) int16 pairs in Y7.
func (a *asm) k2scale(sc int) {
	a.l("VPMOVZXBD %d(R14), Y7", sc)
	a.l("VPAND k2x3f<>(SB), Y7, Y7")
	a.l("VPSLLD $16, Y7, Y0")
	a.l("VPOR Y0, Y7, Y7")
}

// k2msum leaves in Y0 the column's min (or scale) sums with the bsum pair
// dwords at off(r) (Y8..Y15 the pairs), int32.
func (a *asm) k2msum(r string, off int) {
	a.l("VPBROADCASTD %d(%s), Y0", off, r)
	a.l("VPMADDWD Y0, Y8, Y0")
	for k := 1; k < 8; k++ {
		a.l("VPBROADCASTD %d(%s), Y1", off+4*k, r)
		a.l("VPMADDWD Y1, %s, Y1", y(8+k))
		a.l("VPADDD Y1, Y0, Y0")
	}
}

// k2mins puts the half's mins of every sub-block j as (m, m) int16 pairs
// in Y8+j (scales at R14: the low 2 bits on top of the bytes at 64+16j,
// the high 4 in nibble 4*(j%2) of the bytes at 192+16*(j/2)), d in Y6 and
// dmin in Y7.
func (a *asm) k2mins() {
	for j := 0; j < 8; j++ {
		r := y(8 + j)
		a.l("VPMOVZXBD %d(R14), %s", 64+16*j, r)
		a.l("VPSRLD $6, %s, %s", r, r)
		a.l("VPMOVZXBD %d(R14), Y0", 192+16*(j/2))
		a.l("VPSRLD $%d, Y0, Y0", 4*(j%2))
		a.l("VPAND k2x0f<>(SB), Y0, Y0")
		a.l("VPSLLD $2, Y0, Y0")
		a.l("VPOR Y0, %s, %s", r, r)
		a.l("VPSLLD $16, %s, Y0", r)
		a.l("VPOR Y0, %s, %s", r, r)
	}
	a.l("MOVQ hh-40(SP), R11")
	a.l("SHLQ $4, R11")
	a.l("VCVTPH2PS (SI)(R11*1), Y6")
	a.l("VCVTPH2PS 32(SI)(R11*1), Y7")
}

// k2fin4 is Q4_K's (and Q5_K's) float step for the tile's columns (their
// pointers at the block + 256; Y6 d, Y7 dmin as float): acc = fma(d*yd,
// isum, acc), then acc = fnma(dmin*yd, msum, acc); the totals cleared.
func (a *asm) k2fin4(skip string) {
	a.k2cols(skip, func(r, isum string) {
		acc := map[string]string{"Y2": "Y4", "Y3": "Y5"}[isum]
		a.k2msum(r, 4)
		a.l("VCVTDQ2PS Y0, Y0")
		a.l("VCVTDQ2PS %s, %s", isum, isum)
		a.l("VBROADCASTSS -256(%s), Y1", r)
		a.l("VMULPS Y6, Y1, Y1")
		a.l("VFMADD231PS %s, Y1, %s", isum, acc)
		a.l("VBROADCASTSS -256(%s), Y1", r)
		a.l("VMULPS Y7, Y1, Y1")
		a.l("VFNMADD231PS Y0, Y1, %s", acc)
		a.l("VPXOR %s, %s, %s", isum, isum, isum)
	})
}

// k2begin loads the arguments and opens the loops: per group the half
// from 0 (hh-40(SP)), per half its outputs and the columns from the
// start, per tile T = min(columns left, 2), the column pointers, zeroed
// sums and the group's super-blocks from the start.
func (a *asm) k2begin(name string) {
	a.textX86(name, packSigX86, "NOSPLIT", "$40-64")
	a.l("MOVQ out+0(FP), DI")
	a.l("MOVQ ldo+8(FP), CX")
	a.l("SHLQ $2, CX")
	a.l("MOVQ w+16(FP), R13")
	a.l("MOVQ groups+24(FP), R11")
	a.l("MOVQ R11, ng-24(SP)")
	a.l("MOVQ aStride+40(FP), R8")
	a.b.WriteString("\n")
	a.label("group", false)
	a.l("MOVQ $0, hh-40(SP)")
	a.label("half", false)
	a.l("MOVQ DI, hout-16(SP)")
	a.l("MOVQ a+32(FP), DX")
	a.l("MOVQ n+56(FP), BX")
	a.label("tile", false)
	a.l("MOVQ $2, R11")
	a.l("CMPQ BX, R11")
	a.l("CMOVQLT BX, R11")
	a.l("MOVQ R11, t-8(SP)")
	a.l("MOVQ DX, R9")
	a.l("LEAQ (DX)(R8*1), R10")
	for i := 2; i < 6; i++ {
		a.l("VPXOR %s, %s, %s", y(i), y(i), y(i))
	}
	a.l("MOVQ R13, SI")
	a.l("MOVQ nb+48(FP), R12")
	a.b.WriteString("\n")
	a.label("sblk", false)
}

// k2end steps to the next super-block (the column pointers by step, SI
// by sbsz), then stores the tile's sums and moves on to the next tile,
// half, group or the end.
func (a *asm) k2end(step, sbsz int) {
	a.l("ADDQ $%d, R9", step)
	a.l("ADDQ $%d, R10", step)
	a.l("ADDQ $%d, SI", sbsz)
	a.l("DECQ R12")
	a.l("JNZ sblk")
	a.l("VMOVUPS Y4, (DI)")
	a.l("ADDQ CX, DI")
	a.l("CMPQ t-8(SP), $1")
	a.l("JEQ stored")
	a.l("VMOVUPS Y5, (DI)")
	a.l("ADDQ CX, DI")
	a.label("stored", false)
	a.l("MOVQ t-8(SP), R11")
	a.l("IMULQ R8, R11")
	a.l("ADDQ R11, DX")
	a.l("SUBQ t-8(SP), BX")
	a.l("JNZ tile")
	a.l("MOVQ hout-16(SP), DI")
	a.l("ADDQ $32, DI")
	a.l("INCQ hh-40(SP)")
	a.l("CMPQ hh-40(SP), $2")
	a.l("JLT half")
	a.l("MOVQ SI, R13")
	a.l("DECQ ng-24(SP)")
	a.l("JNZ group")
	a.l("VZEROUPPER")
	a.l("RET")
}

func (a *asm) mulQ4_KAVX2() {
	a.k2begin("mulQ4_Kx16AVX2")
	a.l("PREFETCHT0 2304(SI)")
	// The half's quants: 32 bytes into every 64-byte chunk; its scales:
	// 8 bytes into every 16.
	a.l("MOVQ hh-40(SP), AX")
	a.l("MOVQ AX, R11")
	a.l("SHLQ $5, R11")
	a.l("LEAQ 256(SI)(R11*1), R11")
	a.l("MOVQ AX, R14")
	a.l("SHLQ $3, R14")
	a.l("ADDQ SI, R14")
	a.l("MOVQ $4, pc-32(SP)")
	a.b.WriteString("\n")
	a.label("pair", false)
	for h := 0; h < 2; h++ {
		// Sub-block 2p: the low nibbles; 2p+1: the high ones.
		for c := 0; c < 8; c++ {
			if h == 0 {
				a.l("VMOVDQU %d(R11), %s", 64*c, y(8+c))
			} else {
				a.l("VPSRLW $4, %d(R11), %s", 64*c, y(8+c))
			}
			a.l("VPAND k2x0f<>(SB), %s, %s", y(8+c), y(8+c))
		}
		a.k2scale(64 + 16*h)
		a.k2cols(fmt.Sprintf("p%d", h), func(r, isum string) { a.k2dot(r, 4+32*h, ys(8, 8), 8, "Y7", isum) })
	}
	a.l("ADDQ $512, R11")
	a.l("ADDQ $32, R14")
	a.l("ADDQ $64, R9")
	a.l("ADDQ $64, R10")
	a.l("DECQ pc-32(SP)")
	a.l("JNZ pair")
	a.b.WriteString("\n")
	// R14 is 128 past the half's scales: the mins, d, dmin.
	a.l("SUBQ $128, R14")
	a.k2mins()
	a.k2fin4("f1")
	a.k2end(36, 2304)
}

func (a *asm) mulQ5_KAVX2() {
	a.k2begin("mulQ5_Kx16AVX2")
	a.l("PREFETCHT0 2816(SI)")
	// R11: the half's nibble chunks (768 + 32*half), AX: its qh chunks
	// (256 + 32*half), R14: its scales (8*half).
	a.l("MOVQ hh-40(SP), R14")
	a.l("MOVQ R14, R11")
	a.l("SHLQ $5, R11")
	a.l("LEAQ 256(SI)(R11*1), AX")
	a.l("LEAQ 768(SI)(R11*1), R11")
	a.l("SHLQ $3, R14")
	a.l("ADDQ SI, R14")
	for j := 0; j < 8; j++ {
		if j > 0 && j%2 == 0 {
			a.l("ADDQ $512, R11")
		}
		// Each chunk's fifth bit (bit j of the half's qh chunk) shifted
		// into bit 4, masked and ored into the nibbles.
		shift, sh := "VPSLLW", 4-j
		if j >= 4 {
			shift, sh = "VPSRLW", j-4
		}
		for c := 0; c < 8; c++ {
			r := y(8 + c)
			a.l("%s $%d, %d(AX), %s", shift, sh, 64*c, r)
			a.l("VPAND k2x10<>(SB), %s, %s", r, r)
			if j%2 == 0 {
				a.l("VMOVDQU %d(R11), Y0", 64*c)
			} else {
				a.l("VPSRLW $4, %d(R11), Y0", 64*c)
			}
			a.l("VPAND k2x0f<>(SB), Y0, Y0")
			a.l("VPOR Y0, %s, %s", r, r)
		}
		a.k2scale(64 + 16*j)
		a.k2cols(fmt.Sprintf("j%d", j), func(r, isum string) { a.k2dot(r, 4+32*j, ys(8, 8), 4, "Y7", isum) })
	}
	a.b.WriteString("\n")
	a.k2mins()
	a.l("ADDQ $256, R9")
	a.l("ADDQ $256, R10")
	a.k2fin4("f5")
	a.k2end(36, 2816)
}

func (a *asm) mulQ6_KAVX2() {
	a.k2begin("mulQ6_Kx16AVX2")
	a.l("PREFETCHT0 3360(SI)")
	// R11: quad 0's chunks, 32 bytes in for the half; R14: the scale
	// pairs, 16 bytes in.
	a.l("MOVQ hh-40(SP), AX")
	a.l("MOVQ AX, R11")
	a.l("SHLQ $5, R11")
	a.l("LEAQ 288(SI)(R11*1), R11")
	a.l("MOVQ AX, R14")
	a.l("SHLQ $4, R14")
	a.l("ADDQ SI, R14")
	// Quads (0,0), (0,1), (1,0), (1,1): sub-blocks s0 = 8h+u, s0+2 (the
	// low nibbles, qh bits 0-1 and 2-3), then s0+4, s0+6 (high, bits 4-5
	// and 6-7); the scales of s0 the even (u = 0, imm 0xa0) or odd (0xf5)
	// members of the pairs at 32+128h; the acts of s0 at 4+128h+16u.
	for qd := 0; qd < 4; qd++ {
		if qd > 0 {
			a.l("ADDQ $768, R11")
		}
		h, u := qd/2, qd%2
		imm := []string{"0xa0", "0xf5"}[u]
		for ph := 0; ph < 2; ph++ {
			for c := 0; c < 8; c++ {
				r := y(8 + c)
				qoff, hoff := 64*c, 512+64*(c%4)
				if ph == 0 {
					a.l("VPSLLW $%d, %d(R11), %s", 4-2*(c/4), hoff, r)
					a.l("VPAND k2x30<>(SB), %s, %s", r, r)
					a.l("VMOVDQU %d(R11), Y0", qoff)
				} else {
					a.l("VPSRLW $%d, %d(R11), %s", 2*(c/4), hoff, r)
					a.l("VPAND k2x30<>(SB), %s, %s", r, r)
					a.l("VPSRLW $4, %d(R11), Y0", qoff)
				}
				a.l("VPAND k2x0f<>(SB), Y0, Y0")
				a.l("VPOR Y0, %s, %s", r, r)
			}
			sc := 32 + 128*h + 64*ph
			for i, r := range []string{"Y7", "Y6"} {
				a.l("VPMOVSXBW %d(R14), %s", sc+32*i, r)
				a.l("VPSHUFLW $%s, %s, %s", imm, r, r)
				a.l("VPSHUFHW $%s, %s, %s", imm, r, r)
			}
			act := 4 + 128*h + 16*u + 64*ph
			a.k2cols(fmt.Sprintf("q%d%d", qd, ph), func(r, isum string) {
				a.k2dot(r, act, ys(8, 4), 2, "Y7", isum)
				a.k2dot(r, act+32, ys(12, 4), 2, "Y6", isum)
			})
		}
	}
	// The scale pairs (even, odd) for the bsums; d; each column's end:
	// acc = fma(d*yd, isum - 32*msum, acc).
	for j := 0; j < 8; j++ {
		a.l("VPMOVSXBW %d(R14), %s", 32+32*j, y(8+j))
	}
	a.l("MOVQ AX, R11")
	a.l("SHLQ $4, R11")
	a.l("VCVTPH2PS (SI)(R11*1), Y6")
	a.k2cols("f6", func(r, isum string) {
		acc := map[string]string{"Y2": "Y4", "Y3": "Y5"}[isum]
		a.k2msum(r, 260)
		a.l("VPSLLD $5, Y0, Y0")
		a.l("VPSUBD Y0, %s, %s", isum, isum)
		a.l("VCVTDQ2PS %s, %s", isum, isum)
		a.l("VBROADCASTSS (%s), Y1", r)
		a.l("VMULPS Y6, Y1, Y1")
		a.l("VFMADD231PS %s, Y1, %s", isum, acc)
		a.l("VPXOR %s, %s, %s", isum, isum, isum)
	})
	a.k2end(292, 3360)
}

// genPackAVX2 writes pack_avx2_amd64.s.
func genPackAVX2(a *asm) {
	a.b.WriteString("\n")
	a.doc(packAVX2Doc)
	a.mulX16AVX2(false)
	a.mulX16AVX2(true)
	a.b.WriteString("\n")
	a.splat("a2ones", 0x0001000100010001, 32)
	a.b.WriteString("\n")
	a.splat("a2nib", 0x0f0f0f0f0f0f0f0f, 32)
	a.b.WriteString("\n")
	a.splat("a2sixteen", 0x1010101010101010, 32)
	a.b.WriteString("\n// a2qh: VPSHUFB controls repeating byte c of every dword (c = 0..3).\n")
	var qh []uint64
	for c := uint64(0); c < 4; c++ {
		lo, hi := 0x04040404_00000000+c*0x01010101_01010101, 0x0c0c0c0c_08080808+c*0x01010101_01010101
		qh = append(qh, lo, hi, lo, hi)
	}
	a.data("a2qh", qh...)
	a.b.WriteString("\n// a2bits: byte k of every dword holds bit k, then bit k+4.\n")
	a.data("a2bits", 0x0804020108040201, 0x0804020108040201, 0x0804020108040201, 0x0804020108040201,
		0x8040201080402010, 0x8040201080402010, 0x8040201080402010, 0x8040201080402010)
	a.b.WriteString("\n")
	a.doc(packKAVX2Doc)
	a.mulQ4_KAVX2()
	a.mulQ6_KAVX2()
	a.mulQ5_KAVX2()
	for _, c := range []struct {
		name string
		w    uint64
	}{{"k2x0f", 0x0f0f0f0f0f0f0f0f}, {"k2x3f", 0x0000003f0000003f}, {"k2x30", 0x3030303030303030}, {"k2x10", 0x1010101010101010}} {
		a.b.WriteString("\n")
		a.splat(c.name, c.w, 32)
	}
}
