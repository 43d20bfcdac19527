package main

import "fmt"

// Encodings of the AArch64 SIMD instructions the Go assembler lacks. Each
// returns one line: WORD $0x... // the instruction in ARM syntax. Register
// numbers are V registers 0..31.

func word(enc uint32, format string, args ...any) string {
	return fmt.Sprintf("WORD $0x%08x // %s", enc, fmt.Sprintf(format, args...))
}

func rrr(base uint32, d, n, m int) uint32 {
	return base | uint32(m&31)<<16 | uint32(n&31)<<5 | uint32(d&31)
}

func rr(base uint32, d, n int) uint32 { return base | uint32(n&31)<<5 | uint32(d&31) }

// sdot: SDOT Vd.4S, Vn.16B, Vm.16B (ARMv8.2 dot product).
func sdot(d, n, m int) string {
	return word(rrr(0x4e809400, d, n, m), "SDOT V%d.4S, V%d.16B, V%d.16B", d, n, m)
}

// smull8: SMULL Vd.8H, Vn.8B, Vm.8B.
func smull8(d, n, m int) string {
	return word(rrr(0x0e20c000, d, n, m), "SMULL V%d.8H, V%d.8B, V%d.8B", d, n, m)
}

// smull28: SMULL2 Vd.8H, Vn.16B, Vm.16B.
func smull28(d, n, m int) string {
	return word(rrr(0x4e20c000, d, n, m), "SMULL2 V%d.8H, V%d.16B, V%d.16B", d, n, m)
}

// smlal8: SMLAL Vd.8H, Vn.8B, Vm.8B.
func smlal8(d, n, m int) string {
	return word(rrr(0x0e208000, d, n, m), "SMLAL V%d.8H, V%d.8B, V%d.8B", d, n, m)
}

// smlal28: SMLAL2 Vd.8H, Vn.16B, Vm.16B.
func smlal28(d, n, m int) string {
	return word(rrr(0x4e208000, d, n, m), "SMLAL2 V%d.8H, V%d.16B, V%d.16B", d, n, m)
}

// smull16: SMULL Vd.4S, Vn.4H, Vm.4H.
func smull16(d, n, m int) string {
	return word(rrr(0x0e60c000, d, n, m), "SMULL V%d.4S, V%d.4H, V%d.4H", d, n, m)
}

// smlal216: SMLAL2 Vd.4S, Vn.8H, Vm.8H.
func smlal216(d, n, m int) string {
	return word(rrr(0x4e608000, d, n, m), "SMLAL2 V%d.4S, V%d.8H, V%d.8H", d, n, m)
}

// saddlp8: SADDLP Vd.4S, Vn.8H.
func saddlp8(d, n int) string { return word(rr(0x4e602800, d, n), "SADDLP V%d.4S, V%d.8H", d, n) }

// sadalp8: SADALP Vd.4S, Vn.8H.
func sadalp8(d, n int) string { return word(rr(0x4e606800, d, n), "SADALP V%d.4S, V%d.8H", d, n) }

// saddlv8: SADDLV Sd, Vn.8H.
func saddlv8(d, n int) string { return word(rr(0x4e703800, d, n), "SADDLV S%d, V%d.8H", d, n) }

// saddlv16b: SADDLV Hd, Vn.16B.
func saddlv16b(d, n int) string { return word(rr(0x4e303800, d, n), "SADDLV H%d, V%d.16B", d, n) }

// addv4s: ADDV Sd, Vn.4S.
func addv4s(d, n int) string { return word(rr(0x4eb1b800, d, n), "ADDV S%d, V%d.4S", d, n) }

// scvtfS: SCVTF Sd, Sn (scalar, in a vector register).
func scvtfS(d, n int) string { return word(rr(0x5e21d800, d, n), "SCVTF S%d, S%d", d, n) }

// mlaElem: MLA Vd.4S, Vn.4S, Vm.S[i].
func mlaElem(d, n, m, i int) string {
	enc := uint32(0x6f800000) | uint32(i&1)<<21 | uint32(m&31)<<16 | uint32(i>>1&1)<<11 | uint32(n&31)<<5 | uint32(d&31)
	return word(enc, "MLA V%d.4S, V%d.4S, V%d.S[%d]", d, n, m, i)
}

