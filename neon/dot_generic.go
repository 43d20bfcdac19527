package neon

import (
	"encoding/binary"
	"math"

	"github.com/geisten/geist/neon/ggml"
)

// The dot products of one weight row w (nb blocks, or nb elements for the
// plain float types) with one activation row a of the matching activation
// type. They follow ggml's generic CPU code (ggml-cpu/quants.c
// ggml_vec_dot_*_generic): exact integer sums inside a block, then float32
// arithmetic across blocks in ggml's order, so each is a deterministic
// function of its inputs. Fast kernels replacing one of these must keep a
// fixed order per output element that does not depend on the batch.
//
// F32, F16 and BF16 follow ggml's scalar ggml_vec_dot_{f32,f16,bf16}: each
// product rounded to float32, the sum accumulated sequentially in float64
// and converted to float32 at the end.

func dotF32(w, a []byte, n int) float32 {
	w, a = w[:4*n], a[:4*n]
	var sum float64
	for i := 0; i < n; i++ {
		x := math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:]))
		y := math.Float32frombits(binary.LittleEndian.Uint32(a[4*i:]))
		sum += float64(x * y)
	}
	return float32(sum)
}

func dotF16(w, a []byte, n int) float32 {
	w, a = w[:2*n], a[:2*n]
	var sum float64
	for i := 0; i < n; i++ {
		x := h2f(binary.LittleEndian.Uint16(w[2*i:]))
		y := h2f(binary.LittleEndian.Uint16(a[2*i:]))
		sum += float64(x * y)
	}
	return float32(sum)
}

func dotBF16(w, a []byte, n int) float32 {
	w, a = w[:2*n], a[:2*n]
	var sum float64
	for i := 0; i < n; i++ {
		x := ggml.BF16ToFP32(binary.LittleEndian.Uint16(w[2*i:]))
		y := ggml.BF16ToFP32(binary.LittleEndian.Uint16(a[2*i:]))
		sum += float64(x * y)
	}
	return float32(sum)
}

func dotQ4_0Q8_0(w, a []byte, nb int) float32 {
	var sumf float32
	for ib := 0; ib < nb; ib++ {
		x := w[ib*sizeQ4_0 : (ib+1)*sizeQ4_0]
		y := a[ib*sizeQ8_0 : (ib+1)*sizeQ8_0]
		qs, q8 := x[2:18], y[2:34]
		var sumi0, sumi1 int32
		for j := 0; j < 16; j++ {
			sumi0 += (int32(qs[j]&0x0f) - 8) * int32(int8(q8[j]))
			sumi1 += (int32(qs[j]>>4) - 8) * int32(int8(q8[j+16]))
		}
		sumf += float32(float32(sumi0+sumi1) * f16at(x, 0) * f16at(y, 0))
	}
	return sumf
}

func dotQ4_1Q8_1(w, a []byte, nb int) float32 {
	var sumf float32
	for ib := 0; ib < nb; ib++ {
		x := w[ib*sizeQ4_1 : (ib+1)*sizeQ4_1]
		y := a[ib*sizeQ8_1 : (ib+1)*sizeQ8_1]
		qs, q8 := x[4:20], y[4:36]
		var sumi0, sumi1 int32
		for j := 0; j < 16; j++ {
			sumi0 += int32(qs[j]&0x0f) * int32(int8(q8[j]))
			sumi1 += int32(qs[j]>>4) * int32(int8(q8[j+16]))
		}
		dd := f16at(x, 0) * f16at(y, 0)
		ms := float32(f16at(x, 2) * f16at(y, 2))
		sumf += float32(float32(dd*float32(sumi0+sumi1)) + ms)
	}
	return sumf
}

