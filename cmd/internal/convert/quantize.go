package convert

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/quant"
)

// QuantizationVersion is general.quantization_version (GGML_QNT_VERSION).
const QuantizationVersion = 2

// Result describes a written file.
type Result struct {
	Tensors int
	Types   map[quant.Type]int // tensors per type
	Bytes   int64              // size of the file
}

// TypeSummary lists the tensor types as "F32×7 Q4_0×22 Q6_K×1".
func (r Result) TypeSummary() string {
	ts := make([]quant.Type, 0, len(r.Types))
	for t := range r.Types {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].String() < ts[j].String() })
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s×%d", t, r.Types[t])
	}
	return b.String()
}

func threadCount(n int) int {
	if n <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return n
}

// parallelRows calls f on consecutive row ranges covering [0, rows), from
// threads goroutines. The split does not change results: every row is
// computed independently.
func parallelRows(ctx context.Context, threads, rows int, f func(r0, r1 int) error) error {
	const chunk = 16
	var next atomic.Int64
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range min(threads, (rows+chunk-1)/chunk) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r0 := int(next.Add(chunk)) - chunk
				if r0 >= rows {
					return
				}
				err := ctx.Err()
				if err == nil {
					err = f(r0, min(r0+chunk, rows))
				}
				if err != nil {
					once.Do(func() { first = err })
					next.Store(int64(rows))
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// fileWriter streams a GGUF file to a temporary name and renames it to the
// final path when complete.
type fileWriter struct {
	path, tmp string
	fd        *os.File
	*gguf.StreamWriter
}

func createFile(path string, b *gguf.Builder, infos []gguf.TensorInfo) (*fileWriter, error) {
	tmp := path + ".tmp"
	fd, err := os.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	s, err := b.Stream(fd, infos)
	if err != nil {
		fd.Close()
		os.Remove(tmp)
		return nil, err
	}
	return &fileWriter{path, tmp, fd, s}, nil
}

// abort removes the partial file.
func (w *fileWriter) abort() {
	w.fd.Close()
	os.Remove(w.tmp)
}

// finish completes the file and returns its size.
func (w *fileWriter) finish() (int64, error) {
	if err := w.StreamWriter.Close(); err != nil {
		w.abort()
		return 0, err
	}
	st, err := w.fd.Stat()
	if err == nil {
		err = w.fd.Close()
	} else {
		w.fd.Close()
	}
	if err == nil {
		err = os.Rename(w.tmp, w.path)
	}
	if err != nil {
		os.Remove(w.tmp)
		return 0, fmt.Errorf("convert: %w", err)
	}
	return st.Size(), nil
}

// layerCount is <arch>.block_count, or one more than the highest blk.N.
func layerCount(f *gguf.File) int {
	if n, ok := f.Int(f.Arch() + ".block_count"); ok && n > 0 {
		return int(n)
	}
	n := 0
	for _, t := range f.Tensors {
		n = max(n, layerOf(t.Name)+1)
	}
	return n
}

// Quantize converts the GGUF file in (F32, F16 or BF16 weights) to a file
// of type ft at out, as llama-quantize does without an importance matrix:
// the same tensor types, the same bytes (ggml's reference quantizers), the
// same tensor order, the metadata copied with general.file_type and
// general.quantization_version set. threads <= 0 uses every CPU.
func Quantize(ctx context.Context, in, out string, ft FileType, threads int) (Result, error) {
	var res Result
	if _, err := ft.DefaultType(); err != nil {
		return res, err
	}
	f, err := gguf.Open(in)
	if err != nil {
		return res, err
	}
	defer f.Close()
	if n, ok := f.Int("split.count"); ok && n > 1 {
		return res, fmt.Errorf("convert: %s is one part of a split model (%d parts): merge it first", in, n)
	}
	infos := make([]gguf.TensorInfo, len(f.Tensors))
	names := make([]string, len(f.Tensors))
	for i, t := range f.Tensors {
		infos[i] = gguf.TensorInfo{Name: t.Name, Type: t.Type, Dims: t.Dims}
		names[i] = t.Name
	}
	types, err := Plan(infos, ft, f.Arch(), layerCount(f))
	if err != nil {
		return res, err
	}
	for i, t := range f.Tensors {
		if types[i] == t.Type {
			continue
		}
		switch t.Type {
		case quant.F32, quant.F16, quant.BF16:
		default:
			return res, fmt.Errorf("convert: tensor %q is %s: only F32, F16 and BF16 tensors can be quantized", t.Name, t.Type)
		}
		if !quant.CanQuantize(types[i]) {
			return res, fmt.Errorf("convert: tensor %q: quantization to %s is not supported", t.Name, types[i])
		}
	}

	b := gguf.NewBuilder()
	b.Alignment = f.Alignment
	for _, kv := range f.KV {
		switch kv.Key {
		case "split.no", "split.count", "split.tensors.count",
			"general.quantization_version", "general.file_type":
			// llama.cpp's gguf_set_val moves a key that exists to the end.
			continue
		}
		b.Set(kv.Key, kv.Value)
	}
	b.Set("general.quantization_version", uint32(QuantizationVersion))
	b.Set("general.file_type", uint32(ft))

	order := Order(names)
	outInfos := make([]gguf.TensorInfo, len(order))
	for k, i := range order {
		outInfos[k] = gguf.TensorInfo{Name: infos[i].Name, Type: types[i], Dims: infos[i].Dims}
	}
	w, err := createFile(out, b, outInfos)
	if err != nil {
		return res, err
	}
	threads = threadCount(threads)
	res.Types = map[quant.Type]int{}
	var buf []byte
	for k, i := range order {
		src := &f.Tensors[i]
		data := src.Data
		if oi := outInfos[k]; oi.Type != src.Type {
			size, err := oi.Size()
			if err != nil {
				w.abort()
				return res, err
			}
			if int64(cap(buf)) < size {
				buf = make([]byte, size)
			}
			data = buf[:size]
			if err := convertRows(ctx, threads, src.Type, src.Data, oi.Type, data, int(oi.Dims[0])); err != nil {
				w.abort()
				return res, fmt.Errorf("convert: tensor %q: %w", oi.Name, err)
			}
		}
		if err := w.Write(data); err != nil {
			w.abort()
			return res, err
		}
		res.Types[outInfos[k].Type]++
		res.Tensors++
	}
	if res.Bytes, err = w.finish(); err != nil {
		return res, err
	}
	return res, nil
}

// convertRows converts rows of n elements from type st in src to type dt
// in dst.
func convertRows(ctx context.Context, threads int, st quant.Type, src []byte, dt quant.Type, dst []byte, n int) error {
	sRow, err := quant.RowSize(st, n)
	if err != nil {
		return err
	}
	dRow, err := quant.RowSize(dt, n)
	if err != nil {
		return err
	}
	rows := len(dst) / dRow
	if len(src) != rows*sRow {
		return fmt.Errorf("%d bytes of %s data for %d rows of %d", len(src), st, rows, n)
	}
	return parallelRows(ctx, threads, rows, func(r0, r1 int) error {
		x := make([]float32, n)
		for r := r0; r < r1; r++ {
			if err := quant.DequantizeRow(st, src[r*sRow:(r+1)*sRow], x); err != nil {
				return err
			}
			if err := quant.QuantizeRow(dt, x, dst[r*dRow:(r+1)*dRow]); err != nil {
				return err
			}
		}
		return nil
	})
}