// fmulElem: FMUL Vd.4S, Vn.4S, Vm.S[i].
func fmulElem(d, n, m, i int) string {
	enc := uint32(0x4f809000) | uint32(i&1)<<21 | uint32(m&31)<<16 | uint32(i>>1&1)<<11 | uint32(n&31)<<5 | uint32(d&31)
	return word(enc, "FMUL V%d.4S, V%d.4S, V%d.S[%d]", d, n, m, i)
}

// fmul4s: FMUL Vd.4S, Vn.4S, Vm.4S.
func fmul4s(d, n, m int) string {
	return word(rrr(0x6e20dc00, d, n, m), "FMUL V%d.4S, V%d.4S, V%d.4S", d, n, m)
}

// fadd4s: FADD Vd.4S, Vn.4S, Vm.4S.
func fadd4s(d, n, m int) string {
	return word(rrr(0x4e20d400, d, n, m), "FADD V%d.4S, V%d.4S, V%d.4S", d, n, m)
}

// fadd2d: FADD Vd.2D, Vn.2D, Vm.2D.
func fadd2d(d, n, m int) string {
	return word(rrr(0x4e60d400, d, n, m), "FADD V%d.2D, V%d.2D, V%d.2D", d, n, m)
}

// fmla4s: FMLA Vd.4S, Vn.4S, Vm.4S.
func fmla4s(d, n, m int) string {
	return word(rrr(0x4e20cc00, d, n, m), "FMLA V%d.4S, V%d.4S, V%d.4S", d, n, m)
}

// faddp4s: FADDP Vd.4S, Vn.4S, Vm.4S.
func faddp4s(d, n, m int) string {
	return word(rrr(0x6e20d400, d, n, m), "FADDP V%d.4S, V%d.4S, V%d.4S", d, n, m)
}

// faddpS: FADDP Sd, Vn.2S.
func faddpS(d, n int) string { return word(rr(0x7e30d800, d, n), "FADDP S%d, V%d.2S", d, n) }

// faddpD: FADDP Dd, Vn.2D.
func faddpD(d, n int) string { return word(rr(0x7e70d800, d, n), "FADDP D%d, V%d.2D", d, n) }

// fcvtl: FCVTL Vd.4S, Vn.4H; fcvtl2: FCVTL2 Vd.4S, Vn.8H.
func fcvtl(d, n int) string  { return word(rr(0x0e217800, d, n), "FCVTL V%d.4S, V%d.4H", d, n) }
func fcvtl2(d, n int) string { return word(rr(0x4e217800, d, n), "FCVTL2 V%d.4S, V%d.8H", d, n) }

// fcvtlD: FCVTL Vd.2D, Vn.2S; fcvtl2D: FCVTL2 Vd.2D, Vn.4S.
func fcvtlD(d, n int) string  { return word(rr(0x0e617800, d, n), "FCVTL V%d.2D, V%d.2S", d, n) }
func fcvtl2D(d, n int) string { return word(rr(0x4e617800, d, n), "FCVTL2 V%d.2D, V%d.4S", d, n) }

// fabs4s: FABS Vd.4S, Vn.4S.
func fabs4s(d, n int) string { return word(rr(0x4ea0f800, d, n), "FABS V%d.4S, V%d.4S", d, n) }

// fmaxnm4s / fminnm4s: FMAXNM / FMINNM Vd.4S, Vn.4S, Vm.4S.
func fmaxnm4s(d, n, m int) string {
	return word(rrr(0x4e20c400, d, n, m), "FMAXNM V%d.4S, V%d.4S, V%d.4S", d, n, m)
}
func fminnm4s(d, n, m int) string {
	return word(rrr(0x4ea0c400, d, n, m), "FMINNM V%d.4S, V%d.4S, V%d.4S", d, n, m)
}

