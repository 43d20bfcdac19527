// Package convert writes GGUF model files: it quantizes F32/F16/BF16 files
// to the mixes llama-quantize makes (Q4_0, Q8_0, Q4_K_M), and synthesizes
// files with random weights in the exact shape of real models so anyone can
// benchmark without downloading one. These are offline tools of the
// geist command, not part of the runtime engine.
//
// The per-tensor type rules follow llama.cpp's src/llama-quant.cpp
// (llama_tensor_get_type): norms and other 1-D tensors keep their type, the
// output matrix (or the token embedding when the output is tied to it) gets
// Q6_K, Q4_K_M gives some attn_v and ffn_down layers Q6_K, and a tensor
// whose row length does not fit the chosen block size falls back to a type
// that fits. Tensors are processed and written in llama.cpp's order (by
// layer number, then by name), which the layer counters of those rules
// depend on.
package convert

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/quant"
)

// FileType is llama.cpp's llama_ftype, stored as general.file_type.
type FileType uint32

// The file types this package writes (values of enum llama_ftype).
const (
	AllF32       FileType = 0
	MostlyF16    FileType = 1
	MostlyQ4_0   FileType = 2
	MostlyQ8_0   FileType = 7
	MostlyQ4_K_M FileType = 15
	MostlyBF16   FileType = 32
)

var fileTypeNames = []struct {
	ft   FileType
	name string
}{
	{MostlyQ4_0, "Q4_0"},
	{MostlyQ4_K_M, "Q4_K_M"},
	{MostlyQ8_0, "Q8_0"},
	{MostlyF16, "F16"},
	{MostlyBF16, "BF16"},
	{AllF32, "F32"},
}

// String returns llama-quantize's name of the file type ("Q4_K_M").
func (ft FileType) String() string {
	for _, n := range fileTypeNames {
		if n.ft == ft {
			return n.name
		}
	}
	return fmt.Sprintf("ftype(%d)", uint32(ft))
}

// FileTypeNames lists the names ParseFileType accepts.
func FileTypeNames() []string {
	names := make([]string, len(fileTypeNames))
	for i, n := range fileTypeNames {
		names[i] = n.name
	}
	return names
}

// ParseFileType returns the file type called s ("q4_k_m" or "Q4_K_M").
func ParseFileType(s string) (FileType, error) {
	for _, n := range fileTypeNames {
		if strings.EqualFold(n.name, s) {
			return n.ft, nil
		}
	}
	return 0, fmt.Errorf("convert: unknown type %q (want one of %s)", s, strings.Join(FileTypeNames(), ", "))
}

// DefaultType is the tensor type most tensors of the file type get
// (llama_ftype_get_default_type).
func (ft FileType) DefaultType() (quant.Type, error) {
	switch ft {
	case AllF32:
		return quant.F32, nil
	case MostlyF16:
		return quant.F16, nil
	case MostlyBF16:
		return quant.BF16, nil
	case MostlyQ4_0:
		return quant.Q4_0, nil
	case MostlyQ8_0:
		return quant.Q8_0, nil
	case MostlyQ4_K_M:
		return quant.Q4_K, nil
	}
	return 0, fmt.Errorf("convert: unsupported file type %d", uint32(ft))
}

func isQuantized(t quant.Type) bool { return t.BlockSize() > 1 }

// layerOf returns N of a "blk.N." tensor name, or -1.
func layerOf(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	i := 0
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i == 0 || i >= len(rest) || rest[i] != '.' {
		return -1
	}
	n, err := strconv.Atoi(rest[:i])
	if err != nil {
		return -1
	}
	return n
}

// Order returns the indices of names in the order llama.cpp's model loader
// keeps its weights (weight_name_comparer): tensors outside blocks first,
// then by block number, and by name within each.
func Order(names []string) []int {
	idx := make([]int, len(names))
	layer := make([]int, len(names))
	for i, n := range names {
		idx[i] = i
		layer[i] = layerOf(n)
	}
	sort.SliceStable(idx, func(a, b int) bool {
		i, j := idx[a], idx[b]
		if layer[i] != layer[j] {
			return layer[i] < layer[j]
		}
		return names[i] < names[j]
	})
	return idx
}

