package ggml

import (
	"math"
	"math/rand/v2"
	"testing"
)

// fp16Fallback is ggml's software float->half conversion
// (ggml_compute_fp32_to_fp16, after Maratea's FP16 library), written from its
// description as an independent check: it rounds with float arithmetic
// instead of integer bit tests.
func fp16Fallback(f float32) uint16 {
	scaleToInf := math.Float32frombits(0x77800000)  // 0x1.0p+112f
	scaleToZero := math.Float32frombits(0x08800000) // 0x1.0p-110f
	base := float32(float32(math.Abs(float64(f)))*scaleToInf) * scaleToZero
	w := math.Float32bits(f)
	shl1w := w + w
	sign := w & 0x80000000
	bias := shl1w & 0xff000000
	if bias < 0x71000000 {
		bias = 0x71000000
	}
	base = math.Float32frombits(bias>>1+0x07800000) + base
	bits := math.Float32bits(base)
	expBits := (bits >> 13) & 0x00007c00
	mantBits := bits & 0x00000fff
	nonsign := expBits + mantBits
	if shl1w > 0xff000000 {
		nonsign = 0x7e00
	}
	return uint16(sign>>16) | uint16(nonsign)
}

func TestFP16RoundTripAll(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := FP16ToFP32(h)
		want := h
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 { // NaN
			if !math.IsNaN(float64(f)) {
				t.Fatalf("%#04x: NaN converted to %v", h, f)
			}
			want = h&0x8000 | 0x7e00
		}
		if got := FP32ToFP16(f); got != want {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, got)
		}
	}
}

func TestFP16ToFP32Values(t *testing.T) {
	for _, c := range []struct {
		h uint16
		f float64
	}{
		{0x0000, 0}, {0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504},
		{0x0001, math.Ldexp(1, -24)}, {0x03ff, math.Ldexp(1023, -24)}, {0x0400, math.Ldexp(1, -14)},
		{0x3555, 0.333251953125}, {0x7c00, math.Inf(1)}, {0xfc00, math.Inf(-1)},
	} {
		if got := FP16ToFP32(c.h); float64(got) != c.f {
			t.Errorf("FP16ToFP32(%#04x) = %v, want %v", c.h, got, c.f)
		}
	}
	if got := math.Float32bits(FP16ToFP32(0x8000)); got != 0x80000000 {
		t.Errorf("negative zero: %#x", got)
	}
}

func TestFP32ToFP16MatchesGGMLFallback(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	check := func(f float32) {
		if got, want := FP32ToFP16(f), fp16Fallback(f); got != want {
			t.Fatalf("FP32ToFP16(%g [%#08x]) = %#04x, ggml fallback %#04x", f, math.Float32bits(f), got, want)
		}
	}
	// Every half value, the midpoints between neighbours (ties) and one ulp
	// either side of them, in both signs.
	for i := 0; i < 0x7c00; i++ {
		lo := FP16ToFP32(uint16(i))
		hi := FP16ToFP32(uint16(i + 1))
		mid := float32((float64(lo) + float64(hi)) / 2)
		for _, f := range []float32{lo, mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9)} {
			check(f)
			check(-f)
		}
	}
	for i := 0; i < 1_000_000; i++ {
		f := math.Float32frombits(r.Uint32())
		if math.IsNaN(float64(f)) {
			continue
		}
		check(f)
	}
	for _, f := range []float32{0, 65504, 65519.996, 65520, 1e10, float32(math.Inf(1)), 1e-8, 2.98e-8, 5.96e-8, 1e-45} {
		check(f)
		check(-f)
	}
}

func TestBF16(t *testing.T) {
	for _, c := range []struct {
		f float32
		h uint16
	}{
		{1, 0x3f80}, {-2, 0xc000}, {0, 0}, {float32(math.Inf(1)), 0x7f80},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie, even stays
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie, odd rounds up
		{math.Float32frombits(0x3f808001), 0x3f81},
		{math.Float32frombits(0x7f800001), 0x7fc0}, // signalling NaN is quieted
		{math.Float32frombits(0x00000001), 0x0000}, // subnormal rounds normally
	} {
		if got := FP32ToBF16(c.f); got != c.h {
			t.Errorf("FP32ToBF16(%#08x) = %#04x, want %#04x", math.Float32bits(c.f), got, c.h)
		}
	}
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		if h&0x7f80 == 0x7f80 && h&0x7f != 0 {
			continue
		}
		if got := FP32ToBF16(BF16ToFP32(h)); got != h {
			t.Fatalf("%#04x round trip gives %#04x", h, got)
		}
	}
}

func TestFP16Table(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		a, b := FP16ToFP32(uint16(i)), fp16ToFP32(uint16(i))
		if math.Float32bits(a) != math.Float32bits(b) {
			t.Fatalf("%#04x: table %v, arithmetic %v", i, a, b)
		}
	}
}

func TestNearestInt(t *testing.T) {
	for _, c := range []struct {
		f    float32
		want int32 // ties to even
	}{
		{0.5, 0}, {1.5, 2}, {2.5, 2}, {-0.5, 0}, {-1.5, -2}, {-2.5, -2},
		{0.49999997, 0}, {126.6, 127}, {-127.5, -128},
	} {
		if got := NearestInt(c.f); got != c.want {
			t.Errorf("NearestInt(%v) = %d, want %d", c.f, got, c.want)
		}
	}
}