// fmaxnmv / fminnmv: FMAXNMV / FMINNMV Sd, Vn.4S.
func fmaxnmv(d, n int) string { return word(rr(0x6e30c800, d, n), "FMAXNMV S%d, V%d.4S", d, n) }
func fminnmv(d, n int) string { return word(rr(0x6eb0c800, d, n), "FMINNMV S%d, V%d.4S", d, n) }

// fcvtas4s: FCVTAS Vd.4S, Vn.4S (round to nearest, ties away from zero).
func fcvtas4s(d, n int) string { return word(rr(0x4e21c800, d, n), "FCVTAS V%d.4S, V%d.4S", d, n) }

// fcvtns4s: FCVTNS Vd.4S, Vn.4S (round to nearest, ties to even).
func fcvtns4s(d, n int) string { return word(rr(0x4e21a800, d, n), "FCVTNS V%d.4S, V%d.4S", d, n) }

// sqxtn / sqxtn2 from 4S to 4H/8H, and from 8H to 8B/16B.
func sqxtnH(d, n int) string  { return word(rr(0x0e614800, d, n), "SQXTN V%d.4H, V%d.4S", d, n) }
func sqxtn2H(d, n int) string { return word(rr(0x4e614800, d, n), "SQXTN2 V%d.8H, V%d.4S", d, n) }
func sqxtnB(d, n int) string  { return word(rr(0x0e214800, d, n), "SQXTN V%d.8B, V%d.8H", d, n) }
func sqxtn2B(d, n int) string { return word(rr(0x4e214800, d, n), "SQXTN2 V%d.16B, V%d.8H", d, n) }

// ushll8: USHLL Vd.8H, Vn.8B, #0; ushll16 / ushll216: USHLL(2) Vd.4S, Vn.4H/8H, #0.
func ushll8(d, n int) string   { return word(rr(0x2f08a400, d, n), "USHLL V%d.8H, V%d.8B, #0", d, n) }
func ushll16(d, n int) string  { return word(rr(0x2f10a400, d, n), "USHLL V%d.4S, V%d.4H, #0", d, n) }
func ushll216(d, n int) string { return word(rr(0x6f10a400, d, n), "USHLL2 V%d.4S, V%d.8H, #0", d, n) }

// sshll8 / sshll28: SSHLL(2) Vd.8H, Vn.8B/16B, #0; sshll16 / sshll216 to 4S.
func sshll8(d, n int) string   { return word(rr(0x0f08a400, d, n), "SSHLL V%d.8H, V%d.8B, #0", d, n) }
func sshll28(d, n int) string  { return word(rr(0x4f08a400, d, n), "SSHLL2 V%d.8H, V%d.16B, #0", d, n) }
func sshll16(d, n int) string  { return word(rr(0x0f10a400, d, n), "SSHLL V%d.4S, V%d.4H, #0", d, n) }
func sshll216(d, n int) string { return word(rr(0x4f10a400, d, n), "SSHLL2 V%d.4S, V%d.8H, #0", d, n) }

// insH: INS Vd.H[i], Vn.H[0].
func insH(d, i, n int) string {
	imm5 := uint32(i)<<2 | 2
	return word(0x6e000400|imm5<<16|uint32(n&31)<<5|uint32(d&31), "INS V%d.H[%d], V%d.H[0]", d, i, n)
}

// cmtst: CMTST Vd.16B, Vn.16B, Vm.16B.
func cmtst(d, n, m int) string {
	return word(rrr(0x4e208c00, d, n, m), "CMTST V%d.16B, V%d.16B, V%d.16B", d, n, m)
}

// scvtf4s: SCVTF Vd.4S, Vn.4S.
func scvtf4s(d, n int) string { return word(rr(0x4e21d800, d, n), "SCVTF V%d.4S, V%d.4S", d, n) }

// umax4s: UMAX Vd.4S, Vn.4S, Vm.4S; umaxv: UMAXV Sd, Vn.4S.
func umax4s(d, n, m int) string {
	return word(rrr(0x6ea06400, d, n, m), "UMAX V%d.4S, V%d.4S, V%d.4S", d, n, m)
}
func umaxv(d, n int) string { return word(rr(0x6eb0a800, d, n), "UMAXV S%d, V%d.4S", d, n) }

