package ggml

import (
	"encoding/binary"
	"math"
)

// A note on floating point: Go may fuse x*y+z into one fused multiply-add
// (it does on arm64) unless the product goes through an explicit float32()
// conversion. ggml's reference code rounds every product, so its Go
// counterparts write float32(a*b) wherever a product is later added to
// something; those conversions are not redundant.

// FP16ToFP32 converts IEEE half-precision bits to float32, exactly for every
// input (subnormals, infinities and NaN payloads included), by a lookup in
// a 256 KiB table like ggml's ggml_table_f32_f16.
func FP16ToFP32(h uint16) float32 { return fp16Table[h] }

// F16At reads the little-endian half at b[off:] as float32.
func F16At(b []byte, off int) float32 { return fp16Table[binary.LittleEndian.Uint16(b[off:])] }

// FP16Table returns the table behind FP16ToFP32 (read-only: for assembly
// kernels that convert scales by integer loads).
func FP16Table() *[1 << 16]float32 { return fp16Table }

// fp16Table maps every half bit pattern to its float32 value: filled once
// at package initialisation, read-only after.
var fp16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = fp16ToFP32(uint16(i))
	}
	return &t
}()

// fp16ToFP32 is the arithmetic conversion the table is filled with.
func fp16ToFP32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0: // signed zero
		return math.Float32frombits(sign)
	}
	// Subnormal half: mant * 2^-24. Normalise it.
	e := uint32(113)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}

// FP32ToFP16 converts f to IEEE half-precision bits, rounding to nearest with
// ties to even, like ggml's GGML_FP32_TO_FP16 (F16C's VCVTPS2PH and ggml's
// software fallback agree on every non-NaN input). Values too large become
// infinity, tiny values become subnormals or zero. A NaN becomes the quiet
// NaN 0x7E00 with f's sign, as ggml's software fallback produces.
func FP32ToFP16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // half exponent field
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e >= 1 {
		h := uint32(e)<<10 | mant>>13
		rem := mant & 0x1fff
		if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
			h++ // may carry into the exponent, up to infinity: both correct
		}
		return sign | uint16(h)
	}
	// Half subnormal (or zero): m24 * 2^(exp-150) = q * 2^-24, q = m24 >> s.
	if exp == 0 {
		return sign // float32 zero or subnormal: far below half's range
	}
	s := uint32(14 - e) // >= 14
	if s > 24 {
		return sign // below half the smallest subnormal
	}
	m24 := mant | 0x800000
	q := m24 >> s
	rem := m24 & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || (rem == half && q&1 == 1) {
		q++ // 0x400 is the smallest normal: the encoding carries naturally
	}
	return sign | uint16(q)
}

// BF16ToFP32 converts bfloat16 bits to float32 (exact).
func BF16ToFP32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// FP32ToBF16 converts f to bfloat16 bits like ggml's GGML_FP32_TO_BF16:
// round to nearest even; a NaN keeps its top bits and is forced quiet.
func FP32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 64
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// NearestInt is ggml's nearest_int: the float trick that rounds half to
// even for |f| <= 4194303. Pass it an already rounded float32 (wrap
// products in float32()) so that Go cannot fuse the addition into an FMA.
func NearestInt(f float32) int32 {
	v := float32(f) + 12582912
	return int32(math.Float32bits(v)&0x7fffff) - 0x400000
}
