package models

import (
	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/quant"
)

// ftypeNames are llama.cpp's names of its file types (enum llama_ftype in
// llama.h, stored as general.file_type), as llama-quantize spells them.
var ftypeNames = map[int64]string{
	0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
	10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
	16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S",
	22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
	28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16",
	36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
}

// quantization names the file's quantization: general.file_type when the
// file has a known one, else the tensor type holding most weights of the
// matrices.
func quantization(f *gguf.File) string {
	if v, ok := f.Int("general.file_type"); ok {
		if n, ok := ftypeNames[v]; ok {
			return n
		}
	}
	count := map[quant.Type]int64{}
	for i := range f.Tensors {
		if t := &f.Tensors[i]; len(t.Dims) >= 2 {
			count[t.Type] += t.Elements()
		}
	}
	var best quant.Type
	var most int64
	for t, n := range count {
		if n > most || n == most && t.String() < best.String() {
			best, most = t, n
		}
	}
	if most == 0 {
		return ""
	}
	return best.String()
}