// usra31: USRA Vd.4S, Vn.4S, #31.
func usra31(d, n int) string { return word(rr(0x6f211400, d, n), "USRA V%d.4S, V%d.4S, #31", d, n) }

// sdotElem: SDOT Vd.4S, Vn.16B, Vm.4B[i] (ARMv8.2 dot product by element).
func sdotElem(d, n, m, i int) string {
	enc := uint32(0x4f80e000) | uint32(i&1)<<21 | uint32(m&31)<<16 | uint32(i>>1&1)<<11 | uint32(n&31)<<5 | uint32(d&31)
	return word(enc, "SDOT V%d.4S, V%d.16B, V%d.4B[%d]", d, n, m, i)
}

// scvtf4sFix: SCVTF Vd.4S, Vn.4S, #fbits (fixed point: the result is
// float(x)/2^fbits, rounded once).
func scvtf4sFix(d, n, fbits int) string {
	if fbits < 1 || fbits > 32 {
		panic("scvtf4sFix: fbits out of range")
	}
	return word(0x4f00e400|uint32(64-fbits)<<16|uint32(n&31)<<5|uint32(d&31), "SCVTF V%d.4S, V%d.4S, #%d", d, n, fbits)
}

// mlsElem: MLS Vd.4S, Vn.4S, Vm.S[i].
func mlsElem(d, n, m, i int) string {
	enc := uint32(0x6f804000) | uint32(i&1)<<21 | uint32(m&31)<<16 | uint32(i>>1&1)<<11 | uint32(n&31)<<5 | uint32(d&31)
	return word(enc, "MLS V%d.4S, V%d.4S, V%d.S[%d]", d, n, m, i)
}

// saddlp16b: SADDLP Vd.8H, Vn.16B; sadalp16b: SADALP Vd.8H, Vn.16B.
func saddlp16b(d, n int) string { return word(rr(0x4e202800, d, n), "SADDLP V%d.8H, V%d.16B", d, n) }
func sadalp16b(d, n int) string { return word(rr(0x4e206800, d, n), "SADALP V%d.8H, V%d.16B", d, n) }

// addp8h: ADDP Vd.8H, Vn.8H, Vm.8H.
func addp8h(d, n, m int) string {
	return word(rrr(0x4e60bc00, d, n, m), "ADDP V%d.8H, V%d.8H, V%d.8H", d, n, m)
}

// scvtfSFix: SCVTF Sd, Sn, #fbits (scalar fixed point in a vector register).
func scvtfSFix(d, n, fbits int) string {
	if fbits < 1 || fbits > 32 {
		panic("scvtfSFix: fbits out of range")
	}
	return word(0x5f00e400|uint32(64-fbits)<<16|uint32(n&31)<<5|uint32(d&31), "SCVTF S%d, S%d, #%d", d, n, fbits)
}

// mulElem: MUL Vd.4S, Vn.4S, Vm.S[i].
func mulElem(d, n, m, i int) string {
	enc := uint32(0x4f808000) | uint32(i&1)<<21 | uint32(m&31)<<16 | uint32(i>>1&1)<<11 | uint32(n&31)<<5 | uint32(d&31)
	return word(enc, "MUL V%d.4S, V%d.4S, V%d.S[%d]", d, n, m, i)
}

// tbl1: TBL Vd.16B, {Vn.16B}, Vm.16B.
func tbl1(d, n, m int) string {
	return word(rrr(0x4e000000, d, n, m), "TBL V%d.16B, {V%d.16B}, V%d.16B", d, n, m)
}

// sshr16b: SSHR Vd.16B, Vn.16B, #shift (1..8).
func sshr16b(d, n, shift int) string {
	return word(0x4f080400|uint32(16-shift)<<16|uint32(n&31)<<5|uint32(d&31), "SSHR V%d.16B, V%d.16B, #%d", d, n, shift)
}

// sshr8h: SSHR Vd.8H, Vn.8H, #shift (1..16).
func sshr8h(d, n, shift int) string {
	return word(0x4f000400|uint32(32-shift)<<16|uint32(n&31)<<5|uint32(d&31), "SSHR V%d.8H, V%d.8H, #%d", d, n, shift)
}

