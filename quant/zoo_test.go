package quant_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

type dequantGolden struct {
	Model   string `json:"model"`
	Tensors []struct {
		Name   string    `json:"name"`
		Type   string    `json:"type"`
		Shape  []int64   `json:"shape"`
		SHA256 string    `json:"sha256_f32le"`
		First  []float64 `json:"first"`
		Sum    float64   `json:"sum"`
	} `json:"tensors"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestDequantizeZoo dequantizes every tensor of every zoo model and compares
// the sha256 of the float32 values with gguf-py's reference dequantizers.
func TestDequantizeZoo(t *testing.T) {
	t.Parallel()
	dir := zoo.Dir(t)
	goldens, err := filepath.Glob(filepath.Join(dir, "golden", "dequant-*.json"))
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no dequant goldens in %s", dir)
	}
	for _, gpath := range goldens {
		var g dequantGolden
		readJSON(t, gpath, &g)
		name := strings.TrimSuffix(g.Model, ".gguf")
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(filepath.Join(dir, "models", g.Model))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			byType := map[string]int{}
			for _, gt := range g.Tensors {
				tn, ok := f.Tensor(gt.Name)
				if !ok {
					t.Errorf("%s: tensor missing from file", gt.Name)
					continue
				}
				if tn.Type.String() != gt.Type {
					t.Errorf("%s: type %s, golden says %s", gt.Name, tn.Type, gt.Type)
					continue
				}
				if !equalDims(tn.Dims, gt.Shape) {
					t.Errorf("%s: dims %v, golden says %v", gt.Name, tn.Dims, gt.Shape)
					continue
				}
				checkTensor(t, tn, gt.SHA256, gt.First, gt.Sum)
				byType[gt.Type]++
			}
			t.Logf("%s: %d tensors checked %v", g.Model, len(g.Tensors), byType)
		})
	}
}

func equalDims(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func checkTensor(t *testing.T, tn *gguf.Tensor, wantHash string, first []float64, wantSum float64) {
	t.Helper()
	cols := int(tn.Dims[0])
	rows := int(tn.Elements()) / cols
	rs, err := quant.RowSize(tn.Type, cols)
	if err != nil {
		t.Errorf("%s: %v", tn.Name, err)
		return
	}
	if rs*rows != len(tn.Data) {
		t.Errorf("%s: %d bytes for %d rows of %d", tn.Name, len(tn.Data), rows, rs)
		return
	}
	h := sha256.New()
	row := make([]float32, cols)
	buf := make([]byte, 4*cols)
	var got []float64
	var sum float64
	for r := 0; r < rows; r++ {
		if err := quant.DequantizeRow(tn.Type, tn.Data[r*rs:(r+1)*rs], row); err != nil {
			t.Errorf("%s: %v", tn.Name, err)
			return
		}
		for i, v := range row {
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
			sum += float64(v)
			if len(got) < len(first) {
				got = append(got, float64(v))
			}
		}
		h.Write(buf)
	}
	if hash := hex.EncodeToString(h.Sum(nil)); hash != wantHash {
		t.Errorf("%s (%s, %v): sha256 %s, want %s; first %v want %v; sum %g want %g",
			tn.Name, tn.Type, tn.Dims, hash[:16], wantHash[:16], got, first, sum, wantSum)
	}
}

type quantizeRef struct {
	Cases []struct {
		Type  string    `json:"type"`
		Input []float32 `json:"input_f32"`
		Hex   string    `json:"bytes_hex"`
	} `json:"cases"`
}

// TestQuantizeReference checks the row quantizers against the bytes of
// ggml's reference quantizers.
func TestQuantizeReference(t *testing.T) {
	t.Parallel()
	var ref quantizeRef
	readJSON(t, zoo.Path(t, "golden", "quantize-reference.json"), &ref)
	if len(ref.Cases) == 0 {
		t.Fatal("no cases")
	}
	count := map[string]int{}
	for i, c := range ref.Cases {
		typ, ok := quant.ParseType(c.Type)
		if !ok {
			t.Errorf("case %d: unknown type %q", i, c.Type)
			continue
		}
		want, err := hex.DecodeString(c.Hex)
		if err != nil {
			t.Fatal(err)
		}
		size, err := quant.RowSize(typ, len(c.Input))
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, size)
		if err := quant.QuantizeRow(typ, c.Input, got); err != nil {
			t.Errorf("case %d %s: %v", i, typ, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("case %d %s: bytes differ at %d of %d (block %d)", i, typ, firstDiff(got, want), len(want), firstDiff(got, want)/typ.TypeSize())
			continue
		}
		count[c.Type]++
	}
	t.Logf("cases matched per type: %v", count)
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// TestMatrixZoo wraps every 2-D tensor of every zoo model as a Matrix and
// checks the product of its first rows with random activations against the
// dequantized float dot product.
func TestMatrixZoo(t *testing.T) {
	t.Parallel()
	dir := zoo.Dir(t)
	models, err := filepath.Glob(filepath.Join(dir, "models", "*.gguf"))
	if err != nil || len(models) == 0 {
		t.Fatalf("no models in %s", dir)
	}
	for _, path := range models {
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for i := range f.Tensors {
			tn := &f.Tensors[i]
			if len(tn.Dims) != 2 {
				continue
			}
			cols, rows := int(tn.Dims[0]), int(tn.Dims[1])
			m, err := quant.NewMatrix(tn.Type, rows, cols, tn.Data)
			if err != nil {
				t.Errorf("%s %s: %v", filepath.Base(path), tn.Name, err)
				continue
			}
			const n, r1 = 2, 3
			x := make([]float32, n*cols)
			for k := range x {
				x[k] = float32(math.Sin(float64(k)*0.37)) * 2
			}
			act := make([]byte, n*m.ActRowSize())
			quant.QuantizeActs(act, tn.Type, x, n, cols)
			out := make([]float32, n*rows)
			m.MulRows(out, rows, act, n, 0, r1)
			w := make([]float32, cols)
			a := make([]float32, cols)
			rs := m.RowBytes()
			for r := 0; r < r1; r++ {
				if err := quant.DequantizeRow(tn.Type, tn.Data[r*rs:(r+1)*rs], w); err != nil {
					t.Fatal(err)
				}
				for j := 0; j < n; j++ {
					as := m.ActRowSize()
					if err := quant.DequantizeRow(m.ActType(), act[j*as:(j+1)*as], a); err != nil {
						t.Fatal(err)
					}
					var want, mag float64
					for k := range w {
						p := float64(w[k]) * float64(a[k])
						want += p
						mag += math.Abs(p)
					}
					// The Q8_1 sum term is F16-rounded: allow 1e-3 of the
					// magnitude there, 1e-5 elsewhere.
					tol := 1e-5 * mag
					if m.ActType() == quant.Q8_1 {
						tol = 1e-3 * mag
					}
					if got := float64(out[j*rows+r]); math.Abs(got-want) > tol {
						t.Errorf("%s %s (%s) row %d tok %d: %g, dequantized %g", filepath.Base(path), tn.Name, tn.Type, r, j, got, want)
					}
				}
			}
			checked++
		}
		t.Logf("%s: %d matrices checked", filepath.Base(path), checked)
		f.Close()
	}
}
