// Package quant holds ggml's tensor types: their ids and block layouts, the
// reference (de)quantization of rows, and matrix products over quantized rows.
package quant

import (
	"fmt"

	"github.com/geisten/geist/neon/ggml"
)

// Type is a ggml tensor type id, as stored in GGUF files.
type Type uint32

// The ggml type ids (ggml.h, enum ggml_type). Gaps are ids ggml retired.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
)

// QK_K is the super-block size of the k-quants.
const QK_K = ggml.QK_K

// traits is what quant knows of a type: its name and layout and, for the
// types it converts, the reference conversions of nb blocks (ggml's
// dequantize_row_* and quantize_row_*_ref). A new type is one line of
// typeTraits and, when neon multiplies it, one line of neon.Weights
// (TestOneTypeTable checks that they agree).
type traits struct {
	name      string
	blockSize int // elements per block
	typeSize  int // bytes per block
	dequant   func(src []byte, dst []float32, nb int)
	quant     func(src []float32, dst []byte, nb int)
}

var typeTraits = map[Type]traits{
	F32:     {"F32", 1, 4, dequantF32, quantF32},
	F16:     {"F16", 1, 2, dequantF16, quantF16},
	Q4_0:    {"Q4_0", ggml.QK, ggml.SizeQ4_0, dequantQ4_0, quantQ4_0},
	Q4_1:    {"Q4_1", ggml.QK, ggml.SizeQ4_1, dequantQ4_1, quantQ4_1},
	Q5_0:    {"Q5_0", ggml.QK, ggml.SizeQ5_0, dequantQ5_0, quantQ5_0},
	Q5_1:    {"Q5_1", ggml.QK, ggml.SizeQ5_1, dequantQ5_1, quantQ5_1},
	Q8_0:    {"Q8_0", ggml.QK, ggml.SizeQ8_0, dequantQ8_0, quantQ8_0},
	Q8_1:    {"Q8_1", ggml.QK, ggml.SizeQ8_1, dequantQ8_1, quantQ8_1},
	Q2_K:    {"Q2_K", QK_K, ggml.SizeQ2_K, dequantQ2_K, quantQ2_K},
	Q3_K:    {"Q3_K", QK_K, ggml.SizeQ3_K, dequantQ3_K, quantQ3_K},
	Q4_K:    {"Q4_K", QK_K, ggml.SizeQ4_K, dequantQ4_K, quantQ4_K},
	Q5_K:    {"Q5_K", QK_K, ggml.SizeQ5_K, dequantQ5_K, quantQ5_K},
	Q6_K:    {"Q6_K", QK_K, ggml.SizeQ6_K, dequantQ6_K, quantQ6_K},
	Q8_K:    {"Q8_K", QK_K, ggml.SizeQ8_K, dequantQ8_K, quantQ8_K},
	IQ2_XXS: {"IQ2_XXS", QK_K, 66, nil, nil},
	IQ2_XS:  {"IQ2_XS", QK_K, 74, nil, nil},
	IQ3_XXS: {"IQ3_XXS", QK_K, 98, nil, nil},
	IQ1_S:   {"IQ1_S", QK_K, 50, nil, nil},
	IQ4_NL:  {"IQ4_NL", 32, 18, nil, nil},
	IQ3_S:   {"IQ3_S", QK_K, 110, nil, nil},
	IQ2_S:   {"IQ2_S", QK_K, 82, nil, nil},
	IQ4_XS:  {"IQ4_XS", QK_K, 136, nil, nil},
	I8:      {"I8", 1, 1, nil, nil},
	I16:     {"I16", 1, 2, nil, nil},
	I32:     {"I32", 1, 4, nil, nil},
	I64:     {"I64", 1, 8, nil, nil},
	F64:     {"F64", 1, 8, nil, nil},
	IQ1_M:   {"IQ1_M", QK_K, 56, nil, nil},
	BF16:    {"BF16", 1, 2, dequantBF16, quantBF16},
	TQ1_0:   {"TQ1_0", QK_K, 54, nil, nil},
	TQ2_0:   {"TQ2_0", QK_K, 66, nil, nil},
	MXFP4:   {"MXFP4", 32, 17, nil, nil},
}

// Known reports whether t is a ggml type id this package knows the layout of.
func (t Type) Known() bool { _, ok := typeTraits[t]; return ok }

// String returns ggml's name for the type ("Q4_K"), or "type(N)" for an unknown id.
func (t Type) String() string {
	if tr, ok := typeTraits[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of elements in one block of t (1 for plain types).
// It is 0 for an unknown type.
func (t Type) BlockSize() int { return typeTraits[t].blockSize }

// TypeSize is the number of bytes in one block of t. It is 0 for an unknown type.
func (t Type) TypeSize() int { return typeTraits[t].typeSize }

// RowSize returns the bytes that n elements of type t take, or an error when
// t is unknown or n is not a whole number of blocks.
func RowSize(t Type, n int) (int, error) {
	tr, ok := typeTraits[t]
	if !ok {
		return 0, fmt.Errorf("quant: unknown tensor type %d", uint32(t))
	}
	if n < 0 || n%tr.blockSize != 0 {
		return 0, fmt.Errorf("quant: %d elements is not a whole number of %s blocks of %d", n, tr.name, tr.blockSize)
	}
	return n / tr.blockSize * tr.typeSize, nil
}

// ParseType returns the type with ggml's name s ("q4_0" or "Q4_0").
func ParseType(s string) (Type, bool) {
	for t, tr := range typeTraits {
		if equalFold(tr.name, s) {
			return t, true
		}
	}
	return 0, false
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
