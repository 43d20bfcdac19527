package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/geisten/geist/neon"
	"github.com/geisten/geist/neon/ggml"
)

// Go may fuse x*y+z into one fused multiply-add (it does on arm64) unless
// the product goes through an explicit float32() conversion; ggml's
// reference code rounds every product, so the codecs here write float32(a*b)
// wherever a product is later added to something (see neon/ggml).

// QuantizeRow converts src to len(src) elements of type t in dst, byte-exact
// with ggml's quantize_row_*_ref. dst must hold exactly RowSize(t, len(src))
// bytes. Supported types: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K.
func QuantizeRow(t Type, src []float32, dst []byte) error {
	nb, err := rowBlocks(t, dst, len(src))
	if err != nil {
		return err
	}
	q := typeTraits[t].quant
	if q == nil {
		return fmt.Errorf("quant: quantization to %s is not supported", t)
	}
	q(src, dst, nb)
	return nil
}

// CanQuantize reports whether QuantizeRow handles t.
func CanQuantize(t Type) bool { return typeTraits[t].quant != nil }

func putF16(b []byte, off int, f float32) {
	binary.LittleEndian.PutUint16(b[off:], ggml.FP32ToFP16(f))
}

// roundf is C's roundf: round half away from zero.
func roundf(x float32) float32 { return float32(math.Round(float64(x))) }

// truncToInt is C's float to integer conversion (truncation toward zero)
// for a value known to be in range.
func truncToInt(x float32) int32 { return int32(x) }

func minI32(a, b int32) int32 {
	if a < b {
		return a
	}
	return b
}

func maxI32(a, b int32) int32 {
	if a > b {
		return a
	}
	return b
}

// absMaxSigned returns the element of largest magnitude (the first one on
// ties), as ggml's q4_0/q5_0 quantizers pick it.
func absMaxSigned(x []float32) float32 {
	var amax, max float32
	for _, v := range x {
		if a := abs32(v); amax < a {
			amax, max = a, v
		}
	}
	return max
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

func minMax(x []float32) (min, max float32) {
	min, max = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < min {
			min = v
		}
		if v > max {
			max = v
		}
	}
	return min, max
}

func inv(d float32) float32 {
	if d != 0 {
		return 1 / d
	}
	return 0
}

// scaledTrunc is ggml's (int8_t)(x*id + bias) in quantize_row_q4_0_ref and
// q5_0_ref with the product rounded to float32 before the addition, as ggml
// compiles on x86 (no FMA contraction). A build that contracts it to an FMA
// (gguf-py emulates one in float64) can differ in rare ties; the zoo's
// reference rows come out the same either way.
func scaledTrunc(x, id, bias float32) int32 {
	return int32(float32(x*id) + bias)
}

func quantF32(src []float32, dst []byte, _ int) {
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func quantF16(src []float32, dst []byte, _ int) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], ggml.FP32ToFP16(v))
	}
}

func quantBF16(src []float32, dst []byte, _ int) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], ggml.FP32ToBF16(v))
	}
}

func quantQ4_0(src []float32, dst []byte, nb int) {
	for i := 0; i < nb; i++ {
		x := src[i*32 : i*32+32]
		y := dst[i*ggml.SizeQ4_0 : (i+1)*ggml.SizeQ4_0]
		d := absMaxSigned(x) / -8
		id := inv(d)
		putF16(y, 0, d)
		for j := 0; j < 16; j++ {
			xi0 := minI32(15, scaledTrunc(x[j], id, 8.5))
			xi1 := minI32(15, scaledTrunc(x[j+16], id, 8.5))
			y[2+j] = byte(xi0) | byte(xi1)<<4
		}
	}
}

func quantQ4_1(src []float32, dst []byte, nb int) {
	for i := 0; i < nb; i++ {
		x := src[i*32 : i*32+32]
		y := dst[i*ggml.SizeQ4_1 : (i+1)*ggml.SizeQ4_1]
		min, max := minMax(x)
		d := (max - min) / 15
		id := inv(d)
		putF16(y, 0, d)
		putF16(y, 2, min)
		for j := 0; j < 16; j++ {
			x0 := float32((x[j] - min) * id)
			x1 := float32((x[j+16] - min) * id)
			xi0 := minI32(15, truncToInt(x0+0.5))
			xi1 := minI32(15, truncToInt(x1+0.5))
			y[4+j] = byte(xi0) | byte(xi1)<<4
		}
	}
}

