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

// deltaRows is the generic DeltaRows: deltaRow row after row.
func deltaRows(S, R, q, k, v, o []float32, beta, decay float32) {
	rowsOf(deltaRow, S, R, q, k, v, o, beta, decay)
}

// rowsOf runs a set's DeltaRow over the rows of a DeltaRows call.
func rowsOf(row func(S, R, q, k []float32, v, beta, decay float32) float32, S, R, q, k, v, o []float32, beta, decay float32) {
	n := len(q)
	o = o[:len(v)]
	for r := range v {
		o[r] = row(S[r*n:(r+1)*n], R[r*n:(r+1)*n], q, k[:n], v[r], beta, decay)
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

// ssmStep is the generic SSMStep: per row p, dst[p][k] = src[p][k]·dA +
// B[k]·(x[p]·dt), each product rounded before the sum, and, with y, y[p] =
// Σ_k dst[p][k]·C[k] summed in eight lanes k mod 8 (products rounded),
// combined as ((l0+l4)+(l1+l5))+((l2+l6)+(l3+l7)); N = len(B), a multiple
// of 8 (as a Mamba-2 state size is).
func ssmStep(dst, src, x, B, C, y []float32, dt, dA float32) {
	N := len(B)
	if y != nil {
		C, y = C[:N], y[:len(x)]
	}
	for p := range x {
		xdt := float32(x[p] * dt)
		d := dst[p*N : (p+1)*N : (p+1)*N]
		s := src[p*N : (p+1)*N : (p+1)*N]
		if y == nil {
			for k := range d {
				d[k] = float32(s[k]*dA) + float32(B[k]*xdt)
			}
			continue
		}
		var a0, a1, a2, a3, a4, a5, a6, a7 float32
		for k := 0; k+8 <= N; k += 8 {
			s8, b8, c8, d8 := s[k:k+8:k+8], B[k:k+8:k+8], C[k:k+8:k+8], d[k:k+8:k+8]
			v0 := float32(s8[0]*dA) + float32(b8[0]*xdt)
			v1 := float32(s8[1]*dA) + float32(b8[1]*xdt)
			v2 := float32(s8[2]*dA) + float32(b8[2]*xdt)
			v3 := float32(s8[3]*dA) + float32(b8[3]*xdt)
			v4 := float32(s8[4]*dA) + float32(b8[4]*xdt)
			v5 := float32(s8[5]*dA) + float32(b8[5]*xdt)
			v6 := float32(s8[6]*dA) + float32(b8[6]*xdt)
			v7 := float32(s8[7]*dA) + float32(b8[7]*xdt)
			d8[0], d8[1], d8[2], d8[3], d8[4], d8[5], d8[6], d8[7] = v0, v1, v2, v3, v4, v5, v6, v7
			a0 += float32(v0 * c8[0])
			a1 += float32(v1 * c8[1])
			a2 += float32(v2 * c8[2])
			a3 += float32(v3 * c8[3])
			a4 += float32(v4 * c8[4])
			a5 += float32(v5 * c8[5])
			a6 += float32(v6 * c8[6])
			a7 += float32(v7 * c8[7])
		}
		y[p] = ((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7))
	}
}

// ssmRows runs SSMStep with an assembly pair kernel step (two rows at a
// time, with outputs) and decay (every row, no outputs) for rows of a
// multiple of 8 values; an odd last row, and other widths, by the
// generic ssmStep. The amd64 and arm64 sets share it.
func ssmRows(dst, src, x, B, C, y []float32, dt, dA float32,
	step func(dst, src, x, B, C, y *float32, rows, n int, dt, dA float32),
	decay func(dst, src, x, B *float32, rows, n int, dt, dA float32)) {
	N, rows := len(B), len(x)
	if N == 0 || N%8 != 0 || rows == 0 {
		ssmStep(dst, src, x, B, C, y, dt, dA)
		return
	}
	dst, src = dst[:rows*N], src[:rows*N]
	if y == nil {
		decay(&dst[0], &src[0], &x[0], &B[0], rows, N, dt, dA)
		return
	}
	C, y = C[:N], y[:rows]
	if even := rows &^ 1; even > 0 {
		step(&dst[0], &src[0], &x[0], &B[0], &C[0], &y[0], even, N, dt, dA)
	}
	if rows%2 == 1 {
		p := rows - 1
		ssmStep(dst[p*N:], src[p*N:], x[p:], B, C, y[p:], dt, dA)
	}
}
