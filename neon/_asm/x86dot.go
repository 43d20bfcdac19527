package main

// The pieces of the one-row dots (out, w, a, aStride, nb, n) that every
// amd64 set shares: the argument loading, the eight column accumulators
// Y8..Y15, the walk over the n (1..8) columns and the horizontal sums in
// ggml's hsum_float_8 order.

const dotSigX86 = "(out *float32, w, a *byte, aStride, nb, n int)"

// dargs loads the arguments of the one-row dots: DI out, SI w, DX a, R8
// aStride, CX nb, BX n.
func (a *asm) dargs() {
	a.l("MOVQ out+0(FP), DI")
	a.l("MOVQ w+8(FP), SI")
	a.l("MOVQ a+16(FP), DX")
	a.l("MOVQ aStride+24(FP), R8")
	a.l("MOVQ nb+32(FP), CX")
	a.l("MOVQ n+40(FP), BX")
}

// zero8 zeroes the column accumulators Y8..Y15.
func (a *asm) zero8() {
	for i := 8; i < 16; i++ {
		a.l("VXORPS %s, %s, %s", y(i), y(i), y(i))
	}
}

// hsum stores the sum of the 8 lanes of Y(acc) to off(DI), in ggml's
// hsum_float_8 order.
func (a *asm) hsum(acc, off int) {
	a.hsum0(acc)
	a.l("VMOVSS X0, %d(DI)", off)
}

// hsum0 leaves in X0 lane 0 the sum of the 8 lanes of Y(acc), in ggml's
// hsum_float_8 order (X1 clobbered).
func (a *asm) hsum0(acc int) {
	a.l("VEXTRACTF128 $1, Y%d, X0", acc)
	a.l("VADDPS X%d, X0, X0", acc)
	a.l("VMOVHLPS X0, X0, X1")
	a.l("VADDPS X1, X0, X0")
	a.l("VMOVSHDUP X0, X1")
	a.l("VADDSS X1, X0, X0")
}

// eachCol runs col(acc) for acc = 8.. (register Y8.. or X8..) while
// fewer than n columns are done, then jumps to next (R9 the column's
// block, from DX).
func (a *asm) eachCol(col func(acc int), next string) {
	a.l("MOVQ DX, R9")
	for c := 0; c < 8; c++ {
		if c > 0 {
			a.l("CMPQ BX, $%d", c)
			a.l("JEQ %s", next)
		}
		col(8 + c)
	}
}

// storeAll stores the n columns' horizontal sums, then jumps to done.
func (a *asm) storeAll(done string) {
	for c := 0; c < 8; c++ {
		if c > 0 {
			a.l("CMPQ BX, $%d", c)
			a.l("JEQ %s", done)
		}
		a.hsum(8+c, 4*c)
	}
}

// vreg names vector register i of width w (256: Y, 512: Z).
func vreg(w, i int) string {
	if w == 512 {
		return z(i)
	}
	return y(i)
}

// dotLoop emits the body of a one-row dot over nb blocks: the arguments,
// zeroed accumulators, per block unpack() and col(acc) for every column,
// then the stores (labels prefix...; the weight block wsz bytes, the
// activation block asz). With scratch R13 points to a 32-byte aligned
// scratch area in the frame.
func (a *asm) dotLoop(prefix string, wsz, asz int, scratch bool, unpack func(), col func(acc int)) {
	a.dargs()
	a.zero8()
	if scratch {
		a.scratch()
	}
	a.l("TESTQ CX, CX")
	a.l("JZ %sdone", prefix)
	a.label(prefix+"loop", true)
	unpack()
	a.eachCol(col, prefix+"next")
	a.b.WriteString("\n")
	a.label(prefix+"next", false)
	a.l("ADDQ $%d, SI", wsz)
	a.l("ADDQ $%d, DX", asz)
	a.l("DECQ CX")
	a.l("JNZ %sloop", prefix)
	a.b.WriteString("\n")
	a.label(prefix+"done", false)
	a.storeAll(prefix + "ret")
	a.b.WriteString("\n")
	a.label(prefix+"ret", false)
	a.l("VZEROUPPER")
	a.l("RET")
}

// scratch points R13 to the 32-byte aligned scratch area in the frame.
func (a *asm) scratch() {
	a.l("LEAQ 31(SP), R13")
	a.l("ANDQ $-32, R13")
}
