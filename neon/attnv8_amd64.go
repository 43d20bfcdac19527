//go:build amd64 && !purego

package neon

// The integer value sum's kernels of attnv8_amd64.s.

//go:noescape
func transposeV8AVX2(vt *byte, dv *float32, v *byte, vStride, nq, nbv int, tab *float32)

//go:noescape
func sumV8AVX2(out, w *float32, vt *byte, dv *float32, g0, ng, nbv int)

//go:noescape
func sumV8VNNI(out, w *float32, vt *byte, dv *float32, g0, ng, nbv int)

var transposeV8avx2, sumV8avx2, sumV8vnni = transposeV8Asm(transposeV8AVX2), sumV8Asm(sumV8AVX2), sumV8Asm(sumV8VNNI)