func dotQ5_0Q8_0(w, a []byte, nb int) float32 {
	var sumf float32
	for ib := 0; ib < nb; ib++ {
		x := w[ib*sizeQ5_0 : (ib+1)*sizeQ5_0]
		y := a[ib*sizeQ8_0 : (ib+1)*sizeQ8_0]
		qh := binary.LittleEndian.Uint32(x[2:])
		qs, q8 := x[6:22], y[2:34]
		var sumi0, sumi1 int32
		for j := 0; j < 16; j++ {
			xh0 := int32(qh>>uint(j)&1) << 4
			xh1 := int32(qh>>uint(j+16)&1) << 4
			sumi0 += ((int32(qs[j]&0x0f) | xh0) - 16) * int32(int8(q8[j]))
			sumi1 += ((int32(qs[j]>>4) | xh1) - 16) * int32(int8(q8[j+16]))
		}
		sumf += float32(f16at(x, 0) * f16at(y, 0) * float32(sumi0+sumi1))
	}
	return sumf
}

func dotQ5_1Q8_1(w, a []byte, nb int) float32 {
	var sumf float32
	for ib := 0; ib < nb; ib++ {
		x := w[ib*sizeQ5_1 : (ib+1)*sizeQ5_1]
		y := a[ib*sizeQ8_1 : (ib+1)*sizeQ8_1]
		qh := binary.LittleEndian.Uint32(x[4:])
		qs, q8 := x[8:24], y[4:36]
		var sumi0, sumi1 int32
		for j := 0; j < 16; j++ {
			xh0 := int32(qh>>uint(j)&1) << 4
			xh1 := int32(qh>>uint(j+16)&1) << 4
			sumi0 += (int32(qs[j]&0x0f) | xh0) * int32(int8(q8[j]))
			sumi1 += (int32(qs[j]>>4) | xh1) * int32(int8(q8[j+16]))
		}
		dd := f16at(x, 0) * f16at(y, 0)
		ms := float32(f16at(x, 2) * f16at(y, 2))
		sumf += float32(float32(dd*float32(sumi0+sumi1)) + ms)
	}
	return sumf
}

func dotQ8_0Q8_0(w, a []byte, nb int) float32 {
	var sumf float32
	for ib := 0; ib < nb; ib++ {
		x := w[ib*sizeQ8_0 : (ib+1)*sizeQ8_0]
		y := a[ib*sizeQ8_0 : (ib+1)*sizeQ8_0]
		qx, qy := x[2:34], y[2:34]
		var sumi int32
		for j := 0; j < 32; j++ {
			sumi += int32(int8(qx[j])) * int32(int8(qy[j]))
		}
		sumf += float32(float32(sumi) * (f16at(x, 0) * f16at(y, 0)))
	}
	return sumf
}

// q8K returns the parts of a Q8_K block.
func q8K(y []byte) (d float32, qs []byte, bsums []byte) {
	return math.Float32frombits(binary.LittleEndian.Uint32(y)), y[4 : 4+qkK], y[4+qkK : sizeQ8_K]
}

func bsum(bsums []byte, j int) int32 {
	return int32(int16(binary.LittleEndian.Uint16(bsums[2*j:])))
}

func dotQ2_KQ8_K(w, a []byte, nb int) float32 {
	var sumf float32
	for i := 0; i < nb; i++ {
		x := w[i*sizeQ2_K : (i+1)*sizeQ2_K]
		yd, q8, bs := q8K(a[i*sizeQ8_K : (i+1)*sizeQ8_K])
		sc := x[0:16]
		q2 := x[16:80]
		var summs int32
		for j := 0; j < 16; j++ {
			summs += bsum(bs, j) * int32(sc[j]>>4)
		}
		dall := yd * f16at(x, 80)
		dmin := yd * f16at(x, 82)
		var isum int32
		is := 0
		for k := 0; k < qkK/128; k++ {
			shift := uint(0)
			for j := 0; j < 4; j++ {
				d := int32(sc[is] & 0xf)
				is++
				var isuml int32
				for l := 0; l < 16; l++ {
					isuml += int32(int8(q8[l])) * int32((q2[l]>>shift)&3)
				}
				isum += d * isuml
				d = int32(sc[is] & 0xf)
				is++
				isuml = 0
				for l := 16; l < 32; l++ {
					isuml += int32(int8(q8[l])) * int32((q2[l]>>shift)&3)
				}
				isum += d * isuml
				shift += 2
				q8 = q8[32:]
			}
			q2 = q2[32:]
		}
		sumf += float32(float32(dall*float32(isum)) - float32(dmin*float32(summs)))
	}
	return sumf
}

