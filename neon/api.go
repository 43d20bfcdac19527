// Package neon holds geist's compute kernels: the dot products of quantized
// weight rows with quantized activation rows, float dot products, activation
// quantization and the per-token vector work, in several implementations
// chosen at run time: pure Go ("generic", always compiled, the reference),
// arm64 NEON ("neon", ARMv8.0, Cortex-A72), arm64 NEON with the dot-product
// extension ("neon-dotprod", ARMv8.2, Cortex-A76/A78AE) and amd64 AVX2+FMA
// ("avx2"). Building with the purego tag compiles no assembly.
//
// Every implementation is deterministic, and each output of a multi-column
// kernel is bit-identical to the same kernel run on that column alone
// (batch invariance). Implementations may differ from each other in float
// rounding within the tolerances the tests name.
package neon

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// DotFunc is the shape of the weight-row kernels: the dot products of ONE
// weight row w (nb blocks, or nb elements for the float types) with n
// activation rows a[j*aStride:] (strides in bytes), written to out[j] for
// j < n. n >= 1.
type DotFunc = func(out []float32, w, a []byte, aStride, nb, n int)

// Kernels is one implementation of every kernel.
type Kernels struct {
	Name string // "generic", "neon", "neon-dotprod", "avx2"

	// Dot products of ONE weight row w (nb blocks in ggml layout: Q4_0 18 B,
	// Q5_0 22 B, Q8_0 34 B per 32 values; Q4_K 144 B, Q6_K 210 B per 256
	// values) with n activation rows a[j*aStride:] (nb blocks of Q8_0 (34 B)
	// or Q8_K (292 B: f32 d, 256 int8, 16 int16 bsums)), out[j] for j < n
	// (n >= 1, typically 1..8). Each out[j] is bit-identical to the result
	// of the same kernel with n == 1 on that column.
	DotQ4_0Q8_0, DotQ5_0Q8_0, DotQ8_0Q8_0, DotQ4_KQ8_K, DotQ6_KQ8_K func(out []float32, w, a []byte, aStride, nb, n int)
	// The same for the less common types (Q4_1/Q5_1 with Q8_1 activations).
	DotQ4_1Q8_1, DotQ5_1Q8_1, DotQ2_KQ8_K, DotQ3_KQ8_K, DotQ5_KQ8_K, DotQ8_KQ8_K func(out []float32, w, a []byte, aStride, nb, n int)

	// Float dots: a weight row of nelem F32/F16/BF16 values with n
	// activation rows of the same type (aStride in bytes).
	DotF32, DotF16, DotBF16 func(out []float32, w, a []byte, aStride, nelem, n int)

	// Activation quantization of one row x (len(x) a multiple of 32 / 256)
	// into Q8_0 / Q8_K blocks in dst (ggml reference semantics).
	QuantizeQ8_0, QuantizeQ8_K func(dst []byte, x []float32)

	// Per-token vector work.
	RMSNormScale func(x []float32) float64                      // sum of squares of x
	DotF32F16    func(a []float32, b []uint16) float32          // attention: query · F16 key
	AxpyF16      func(out []float32, alpha float32, b []uint16) // out += alpha * F16 b
}

// The registry: filled by init functions (register), read-only afterwards.
var (
	sets     []*Kernels // every set this CPU can run, in registration order
	compiled []string   // the names of every registered set, runnable or not
	current  atomic.Pointer[Kernels]
)

// register adds k to the available sets when ok (the CPU feature check).
// Nil fields are filled from the generic set. Only init functions call it.
func register(k *Kernels, ok bool) {
	compiled = append(compiled, k.Name)
	if !ok {
		return
	}
	fill(k, generic)
	sets = append(sets, k)
}

