package quant

import (
	"math"

	"github.com/geisten/geist/neon/ggml"
)

// Reference k-quant quantizers, a transcription of ggml's
// quantize_row_q{4,5,6}_K_ref with every float operation in ggml's order and
// rounding (products that feed a sum are wrapped in float32() so Go cannot
// fuse them into FMAs).

const groupMaxEps = 1e-15

func sqrt32(x float32) float32 { return float32(math.Sqrt(float64(x))) }

// makeQKX2Quants is ggml's make_qkx2_quants: an asymmetric (scale, min) fit
// of x to levels 0..nmax, searched over nstep+1 candidate scales. It fills L
// and returns the scale and the (positive) min.
func makeQKX2Quants(nmax int32, x, weights []float32, L, Laux []uint8, rmin, rdelta float32, nstep int, useMAD bool) (scale, theMin float32) {
	n := len(x)
	min, max := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < min {
			min = x[i]
		}
		if x[i] > max {
			max = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if min > 0 {
		min = 0
	}
	if max == min {
		for i := range L[:n] {
			L[i] = 0
		}
		return 0, -min
	}
	fnmax := float32(nmax)
	iscale := fnmax / (max - min)
	scale = 1 / iscale
	var bestErr float32
	for i := 0; i < n; i++ {
		l := ggml.NearestInt(float32(iscale * float32(x[i]-min)))
		L[i] = uint8(maxI32(0, minI32(nmax, l)))
		diff := float32(float32(scale*float32(L[i]))+min) - x[i]
		if useMAD {
			diff = abs32(diff)
		} else {
			diff = float32(diff * diff)
		}
		bestErr += float32(weights[i] * diff)
	}
	if nstep < 1 {
		return scale, -min
	}
	for is := 0; is <= nstep; is++ {
		iscale = (float32(rmin+float32(rdelta*float32(is))) + fnmax) / (max - min)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := ggml.NearestInt(float32(iscale * float32(x[i]-min)))
			l = maxI32(0, minI32(nmax, l))
			Laux[i] = uint8(l)
			w := weights[i]
			fl := float32(l)
			wl := float32(w * fl)
			sumL += wl
			sumL2 += float32(wl * fl)
			sumXL += float32(wl * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curErr float32
			for i := 0; i < n; i++ {
				diff := float32(float32(thisScale*float32(Laux[i]))+thisMin) - x[i]
				if useMAD {
					diff = abs32(diff)
				} else {
					diff = float32(diff * diff)
				}
				curErr += float32(weights[i] * diff)
			}
			if curErr < bestErr {
				copy(L[:n], Laux[:n])
				bestErr = curErr
				scale = thisScale
				min = thisMin
			}
		}
	}
	return scale, -min
}

// makeQXQuants is ggml's make_qx_quants with rmse_type 1 and no importance
// weights (w = x*x), the variant quantize_row_q6_K_ref uses: a symmetric
// fit to levels -nmax..nmax-1, stored in L as l+nmax.
func makeQXQuants(nmax int32, x []float32, L []int8) float32 {
	n := len(x)
	var max, amax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, max = a, v
		}
	}
	if amax < groupMaxEps {
		for i := range L[:n] {
			L[i] = 0
		}
		return 0
	}
	fnmax := float32(nmax)
	iscale := -fnmax / max
	var sumlx, suml2 float32
	for i := 0; i < n; i++ {
		l := ggml.NearestInt(float32(iscale * x[i]))
		l = maxI32(-nmax, minI32(nmax-1, l))
		L[i] = int8(l + nmax)
		w := float32(x[i] * x[i])
		fl := float32(l)
		sumlx += float32(float32(w*x[i]) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := scale * sumlx
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(fnmax + float32(0.1*float32(is))) / max
		sumlx, suml2 = 0, 0
		for i := 0; i < n; i++ {
			l := ggml.NearestInt(float32(iscale * x[i]))
			l = maxI32(-nmax, minI32(nmax-1, l))
			w := float32(x[i] * x[i])
			fl := float32(l)
			sumlx += float32(float32(w*x[i]) * fl)
			suml2 += float32(float32(w*fl) * fl)
		}
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			for i := 0; i < n; i++ {
				l := ggml.NearestInt(float32(iscale * x[i]))
				L[i] = int8(nmax + maxI32(-nmax, minI32(nmax-1, l)))
			}
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

// quantKSuperBlock runs the shared first half of the Q4_K/Q5_K reference
// quantizers on one super-block: per sub-block fits, then 6-bit scales and
// mins packed into y[4:16], d and dmin into y[0:4]; L receives the levels.
func quantKSuperBlock(x []float32, nmax int32, rmin, rdelta float32, nstep int, L []uint8, y []byte) {
	var (
		weights [32]float32
		laux    [32]uint8
		scales  [QK_K / 32]float32
		mins    [QK_K / 32]float32
	)
	var maxScale, maxMin float32
	for j := 0; j < QK_K/32; j++ {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := sqrt32(sumX2 / 32)
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(nmax, xs, weights[:], L[32*j:32*j+32], laux[:], rmin, rdelta, nstep, false)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	sc := y[4:16]
	for j := 0; j < QK_K/32; j++ {
		ls := uint8(ggml.NearestInt(float32(invScale * scales[j])))
		lm := uint8(ggml.NearestInt(float32(invMin * mins[j])))
		ls = min(63, ls)
		lm = min(63, lm)
		if j < 4 {
			sc[j] = ls
			sc[j+4] = lm
		} else {
			sc[j+4] = ls&0xf | (lm&0xf)<<4
			sc[j-4] |= (ls >> 4) << 6
			sc[j] |= (lm >> 4) << 6
		}
	}
	putF16(y, 0, maxScale/63)
	putF16(y, 2, maxMin/63)

	// Requantize with the scales as stored.
	dAll, mAll := ggml.F16At(y, 0), ggml.F16At(y, 2)
	for j := 0; j < QK_K/32; j++ {
		s, m := ggml.ScaleMinK4(j, sc)
		d := dAll * float32(s)
		if d == 0 {
			continue
		}
		dm := float32(mAll * float32(m))
		for ii := 0; ii < 32; ii++ {
			l := ggml.NearestInt((x[32*j+ii] + dm) / d)
			L[32*j+ii] = uint8(maxI32(0, minI32(nmax, l)))
		}
	}
}

func quantQ4_K(src []float32, dst []byte, nb int) {
	var L [QK_K]uint8
	for i := 0; i < nb; i++ {
		x := src[i*QK_K : (i+1)*QK_K]
		y := dst[i*ggml.SizeQ4_K : (i+1)*ggml.SizeQ4_K]
		quantKSuperBlock(x, 15, -1, 0.1, 20, L[:], y)
		q := y[16:144]
		for j := 0; j < QK_K; j += 64 {
			for l := 0; l < 32; l++ {
				q[l] = L[j+l] | L[j+l+32]<<4
			}
			q = q[32:]
		}
	}
}

func quantQ5_K(src []float32, dst []byte, nb int) {
	var L [QK_K]uint8
	for i := 0; i < nb; i++ {
		x := src[i*QK_K : (i+1)*QK_K]
		y := dst[i*ggml.SizeQ5_K : (i+1)*ggml.SizeQ5_K]
		quantKSuperBlock(x, 31, -0.5, 0.1, 15, L[:], y)
		qh := y[16:48]
		ql := y[48:176]
		clear(qh)
		m1, m2 := byte(1), byte(2)
		for n := 0; n < QK_K; n += 64 {
			for j := 0; j < 32; j++ {
				l1 := L[n+j]
				if l1 > 15 {
					l1 -= 16
					qh[j] |= m1
				}
				l2 := L[n+j+32]
				if l2 > 15 {
					l2 -= 16
					qh[j] |= m2
				}
				ql[j] = l1 | l2<<4
			}
			m1 <<= 2
			m2 <<= 2
			ql = ql[32:]
		}
	}
}

func quantQ6_K(src []float32, dst []byte, nb int) {
	var (
		L      [QK_K]int8
		scales [QK_K / 16]float32
	)
	for i := 0; i < nb; i++ {
		x := src[i*QK_K : (i+1)*QK_K]
		y := dst[i*ggml.SizeQ6_K : (i+1)*ggml.SizeQ6_K]
		var maxScale, maxAbsScale float32
		for ib := 0; ib < QK_K/16; ib++ {
			s := makeQXQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
			scales[ib] = s
			if a := abs32(s); a > maxAbsScale {
				maxAbsScale, maxScale = a, s
			}
		}
		if maxAbsScale < groupMaxEps {
			clear(y)
			continue
		}
		iscale := -128 / maxScale
		putF16(y, 208, 1/iscale)
		sc := y[192:208]
		for ib := 0; ib < QK_K/16; ib++ {
			sc[ib] = byte(int8(minI32(127, ggml.NearestInt(float32(iscale*scales[ib])))))
		}
		dAll := ggml.F16At(y, 208)
		for j := 0; j < QK_K/16; j++ {
			d := dAll * float32(int8(sc[j]))
			if d == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				l := ggml.NearestInt(x[16*j+ii] / d)
				L[16*j+ii] = int8(maxI32(-32, minI32(31, l)) + 32)
			}
		}
		ql := y[0:128]
		qh := y[128:192]
		for j := 0; j < QK_K; j += 128 {
			for l := 0; l < 32; l++ {
				q1 := uint8(L[j+l]) & 0xf
				q2 := uint8(L[j+l+32]) & 0xf
				q3 := uint8(L[j+l+64]) & 0xf
				q4 := uint8(L[j+l+96]) & 0xf
				ql[l] = q1 | q3<<4
				ql[l+32] = q2 | q4<<4
				qh[l] = uint8(L[j+l])>>4 | (uint8(L[j+l+32])>>4)<<2 | (uint8(L[j+l+64])>>4)<<4 | (uint8(L[j+l+96])>>4)<<6
			}
			ql = ql[64:]
			qh = qh[32:]
		}
	}
}

// makeQ3Quants is ggml's make_q3_quants with do_rmse: a symmetric fit to
// levels -nmax..nmax-1 refined element by element, stored in L as l+nmax.
func makeQ3Quants(nmax int32, x []float32, L []int8) float32 {
	n := len(x)
	var max, amax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, max = a, v
		}
	}
	if amax < groupMaxEps {
		for i := range L[:n] {
			L[i] = 0
		}
		return 0
	}
	iscale := -float32(nmax) / max
	var sumlx, suml2 float32
	for i := 0; i < n; i++ {
		l := maxI32(-nmax, minI32(nmax-1, ggml.NearestInt(float32(iscale*x[i]))))
		L[i] = int8(l)
		w := float32(x[i] * x[i])
		sumlx += float32(float32(w*x[i]) * float32(l))
		suml2 += float32(float32(w*float32(l)) * float32(l))
	}
	for itry := 0; itry < 5; itry++ {
		changed := 0
		for i := 0; i < n; i++ {
			w := float32(x[i] * x[i])
			li := float32(L[i])
			slx := sumlx - float32(float32(w*x[i])*li)
			if slx > 0 {
				sl2 := suml2 - float32(float32(w*li)*li)
				newL := maxI32(-nmax, minI32(nmax-1, ggml.NearestInt(float32(x[i]*sl2)/slx)))
				if newL != int32(L[i]) {
					fl := float32(newL)
					slx += float32(float32(w*x[i]) * fl)
					sl2 += float32(float32(w*fl) * fl)
					if sl2 > 0 && slx*slx*suml2 > sumlx*sumlx*sl2 {
						L[i] = int8(newL)
						sumlx, suml2 = slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range L[:n] {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// packQ2 packs 256 2-bit levels the way Q2_K and Q3_K store them.
func packQ2(qs []byte, L []uint8) {
	for j := 0; j < QK_K; j += 128 {
		for l := 0; l < 32; l++ {
			qs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
		}
	}
}

// quantQ2_K is ggml's quantize_row_q2_K_ref.
func quantQ2_K(src []float32, dst []byte, nb int) {
	var (
		L       [QK_K]uint8
		laux    [16]uint8
		weights [16]float32
		scales  [QK_K / 16]float32
		mins    [QK_K / 16]float32
	)
	const q4scale = 15
	for i := 0; i < nb; i++ {
		x := src[i*QK_K : (i+1)*QK_K]
		y := dst[i*ggml.SizeQ2_K : (i+1)*ggml.SizeQ2_K]
		var maxScale, maxMin float32
		for j := 0; j < QK_K/16; j++ {
			xs := x[16*j : 16*j+16]
			for l, v := range xs {
				weights[l] = abs32(v)
			}
			scales[j], mins[j] = makeQKX2Quants(3, xs, weights[:], L[16*j:16*j+16], laux[:], -0.5, 0.1, 15, true)
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}
		sc := y[0:16]
		if maxScale > 0 {
			iscale := q4scale / maxScale
			for j := range sc {
				sc[j] = uint8(ggml.NearestInt(float32(iscale * scales[j])))
			}
			putF16(y, 80, maxScale/q4scale)
		} else {
			clear(sc)
			putF16(y, 80, 0)
		}
		if maxMin > 0 {
			iscale := q4scale / maxMin
			for j := range sc {
				sc[j] |= uint8(ggml.NearestInt(float32(iscale*mins[j])) << 4)
			}
			putF16(y, 82, maxMin/q4scale)
		} else {
			putF16(y, 82, 0)
		}
		dAll, mAll := ggml.F16At(y, 80), ggml.F16At(y, 82)
		for j := 0; j < QK_K/16; j++ {
			d := dAll * float32(sc[j]&0xf)
			if d == 0 {
				continue
			}
			dm := float32(mAll * float32(sc[j]>>4))
			for ii := 0; ii < 16; ii++ {
				l := ggml.NearestInt((x[16*j+ii] + dm) / d)
				L[16*j+ii] = uint8(maxI32(0, minI32(3, l)))
			}
		}
		packQ2(y[16:80], L[:])
	}
}

// quantQ3_K is ggml's quantize_row_q3_K_ref.
func quantQ3_K(src []float32, dst []byte, nb int) {
	var (
		L      [QK_K]int8
		U      [QK_K]uint8
		scales [QK_K / 16]float32
	)
	for i := 0; i < nb; i++ {
		x := src[i*QK_K : (i+1)*QK_K]
		y := dst[i*ggml.SizeQ3_K : (i+1)*ggml.SizeQ3_K]
		var maxScale, amax float32
		for j := 0; j < QK_K/16; j++ {
			scales[j] = makeQ3Quants(4, x[16*j:16*j+16], L[16*j:16*j+16])
			if s := abs32(scales[j]); s > amax {
				amax, maxScale = s, scales[j]
			}
		}
		sc := y[96:108]
		clear(sc)
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := 0; j < QK_K/16; j++ {
				l := int32(int8(ggml.NearestInt(float32(iscale * scales[j]))))
				l = maxI32(-32, minI32(31, l)) + 32
				if j < 8 {
					sc[j] = byte(l & 0xf)
				} else {
					sc[j-8] |= byte(l&0xf) << 4
				}
				l >>= 4
				sc[j%4+8] |= byte(l << (2 * uint(j/4)))
			}
			putF16(y, 108, 1/iscale)
		} else {
			putF16(y, 108, 0)
		}
		dAll := ggml.F16At(y, 108)
		for j := 0; j < QK_K/16; j++ {
			var s int8
			if j < 8 {
				s = int8(sc[j] & 0xf)
			} else {
				s = int8(sc[j-8] >> 4)
			}
			s = int8(byte(s)|((sc[8+j%4]>>(2*uint(j/4)))&3)<<4) - 32
			d := dAll * float32(s)
			if d == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				l := ggml.NearestInt(x[16*j+ii] / d)
				L[16*j+ii] = int8(maxI32(-4, minI32(3, l)) + 4)
			}
		}
		hmask := y[0:32]
		clear(hmask)
		m, hm := 0, byte(1)
		for j := 0; j < QK_K; j++ {
			U[j] = uint8(L[j])
			if L[j] > 3 {
				hmask[m] |= hm
				U[j] -= 4
			}
			if m++; m == QK_K/8 {
				m, hm = 0, hm<<1
			}
		}
		packQ2(y[32:96], U[:])
	}
}
