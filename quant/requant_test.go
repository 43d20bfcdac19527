package quant_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

// TestRequantizeZoo quantizes the F32 zoo models' tensors again, to the type
// each tensor has in the files llama-quantize made from them (no importance
// matrix, so ggml used its quantize_row_*_ref), and expects the same bytes.
// This covers the reference quantizers the JSON goldens do not: Q4_K, Q5_K,
// Q6_K, and Q4_0..Q8_0 and F16 on whole tensors.
func TestRequantizeZoo(t *testing.T) {
	t.Parallel()
	dir := zoo.Dir(t)
	sources := map[string][]string{
		"tiny-llama":  {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K_M", "Q5_K_M", "Q6_K"},
		"stories260K": {"Q4_0", "Q8_0"},
	}
	for family, targets := range sources {
		fs, err := gguf.Open(filepath.Join(dir, "models", family+"-F32.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		for _, q := range targets {
			path := filepath.Join(dir, "models", family+"-"+q+".gguf")
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%v", err)
				continue
			}
			t.Run(family+"-"+q, func(t *testing.T) {
				fq, err := gguf.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer fq.Close()
				checked := map[string]int{}
				for i := range fq.Tensors {
					tq := &fq.Tensors[i]
					if tq.Type == quant.F32 {
						continue
					}
					ts, ok := fs.Tensor(tq.Name)
					if !ok || ts.Type != quant.F32 {
						t.Errorf("%s: no F32 source tensor", tq.Name)
						continue
					}
					if !quant.CanQuantize(tq.Type) {
						t.Errorf("%s: cannot quantize to %s", tq.Name, tq.Type)
						continue
					}
					if r := requantMismatch(ts, tq); r >= 0 {
						t.Errorf("%s (%s): row %d differs from llama-quantize's", tq.Name, tq.Type, r)
						continue
					}
					checked[tq.Type.String()]++
				}
				t.Logf("tensors reproduced byte for byte: %v", checked)
			})
		}
	}
}

// requantMismatch returns the first row of tq that quantizing ts's row does
// not reproduce, or -1.
func requantMismatch(ts, tq *gguf.Tensor) int {
	cols := int(ts.Dims[0])
	rows := int(ts.Elements()) / cols
	qrs, err := quant.RowSize(tq.Type, cols)
	if err != nil || len(tq.Data) != rows*qrs || len(ts.Data) != rows*cols*4 {
		return 0
	}
	x := make([]float32, cols)
	out := make([]byte, qrs)
	for r := 0; r < rows; r++ {
		if quant.DequantizeRow(quant.F32, ts.Data[r*cols*4:(r+1)*cols*4], x) != nil ||
			quant.QuantizeRow(tq.Type, x, out) != nil ||
			!bytes.Equal(out, tq.Data[r*qrs:(r+1)*qrs]) {
			return r
		}
	}
	return -1
}
