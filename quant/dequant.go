package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/geisten/geist/neon/ggml"
)

// rowBytes checks that src holds exactly the blocks for dst and returns the
// number of blocks.
func rowBlocks(t Type, src []byte, n int) (int, error) {
	size, err := RowSize(t, n)
	if err != nil {
		return 0, err
	}
	if len(src) != size {
		return 0, fmt.Errorf("quant: %s row of %d elements needs %d bytes, have %d", t, n, size, len(src))
	}
	return n / t.BlockSize(), nil
}

// DequantizeRow converts the blocks in src to len(dst) float32 values,
// bit-exact with ggml's dequantize_row_* (and gguf-py's dequantizers). src
// must hold exactly the bytes of len(dst) elements of type t.
func DequantizeRow(t Type, src []byte, dst []float32) error {
	nb, err := rowBlocks(t, src, len(dst))
	if err != nil {
		return err
	}
	dq := typeTraits[t].dequant
	if dq == nil {
		return fmt.Errorf("quant: dequantization of %s is not supported", t)
	}
	dq(src, dst, nb)
	return nil
}

func dequantF32(src []byte, dst []float32, _ int) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func dequantF16(src []byte, dst []float32, _ int) {
	for i := range dst {
		dst[i] = ggml.FP16ToFP32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func dequantBF16(src []byte, dst []float32, _ int) {
	for i := range dst {
		dst[i] = ggml.BF16ToFP32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func dequantQ4_0(src []byte, dst []float32, nb int) {
	for i := 0; i < nb; i++ {
		b := src[i*ggml.SizeQ4_0 : (i+1)*ggml.SizeQ4_0]
		y := dst[i*32 : i*32+32]
		d := ggml.F16At(b, 0)
		qs := b[2:18]
		for j := 0; j < 16; j++ {
			y[j] = float32(int32(qs[j]&0x0f)-8) * d
			y[j+16] = float32(int32(qs[j]>>4)-8) * d
		}
	}
}

func dequantQ4_1(src []byte, dst []float32, nb int) {
	for i := 0; i < nb; i++ {
		b := src[i*ggml.SizeQ4_1 : (i+1)*ggml.SizeQ4_1]
		y := dst[i*32 : i*32+32]
		d, m := ggml.F16At(b, 0), ggml.F16At(b, 2)
		qs := b[4:20]
		for j := 0; j < 16; j++ {
			y[j] = float32(float32(qs[j]&0x0f)*d) + m
			y[j+16] = float32(float32(qs[j]>>4)*d) + m
		}
	}
}

func dequantQ5_0(src []byte, dst []float32, nb int) {
	for i := 0; i < nb; i++ {
		b := src[i*ggml.SizeQ5_0 : (i+1)*ggml.SizeQ5_0]
		y := dst[i*32 : i*32+32]
		d := ggml.F16At(b, 0)
		qh := binary.LittleEndian.Uint32(b[2:])
		qs := b[6:22]
		for j := 0; j < 16; j++ {
			xh0 := byte(qh>>uint(j)<<4) & 0x10
			xh1 := byte(qh>>uint(j+12)) & 0x10
			y[j] = float32(int32(qs[j]&0x0f|xh0)-16) * d
			y[j+16] = float32(int32(qs[j]>>4|xh1)-16) * d
		}
	}
}

func dequantQ5_1(src []byte, dst []float32, nb int) {
	for i := 0; i < nb; i++ {
		b := src[i*ggml.SizeQ5_1 : (i+1)*ggml.SizeQ5_1]
		y := dst[i*32 : i*32+32]
		d, m := ggml.F16At(b, 0), ggml.F16At(b, 2)
		qh := binary.LittleEndian.Uint32(b[4:])
		qs := b[8:24]
		for j := 0; j < 16; j++ {
			xh0 := byte(qh>>uint(j)<<4) & 0x10
			xh1 := byte(qh>>uint(j+12)) & 0x10
			y[j] = float32(float32(qs[j]&0x0f|xh0)*d) + m
			y[j+16] = float32(float32(qs[j]>>4|xh1)*d) + m
		}
	}
}

func dequantQ8_0(src []byte, dst []float32, nb int) {
	for i := 0; i < nb; i++ {
		b := src[i*ggml.SizeQ8_0 : (i+1)*ggml.SizeQ8_0]
		y := dst[i*32 : i*32+32]
		d := ggml.F16At(b, 0)
		for j := 0; j < 32; j++ {
			y[j] = float32(int8(b[2+j])) * d
		}
	}
}

func dequantQ8_1(src []byte, dst []float32, nb int) {
	for i := 0; i < nb; i++ {
		b := src[i*ggml.SizeQ8_1 : (i+1)*ggml.SizeQ8_1]
		y := dst[i*32 : i*32+32]
		d := ggml.F16At(b, 0)
		for j := 0; j < 32; j++ {
			y[j] = float32(int8(b[4+j])) * d
		}
	}
}

func dequantQ2_K(src []byte, dst []float32, nb int) {
	for i := 0; i < nb; i++ {
		b := src[i*ggml.SizeQ2_K : (i+1)*ggml.SizeQ2_K]
		y := dst[i*QK_K : (i+1)*QK_K]
		scales := b[0:16]
		q := b[16:80]
		d, min := ggml.F16At(b, 80), ggml.F16At(b, 82)
		is, k := 0, 0
		for n := 0; n < QK_K; n += 128 {
			shift := uint(0)
			for j := 0; j < 4; j++ {
				sc := scales[is]
				is++
				dl, ml := d*float32(sc&0xf), float32(min*float32(sc>>4))
				for l := 0; l < 16; l++ {
					y[k] = float32(dl*float32((q[l]>>shift)&3)) - ml
					k++
				}
				sc = scales[is]
				is++
				dl, ml = d*float32(sc&0xf), float32(min*float32(sc>>4))
				for l := 0; l < 16; l++ {
					y[k] = float32(dl*float32((q[l+16]>>shift)&3)) - ml
					k++
				}
				shift += 2
			}
			q = q[32:]
		}
	}
}

func dequantQ3_K(src []byte, dst []float32, nb int) {
	var scales [16]int8
	for i := 0; i < nb; i++ {
		b := src[i*ggml.SizeQ3_K : (i+1)*ggml.SizeQ3_K]
		y := dst[i*QK_K : (i+1)*QK_K]
		hm := b[0:32]
		q := b[32:96]
		ggml.Q3KScales(b[96:108], &scales)
		dAll := ggml.F16At(b, 108)
		m := byte(1)
		is, k := 0, 0
		for n := 0; n < QK_K; n += 128 {
			shift := uint(0)
			for j := 0; j < 4; j++ {
				dl := dAll * float32(scales[is])
				is++
				for l := 0; l < 16; l++ {
					v := int32((q[l] >> shift) & 3)
					if hm[l]&m == 0 {
						v -= 4
					}
					y[k] = dl * float32(v)
					k++
				}
				dl = dAll * float32(scales[is])
				is++
				for l := 0; l < 16; l++ {
					v := int32((q[l+16] >> shift) & 3)
					if hm[l+16]&m == 0 {
						v -= 4
					}
					y[k] = dl * float32(v)
					k++
				}
				shift += 2
				m <<= 1
			}
			q = q[32:]
		}
	}
}

func dequantQ4_K(src []byte, dst []float32, nb int) {
	for i := 0; i < nb; i++ {
		b := src[i*ggml.SizeQ4_K : (i+1)*ggml.SizeQ4_K]
		y := dst[i*QK_K : (i+1)*QK_K]
		d, min := ggml.F16At(b, 0), ggml.F16At(b, 2)
		scales := b[4:16]
		q := b[16:144]
		is, k := 0, 0
		for j := 0; j < QK_K; j += 64 {
			sc, m := ggml.ScaleMinK4(is, scales)
			d1, m1 := d*float32(sc), float32(min*float32(m))
			sc, m = ggml.ScaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), float32(min*float32(m))
			for l := 0; l < 32; l++ {
				y[k] = float32(d1*float32(q[l]&0xf)) - m1
				k++
			}
			for l := 0; l < 32; l++ {
				y[k] = float32(d2*float32(q[l]>>4)) - m2
				k++
			}
			q = q[32:]
			is += 2
		}
	}
}

func dequantQ5_K(src []byte, dst []float32, nb int) {
	for i := 0; i < nb; i++ {
		b := src[i*ggml.SizeQ5_K : (i+1)*ggml.SizeQ5_K]
		y := dst[i*QK_K : (i+1)*QK_K]
		d, min := ggml.F16At(b, 0), ggml.F16At(b, 2)
		scales := b[4:16]
		qh := b[16:48]
		ql := b[48:176]
		is, k := 0, 0
		u1, u2 := byte(1), byte(2)
		for j := 0; j < QK_K; j += 64 {
			sc, m := ggml.ScaleMinK4(is, scales)
			d1, m1 := d*float32(sc), float32(min*float32(m))
			sc, m = ggml.ScaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), float32(min*float32(m))
			for l := 0; l < 32; l++ {
				v := int32(ql[l] & 0xf)
				if qh[l]&u1 != 0 {
					v += 16
				}
				y[k] = float32(d1*float32(v)) - m1
				k++
			}
			for l := 0; l < 32; l++ {
				v := int32(ql[l] >> 4)
				if qh[l]&u2 != 0 {
					v += 16
				}
				y[k] = float32(d2*float32(v)) - m2
				k++
			}
			ql = ql[32:]
			is += 2
			u1 <<= 2
			u2 <<= 2
		}
	}
}

func dequantQ6_K(src []byte, dst []float32, nb int) {
	for i := 0; i < nb; i++ {
		b := src[i*ggml.SizeQ6_K : (i+1)*ggml.SizeQ6_K]
		y := dst[i*QK_K : (i+1)*QK_K]
		ql := b[0:128]
		qh := b[128:192]
		sc := b[192:208]
		d := ggml.F16At(b, 208)
		for n := 0; n < QK_K; n += 128 {
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int32(ql[l]&0xf|((qh[l]>>0)&3)<<4) - 32
				q2 := int32(ql[l+32]&0xf|((qh[l]>>2)&3)<<4) - 32
				q3 := int32(ql[l]>>4|((qh[l]>>4)&3)<<4) - 32
				q4 := int32(ql[l+32]>>4|((qh[l]>>6)&3)<<4) - 32
				y[n+l] = d * float32(int8(sc[is])) * float32(q1)
				y[n+l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				y[n+l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				y[n+l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
			ql = ql[64:]
			qh = qh[32:]
			sc = sc[8:]
		}
	}
}

func dequantQ8_K(src []byte, dst []float32, nb int) {
	for i := 0; i < nb; i++ {
		b := src[i*ggml.SizeQ8_K : (i+1)*ggml.SizeQ8_K]
		y := dst[i*QK_K : (i+1)*QK_K]
		d := math.Float32frombits(binary.LittleEndian.Uint32(b))
		for j := 0; j < QK_K; j++ {
			y[j] = d * float32(int8(b[4+j]))
		}
	}
}