// fill sets every nil kernel of k from g.
func fill(k, g *Kernels) {
	fillF := func(f *DotFunc, gf DotFunc) {
		if *f == nil {
			*f = gf
		}
	}
	fillF(&k.DotQ4_0Q8_0, g.DotQ4_0Q8_0)
	fillF(&k.DotQ5_0Q8_0, g.DotQ5_0Q8_0)
	fillF(&k.DotQ8_0Q8_0, g.DotQ8_0Q8_0)
	fillF(&k.DotQ4_KQ8_K, g.DotQ4_KQ8_K)
	fillF(&k.DotQ6_KQ8_K, g.DotQ6_KQ8_K)
	fillF(&k.DotQ4_1Q8_1, g.DotQ4_1Q8_1)
	fillF(&k.DotQ5_1Q8_1, g.DotQ5_1Q8_1)
	fillF(&k.DotQ2_KQ8_K, g.DotQ2_KQ8_K)
	fillF(&k.DotQ3_KQ8_K, g.DotQ3_KQ8_K)
	fillF(&k.DotQ5_KQ8_K, g.DotQ5_KQ8_K)
	fillF(&k.DotQ8_KQ8_K, g.DotQ8_KQ8_K)
	fillF(&k.DotF32, g.DotF32)
	fillF(&k.DotF16, g.DotF16)
	fillF(&k.DotBF16, g.DotBF16)
	if k.QuantizeQ8_0 == nil {
		k.QuantizeQ8_0 = g.QuantizeQ8_0
	}
	if k.QuantizeQ8_K == nil {
		k.QuantizeQ8_K = g.QuantizeQ8_K
	}
	if k.RMSNormScale == nil {
		k.RMSNormScale = g.RMSNormScale
	}
	if k.DotF32F16 == nil {
		k.DotF32F16 = g.DotF32F16
	}
	if k.AxpyF16 == nil {
		k.AxpyF16 = g.AxpyF16
	}
}

// compiledIn reports whether a set called name is compiled into this binary
// (whether or not this CPU can run it).
func compiledIn(name string) bool {
	if name == generic.Name {
		return true
	}
	for _, n := range compiled {
		if n == name {
			return true
		}
	}
	return false
}

// Generic returns the pure-Go reference set, always available.
func Generic() *Kernels { return generic }

// Available returns every set this CPU can run, best first, generic last.
func Available() []*Kernels {
	out := make([]*Kernels, 0, len(sets)+1)
	for i := len(sets) - 1; i >= 0; i-- {
		out = append(out, sets[i])
	}
	return append(out, generic)
}

// byName returns the available set called name.
func byName(name string) *Kernels {
	for _, k := range Available() {
		if k.Name == name {
			return k
		}
	}
	return nil
}

// EnvVar names the environment variable that selects a kernel set by name
// ("generic", "neon", ...) instead of the best available one.
const EnvVar = "GEIST_KERNELS"

// chosen is the set picked at start: the best available one, or the one
// EnvVar names when this CPU can run it.
var chosen = sync.OnceValue(func() *Kernels {
	if name := os.Getenv(EnvVar); name != "" {
		if k := byName(name); k != nil {
			return k
		}
	}
	return Available()[0]
})

// Active returns the kernel set in use: the best available one unless the
// GEIST_KERNELS environment variable names another this CPU can run (or the
// generic one when built with the purego tag), or the one Use selected.
func Active() *Kernels {
	if k := current.Load(); k != nil {
		return k
	}
	return chosen()
}

// Use switches the active set to the available set called name and returns
// a function restoring the previous one. It is meant for tests and
// benchmarks; do not call it while kernels run on other goroutines.
func Use(name string) (restore func(), err error) {
	k := byName(name)
	if k == nil {
		return nil, fmt.Errorf("neon: kernel set %q is not available on this CPU (have %v)", name, names())
	}
	prev := current.Swap(k)
	return func() { current.Store(prev) }, nil
}

func names() []string {
	var s []string
	for _, k := range Available() {
		s = append(s, k.Name)
	}
	return s
}

// The exported wrappers call the active set.

// DotQ4_0Q8_0 calls Active().DotQ4_0Q8_0.
func DotQ4_0Q8_0(out []float32, w, a []byte, aStride, nb, n int) {
	Active().DotQ4_0Q8_0(out, w, a, aStride, nb, n)
}

