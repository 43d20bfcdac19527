package neon

import "github.com/geisten/geist/neon/ggml"

// The element-wise steps of a forward pass, in Go for every set (the
// reference) and in vector code where a set has it; all give the same
// bits (each result is one rounded operation, or ggml's conversion).

// add sets dst[i] += src[i].
func add(dst, src []float32) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] += v
	}
}

// scaleMul sets out[i] = (x[i]*scale)*w[i] (RMSNorm's second step).
func scaleMul(out, x, w []float32, scale float32) {
	x, w = x[:len(out)], w[:len(out)]
	for i, v := range x {
		out[i] = float32(v*scale) * w[i]
	}
}

// toF16 converts src to half-precision bits in dst (ggml.FP32ToFP16).
func toF16(dst []uint16, src []float32) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = ggml.FP32ToFP16(v)
	}
}