// uzp1b: UZP1 Vd.16B, Vn.16B, Vm.16B (the even bytes of n, then of m).
func uzp1b(d, n, m int) string {
	return word(rrr(0x4e001800, d, n, m), "UZP1 V%d.16B, V%d.16B, V%d.16B", d, n, m)
}

// uzp1h: UZP1 Vd.8H, Vn.8H, Vm.8H (the even halves of n, then of m).
func uzp1h(d, n, m int) string {
	return word(rrr(0x4e401800, d, n, m), "UZP1 V%d.8H, V%d.8H, V%d.8H", d, n, m)
}

// mul4s / mla4s: MUL / MLA Vd.4S, Vn.4S, Vm.4S.
func mul4s(d, n, m int) string {
	return word(rrr(0x4ea09c00, d, n, m), "MUL V%d.4S, V%d.4S, V%d.4S", d, n, m)
}
func mla4s(d, n, m int) string {
	return word(rrr(0x4ea09400, d, n, m), "MLA V%d.4S, V%d.4S, V%d.4S", d, n, m)
}

// scvtf2s: SCVTF Vd.2S, Vn.2S.
func scvtf2s(d, n int) string { return word(rr(0x0e21d800, d, n), "SCVTF V%d.2S, V%d.2S", d, n) }

// fmul2s: FMUL Vd.2S, Vn.2S, Vm.2S; fmul2sElem: FMUL Vd.2S, Vn.2S, Vm.S[i].
func fmul2s(d, n, m int) string {
	return word(rrr(0x2e20dc00, d, n, m), "FMUL V%d.2S, V%d.2S, V%d.2S", d, n, m)
}
func fmul2sElem(d, n, m, i int) string {
	enc := uint32(0x0f809000) | uint32(i&1)<<21 | uint32(m&31)<<16 | uint32(i>>1&1)<<11 | uint32(n&31)<<5 | uint32(d&31)
	return word(enc, "FMUL V%d.2S, V%d.2S, V%d.S[%d]", d, n, m, i)
}

// ushll28: USHLL2 Vd.8H, Vn.16B, #0.
func ushll28(d, n int) string { return word(rr(0x6f08a400, d, n), "USHLL2 V%d.8H, V%d.16B, #0", d, n) }

// elemH encodes a by-element operand Vm.H[i] (m < 16, i < 8) into base.
func elemH(base uint32, d, n, m, i int) uint32 {
	if m > 15 || i > 7 {
		panic("elemH: register or index out of range")
	}
	return base | uint32(i>>1&1)<<21 | uint32(i&1)<<20 | uint32(m&15)<<16 | uint32(i>>2&1)<<11 | uint32(n&31)<<5 | uint32(d&31)
}

// smullElem / smlalElem / smlal2Elem: SMULL / SMLAL Vd.4S, Vn.4H, Vm.H[i]
// and SMLAL2 Vd.4S, Vn.8H, Vm.H[i] (m < 16).
func smullElem(d, n, m, i int) string {
	return word(elemH(0x0f40a000, d, n, m, i), "SMULL V%d.4S, V%d.4H, V%d.H[%d]", d, n, m, i)
}
func smull2Elem(d, n, m, i int) string {
	return word(elemH(0x4f40a000, d, n, m, i), "SMULL2 V%d.4S, V%d.8H, V%d.H[%d]", d, n, m, i)
}
func smlalElem(d, n, m, i int) string {
	return word(elemH(0x0f402000, d, n, m, i), "SMLAL V%d.4S, V%d.4H, V%d.H[%d]", d, n, m, i)
}
func smlal2Elem(d, n, m, i int) string {
	return word(elemH(0x4f402000, d, n, m, i), "SMLAL2 V%d.4S, V%d.8H, V%d.H[%d]", d, n, m, i)
}

// fmls4s: FMLS Vd.4S, Vn.4S, Vm.4S.
func fmls4s(d, n, m int) string {
	return word(rrr(0x4ea0cc00, d, n, m), "FMLS V%d.4S, V%d.4S, V%d.4S", d, n, m)
}
