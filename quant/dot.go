package quant

import "github.com/geisten/geist/neon"

// The dot-product kernels live in package neon (the generic Go reference
// and the NEON, dot-product and AVX2 assembly); the kernel table here picks
// the one for each weight type from the active neon set at every call, so
// that neon.Use switches every product.

// pickFunc selects a weight type's kernel from a neon kernel set.
type pickFunc func(k *neon.Kernels) neon.DotFunc

// dotFunc is the dot product of one weight row with one activation row.
type dotFunc func(w, a []byte, nb int) float32

// oneColumn adapts a neon kernel to a single activation row (the active
// set's kernel with n == 1).
func oneColumn(pick pickFunc) dotFunc {
	return func(w, a []byte, nb int) float32 {
		var out [1]float32
		pick(neon.Active())(out[:], w, a, 0, nb, 1)
		return out[0]
	}
}