// DotQ5_0Q8_0 calls Active().DotQ5_0Q8_0.
func DotQ5_0Q8_0(out []float32, w, a []byte, aStride, nb, n int) {
	Active().DotQ5_0Q8_0(out, w, a, aStride, nb, n)
}

// DotQ8_0Q8_0 calls Active().DotQ8_0Q8_0.
func DotQ8_0Q8_0(out []float32, w, a []byte, aStride, nb, n int) {
	Active().DotQ8_0Q8_0(out, w, a, aStride, nb, n)
}

// DotQ4_KQ8_K calls Active().DotQ4_KQ8_K.
func DotQ4_KQ8_K(out []float32, w, a []byte, aStride, nb, n int) {
	Active().DotQ4_KQ8_K(out, w, a, aStride, nb, n)
}

// DotQ6_KQ8_K calls Active().DotQ6_KQ8_K.
func DotQ6_KQ8_K(out []float32, w, a []byte, aStride, nb, n int) {
	Active().DotQ6_KQ8_K(out, w, a, aStride, nb, n)
}

// DotQ4_1Q8_1 calls Active().DotQ4_1Q8_1.
func DotQ4_1Q8_1(out []float32, w, a []byte, aStride, nb, n int) {
	Active().DotQ4_1Q8_1(out, w, a, aStride, nb, n)
}

// DotQ5_1Q8_1 calls Active().DotQ5_1Q8_1.
func DotQ5_1Q8_1(out []float32, w, a []byte, aStride, nb, n int) {
	Active().DotQ5_1Q8_1(out, w, a, aStride, nb, n)
}

// DotQ2_KQ8_K calls Active().DotQ2_KQ8_K.
func DotQ2_KQ8_K(out []float32, w, a []byte, aStride, nb, n int) {
	Active().DotQ2_KQ8_K(out, w, a, aStride, nb, n)
}

// DotQ3_KQ8_K calls Active().DotQ3_KQ8_K.
func DotQ3_KQ8_K(out []float32, w, a []byte, aStride, nb, n int) {
	Active().DotQ3_KQ8_K(out, w, a, aStride, nb, n)
}

// DotQ5_KQ8_K calls Active().DotQ5_KQ8_K.
func DotQ5_KQ8_K(out []float32, w, a []byte, aStride, nb, n int) {
	Active().DotQ5_KQ8_K(out, w, a, aStride, nb, n)
}

// DotQ8_KQ8_K calls Active().DotQ8_KQ8_K.
func DotQ8_KQ8_K(out []float32, w, a []byte, aStride, nb, n int) {
	Active().DotQ8_KQ8_K(out, w, a, aStride, nb, n)
}

// DotF32 calls Active().DotF32.
func DotF32(out []float32, w, a []byte, aStride, nelem, n int) {
	Active().DotF32(out, w, a, aStride, nelem, n)
}

// DotF16 calls Active().DotF16.
func DotF16(out []float32, w, a []byte, aStride, nelem, n int) {
	Active().DotF16(out, w, a, aStride, nelem, n)
}

// DotBF16 calls Active().DotBF16.
func DotBF16(out []float32, w, a []byte, aStride, nelem, n int) {
	Active().DotBF16(out, w, a, aStride, nelem, n)
}

// QuantizeQ8_0 calls Active().QuantizeQ8_0.
func QuantizeQ8_0(dst []byte, x []float32) { Active().QuantizeQ8_0(dst, x) }

// QuantizeQ8_K calls Active().QuantizeQ8_K.
func QuantizeQ8_K(dst []byte, x []float32) { Active().QuantizeQ8_K(dst, x) }

// RMSNormScale calls Active().RMSNormScale.
func RMSNormScale(x []float32) float64 { return Active().RMSNormScale(x) }

// DotF32F16 calls Active().DotF32F16.
func DotF32F16(a []float32, b []uint16) float32 { return Active().DotF32F16(a, b) }

// AxpyF16 calls Active().AxpyF16.
func AxpyF16(out []float32, alpha float32, b []uint16) { Active().AxpyF16(out, alpha, b) }
