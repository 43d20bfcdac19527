package quant

import (
	"encoding/binary"
	"math"
	"testing"
)

var fuzzTypes = []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K}

// FuzzRows feeds arbitrary bytes to every dequantizer and, read as floats
// (NaNs, infinities and huge values included), to every quantizer and dot
// product: none may panic.
func FuzzRows(f *testing.F) {
	f.Add(make([]byte, 4*QK_K))
	seed := make([]byte, 4*QK_K)
	for i := 0; i < QK_K; i++ {
		v := float32(math.Sin(float64(i))) * 1e3
		switch i % 17 {
		case 3:
			v = float32(math.Inf(1))
		case 5:
			v = float32(math.NaN())
		case 7:
			v = 3e38
		}
		binary.LittleEndian.PutUint32(seed[4*i:], math.Float32bits(v))
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 4*QK_K {
			b = append(b, make([]byte, 4*QK_K-len(b))...)
		}
		x := make([]float32, QK_K)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		y := make([]float32, QK_K)
		for _, typ := range fuzzTypes {
			size, _ := RowSize(typ, QK_K)
			if err := DequantizeRow(typ, b[:size], y); err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
			q := make([]byte, size)
			if err := QuantizeRow(typ, x, q); err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
			if k, ok := kernelFor(typ); ok {
				as, _ := RowSize(k.act, QK_K)
				a := make([]byte, as)
				if err := QuantizeRow(k.act, x, a); err != nil {
					t.Fatal(err)
				}
				k.dot(b[:size], a, QK_K/typ.BlockSize())
				k.dot(q, a, QK_K/typ.BlockSize())
			}
		}
	})
}