// nDims is ggml_n_dims: the dimensions up to the last one above 1.
func nDims(dims []int64) int {
	n := 1
	for i, d := range dims {
		if d > 1 {
			n = i + 1
		}
	}
	return n
}

// quantizable is llama.cpp's tensor_allows_quantization for the tensors of
// the architectures geist runs (and the usual exceptions of others).
func quantizable(name string, dims []int64) bool {
	if nDims(dims) < 2 || !strings.HasSuffix(name, "weight") {
		return false
	}
	for _, s := range []string{
		"_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
		"per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight",
		"indexer.k_proj.weight", "indexer.q_proj.weight", "time_mix_", "attn_rel_b.weight",
		".position_embd", ".rel_pos", ".patch_embd", ".patch_merger",
	} {
		if strings.Contains(name, s) {
			return false
		}
	}
	return name != "position_embd.weight" && name != "token_types.weight"
}

type category int

const (
	catOther category = iota
	catTokenEmbd
	catOutput
	catAttnV // attn_v, attn_qkv, attn_kv_b
	catFFNDown
)

func categorize(name string) category {
	switch {
	case name == "output.weight":
		return catOutput
	case name == "token_embd.weight" || name == "per_layer_token_embd.weight":
		return catTokenEmbd
	case strings.Contains(name, "attn_qkv.weight"), strings.Contains(name, "attn_kv_b.weight"), strings.Contains(name, "attn_v.weight"):
		return catAttnV
	case strings.Contains(name, "ffn_down"):
		return catFFNDown
	}
	return catOther
}

// useMoreBits is llama.cpp's choice of the layers that get more bits.
func useMoreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// fallback returns a type whose block fits rows of ncols elements, as
// llama.cpp's tensor_type_fallback does (types without a listed fallback
// become F16, as the llama-quantize that made the zoo does).
func fallback(t quant.Type, ncols int64) quant.Type {
	if ncols%int64(t.BlockSize()) == 0 {
		return t
	}
	switch t {
	case quant.Q2_K, quant.Q3_K:
		t = quant.Q4_0
	case quant.Q4_K:
		t = quant.Q5_0
	case quant.Q5_K:
		t = quant.Q5_1
	case quant.Q6_K:
		t = quant.Q8_0
	default:
		return quant.F16
	}
	if ncols%int64(t.BlockSize()) != 0 {
		return quant.F16
	}
	return t
}

// Plan returns the type each tensor gets in a file of type ft, in the
// order of tensors (which may be any order: the rules are applied in
// llama.cpp's order). arch is general.architecture and nLayer the block
// count. Tensors that are not quantized keep their type.
func Plan(tensors []gguf.TensorInfo, ft FileType, arch string, nLayer int) ([]quant.Type, error) {
	def, err := ft.DefaultType()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(tensors))
	tied := true
	nAttnV := 0
	for i, t := range tensors {
		names[i] = t.Name
		switch categorize(t.Name) {
		case catOutput:
			tied = false
		case catAttnV:
			nAttnV++
		}
	}
	out := make([]quant.Type, len(tensors))
	iAttnV, iFFNDown := 0, 0
	for _, i := range Order(names) {
		t := tensors[i]
		out[i] = t.Type
		if len(t.Dims) == 0 || !quantizable(t.Name, t.Dims) {
			continue
		}
		nt := def
		if isQuantized(def) {
			cat := categorize(t.Name)
			switch {
			case cat == catOutput || (tied && cat == catTokenEmbd):
				if arch == "falcon" || t.Dims[0]%int64(nt.BlockSize()) != 0 {
					nt = quant.Q8_0
				} else if nt != quant.Q8_0 {
					nt = quant.Q6_K
				}
			case cat == catAttnV:
				if ft == MostlyQ4_K_M && useMoreBits(iAttnV, nAttnV) {
					nt = quant.Q6_K
				}
				iAttnV++
			case cat == catFFNDown:
				if ft == MostlyQ4_K_M {
					if arch == "falcon" {
						switch {
						case iFFNDown < nLayer/16:
							nt = quant.Q6_K
						case useMoreBits(iFFNDown, nLayer):
							nt = quant.Q5_K
						}
					} else if useMoreBits(iFFNDown, nLayer) {
						nt = quant.Q6_K
					}
				}
				iFFNDown++
			}
			nt = fallback(nt, t.Dims[0])
		}
		out[i] = nt
	}
	return out, nil
}