func quantQ5_0(src []float32, dst []byte, nb int) {
	for i := 0; i < nb; i++ {
		x := src[i*32 : i*32+32]
		y := dst[i*ggml.SizeQ5_0 : (i+1)*ggml.SizeQ5_0]
		d := absMaxSigned(x) / -16
		id := inv(d)
		putF16(y, 0, d)
		var qh uint32
		for j := 0; j < 16; j++ {
			xi0 := uint32(minI32(31, scaledTrunc(x[j], id, 16.5)))
			xi1 := uint32(minI32(31, scaledTrunc(x[j+16], id, 16.5)))
			y[6+j] = byte(xi0&0x0f) | byte(xi1&0x0f)<<4
			qh |= (xi0 & 0x10) >> 4 << uint(j)
			qh |= (xi1 & 0x10) >> 4 << uint(j+16)
		}
		binary.LittleEndian.PutUint32(y[2:], qh)
	}
}

func quantQ5_1(src []float32, dst []byte, nb int) {
	for i := 0; i < nb; i++ {
		x := src[i*32 : i*32+32]
		y := dst[i*ggml.SizeQ5_1 : (i+1)*ggml.SizeQ5_1]
		min, max := minMax(x)
		d := (max - min) / 31
		id := inv(d)
		putF16(y, 0, d)
		putF16(y, 2, min)
		var qh uint32
		for j := 0; j < 16; j++ {
			x0 := float32((x[j] - min) * id)
			x1 := float32((x[j+16] - min) * id)
			// ggml has no MIN(31, ...) here: (uint8_t)(x0 + 0.5f).
			xi0 := uint32(uint8(truncToInt(x0 + 0.5)))
			xi1 := uint32(uint8(truncToInt(x1 + 0.5)))
			y[8+j] = byte(xi0&0x0f) | byte(xi1&0x0f)<<4
			qh |= (xi0 & 0x10) >> 4 << uint(j)
			qh |= (xi1 & 0x10) >> 4 << uint(j+16)
		}
		binary.LittleEndian.PutUint32(y[4:], qh)
	}
}

func absMax(x []float32) float32 {
	var amax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax = a
		}
	}
	return amax
}

func quantQ8_0(src []float32, dst []byte, nb int) {
	for i := 0; i < nb; i++ {
		x := src[i*32 : i*32+32]
		y := dst[i*ggml.SizeQ8_0 : (i+1)*ggml.SizeQ8_0]
		d := absMax(x) / 127
		id := inv(d)
		putF16(y, 0, d)
		for j := 0; j < 32; j++ {
			y[2+j] = byte(int8(roundf(x[j] * id)))
		}
	}
}

func quantQ8_1(src []float32, dst []byte, nb int) {
	for i := 0; i < nb; i++ {
		x := src[i*32 : i*32+32]
		y := dst[i*ggml.SizeQ8_1 : (i+1)*ggml.SizeQ8_1]
		d := absMax(x) / 127
		id := inv(d)
		putF16(y, 0, d)
		var sum int32
		for j := 0; j < 16; j++ {
			q0 := int8(roundf(x[j] * id))
			q1 := int8(roundf(x[j+16] * id))
			y[4+j] = byte(q0)
			y[4+j+16] = byte(q1)
			sum += int32(q0) + int32(q1)
		}
		putF16(y, 2, float32(sum)*d)
	}
}

// quantQ8_K is ggml's quantize_row_q8_K_ref: iscale = -127/max (current ggml;
// the -128 of older versions is a comment there now), nearest_int rounding,
// d = 1/iscale, and the sums of each 16 quants in bsums. The activation
// quantizer of neon's generic set is that function; it lives there once.
func quantQ8_K(src []float32, dst []byte, nb int) {
	neon.Generic().QuantizeQ8_K(dst[:nb*ggml.SizeQ8_K], src[:nb*QK_K])
}