// addLanes adds the 8-lane integer sums of one super-block to the float
// lanes, as ggml's generic k-quant dots do: sums[l] += d * aux32[l].
func addLanes(sums *[8]float32, d float32, aux32 *[8]int32) {
	for l := 0; l < 8; l++ {
		sums[l] += float32(d * float32(aux32[l]))
	}
}

func sumLanes(sumf float32, sums *[8]float32) float32 {
	for l := 0; l < 8; l++ {
		sumf += sums[l]
	}
	return sumf
}

// mulLanes accumulates scale * q8[k]*q[k] over len(q) elements into the 8
// integer lanes (element k goes to lane k%8).
func mulLanes(aux32 *[8]int32, scale int32, q8 []byte, q []int8) {
	q8 = q8[:len(q)]
	for k := 0; k+8 <= len(q); k += 8 {
		for l := 0; l < 8; l++ {
			aux32[l] += scale * (int32(int8(q8[k+l])) * int32(q[k+l]))
		}
	}
}

func dotQ3_KQ8_K(w, a []byte, nb int) float32 {
	var (
		sums   [8]float32
		aux8   [qkK]int8
		scales [16]int8
	)
	for i := 0; i < nb; i++ {
		x := w[i*sizeQ3_K : (i+1)*sizeQ3_K]
		yd, q8, _ := q8K(a[i*sizeQ8_K : (i+1)*sizeQ8_K])
		hm := x[0:32]
		q3 := x[32:96]
		m := byte(1)
		k := 0
		for j := 0; j < qkK; j += 128 {
			for shift := uint(0); shift < 8; shift += 2 {
				for l := 0; l < 32; l++ {
					v := int8((q3[l] >> shift) & 3)
					if hm[l]&m == 0 {
						v -= 4
					}
					aux8[k+l] = v
				}
				k += 32
				m <<= 1
			}
			q3 = q3[32:]
		}
		ggml.Q3KScales(x[96:108], &scales)
		var aux32 [8]int32
		for j := 0; j < qkK/16; j++ {
			mulLanes(&aux32, int32(scales[j]), q8[16*j:], aux8[16*j:16*j+16])
		}
		addLanes(&sums, f16at(x, 108)*yd, &aux32)
	}
	return sumLanes(0, &sums)
}

func dotQ4_KQ8_K(w, a []byte, nb int) float32 {
	var (
		sums [8]float32
		aux8 [qkK]int8
		sumf float32
	)
	for i := 0; i < nb; i++ {
		x := w[i*sizeQ4_K : (i+1)*sizeQ4_K]
		yd, q8, bs := q8K(a[i*sizeQ8_K : (i+1)*sizeQ8_K])
		q4 := x[16:144]
		for j := 0; j < qkK/64; j++ {
			for l := 0; l < 32; l++ {
				aux8[64*j+l] = int8(q4[32*j+l] & 0xf)
				aux8[64*j+32+l] = int8(q4[32*j+l] >> 4)
			}
		}
		sc := x[4:16]
		var sumi int32
		var aux32 [8]int32
		for j := 0; j < qkK/32; j++ {
			s, m := ggml.ScaleMinK4(j, sc)
			sumi += (bsum(bs, 2*j) + bsum(bs, 2*j+1)) * int32(m)
			mulLanes(&aux32, int32(s), q8[32*j:], aux8[32*j:32*j+32])
		}
		addLanes(&sums, f16at(x, 0)*yd, &aux32)
		dmin := f16at(x, 2) * yd
		sumf -= float32(dmin * float32(sumi))
	}
	return sumLanes(sumf, &sums)
}

