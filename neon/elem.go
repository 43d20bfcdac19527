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

// deltaRow is the generic DeltaRow: the decayed row's dot with k and the
// updated row's dot with q each sum four interleaved partial sums,
// combined (0+1)+(2+3); every product is rounded before its addition.
func deltaRow(S, R, q, k []float32, v, beta, decay float32) float32 {
	n := len(S)
	R, q, k = R[:n], q[:n], k[:n]
	var a0, a1, a2, a3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		t0, t1, t2, t3 := float32(R[i]*decay), float32(R[i+1]*decay), float32(R[i+2]*decay), float32(R[i+3]*decay)
		S[i], S[i+1], S[i+2], S[i+3] = t0, t1, t2, t3
		a0 += float32(t0 * k[i])
		a1 += float32(t1 * k[i+1])
		a2 += float32(t2 * k[i+2])
		a3 += float32(t3 * k[i+3])
	}
	for ; i < n; i++ {
		t := float32(R[i] * decay)
		S[i] = t
		a0 += float32(t * k[i])
	}
	delta := (v - ((a0 + a1) + (a2 + a3))) * beta
	a0, a1, a2, a3 = 0, 0, 0, 0
	i = 0
	for ; i+4 <= n; i += 4 {
		t0 := S[i] + float32(k[i]*delta)
		t1 := S[i+1] + float32(k[i+1]*delta)
		t2 := S[i+2] + float32(k[i+2]*delta)
		t3 := S[i+3] + float32(k[i+3]*delta)
		S[i], S[i+1], S[i+2], S[i+3] = t0, t1, t2, t3
		a0 += float32(t0 * q[i])
		a1 += float32(t1 * q[i+1])
		a2 += float32(t2 * q[i+2])
		a3 += float32(t3 * q[i+3])
	}
	for ; i < n; i++ {
		t := S[i] + float32(k[i]*delta)
		S[i] = t
		a0 += float32(t * q[i])
	}
	return (a0 + a1) + (a2 + a3)
}