func dotQ5_KQ8_K(w, a []byte, nb int) float32 {
	var (
		sums [8]float32
		aux8 [qkK]int8
		sumf float32
	)
	for i := 0; i < nb; i++ {
		x := w[i*sizeQ5_K : (i+1)*sizeQ5_K]
		yd, q8, bs := q8K(a[i*sizeQ8_K : (i+1)*sizeQ8_K])
		hm := x[16:48]
		q4 := x[48:176]
		m := byte(1)
		for j := 0; j < qkK/64; j++ {
			for l := 0; l < 32; l++ {
				lo, hi := int8(q4[32*j+l]&0xf), int8(q4[32*j+l]>>4)
				if hm[l]&m != 0 {
					lo += 16
				}
				if hm[l]&(m<<1) != 0 {
					hi += 16
				}
				aux8[64*j+l], aux8[64*j+32+l] = lo, hi
			}
			m <<= 2
		}
		sc := x[4:16]
		var sumi int32
		var aux32 [8]int32
		for j := 0; j < qkK/32; j++ {
			s, mn := ggml.ScaleMinK4(j, sc)
			sumi += (bsum(bs, 2*j) + bsum(bs, 2*j+1)) * int32(mn)
			mulLanes(&aux32, int32(s), q8[32*j:], aux8[32*j:32*j+32])
		}
		addLanes(&sums, f16at(x, 0)*yd, &aux32)
		dmin := f16at(x, 2) * yd
		sumf -= float32(dmin * float32(sumi))
	}
	return sumLanes(sumf, &sums)
}

func dotQ6_KQ8_K(w, a []byte, nb int) float32 {
	var (
		sums [8]float32
		aux8 [qkK]int8
	)
	for i := 0; i < nb; i++ {
		x := w[i*sizeQ6_K : (i+1)*sizeQ6_K]
		yd, q8, _ := q8K(a[i*sizeQ8_K : (i+1)*sizeQ8_K])
		ql := x[0:128]
		qh := x[128:192]
		sc := x[192:208]
		for j := 0; j < qkK; j += 128 {
			for l := 0; l < 32; l++ {
				aux8[j+l] = int8(ql[l]&0xf|((qh[l]>>0)&3)<<4) - 32
				aux8[j+l+32] = int8(ql[l+32]&0xf|((qh[l]>>2)&3)<<4) - 32
				aux8[j+l+64] = int8(ql[l]>>4|((qh[l]>>4)&3)<<4) - 32
				aux8[j+l+96] = int8(ql[l+32]>>4|((qh[l]>>6)&3)<<4) - 32
			}
			ql = ql[64:]
			qh = qh[32:]
		}
		var aux32 [8]int32
		for j := 0; j < qkK/16; j++ {
			mulLanes(&aux32, int32(int8(sc[j])), q8[16*j:], aux8[16*j:16*j+16])
		}
		addLanes(&sums, f16at(x, 208)*yd, &aux32)
	}
	return sumLanes(0, &sums)
}

// dotQ8_KQ8_K has no ggml counterpart (ggml never stores Q8_K weights); it
// follows the Q8_0 pattern: sumf += sumi*(dx*dy) per super-block.
func dotQ8_KQ8_K(w, a []byte, nb int) float32 {
	var sumf float32
	for i := 0; i < nb; i++ {
		xd, qx, _ := q8K(w[i*sizeQ8_K : (i+1)*sizeQ8_K])
		yd, qy, _ := q8K(a[i*sizeQ8_K : (i+1)*sizeQ8_K])
		var sumi int32
		for j := 0; j < qkK; j++ {
			sumi += int32(int8(qx[j])) * int32(int8(qy[j]))
		}
		sumf += float32(float32(sumi) * (xd * yd))
	}
	return sumf
}
