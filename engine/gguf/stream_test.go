package gguf

import (
	"bytes"
	"testing"

	"github.com/geisten/geist/quant"
)

// TestStreamMatchesBuilder: streaming the same metadata and tensors gives
// the same bytes as Builder.WriteTo, and misuse is reported.
func TestStreamMatchesBuilder(t *testing.T) {
	infos := []TensorInfo{
		{"a.weight", quant.F32, []int64{3}},
		{"b.weight", quant.Q8_0, []int64{64, 2}},
		{"c.weight", quant.F16, []int64{5, 1}},
	}
	data := [][]byte{make([]byte, 12), make([]byte, 4*34), make([]byte, 10)}
	for i := range data {
		for j := range data[i] {
			data[i][j] = byte(i*31 + j)
		}
	}
	meta := func() *Builder {
		b := NewBuilder()
		b.Set("general.architecture", "llama")
		b.Set("x.list", []string{"p", "q"})
		return b
	}
	want := meta()
	for i, ti := range infos {
		if err := want.AddTensor(ti.Name, ti.Type, ti.Dims, data[i]); err != nil {
			t.Fatal(err)
		}
	}
	var wb, sb bytes.Buffer
	if _, err := want.WriteTo(&wb); err != nil {
		t.Fatal(err)
	}
	s, err := meta().Stream(&sb, infos)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err == nil {
		t.Error("Close before all tensors: no error")
	}
	if err := s.Write(data[1]); err == nil {
		t.Error("Write with the wrong size: no error")
	}
	for _, d := range data {
		if err := s.Write(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Write(data[0]); err == nil {
		t.Error("Write past the table: no error")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wb.Bytes(), sb.Bytes()) {
		t.Fatalf("stream and builder differ: %d vs %d bytes", sb.Len(), wb.Len())
	}
	if _, err := Parse(sb.Bytes()); err != nil {
		t.Fatal(err)
	}
	bad := []TensorInfo{{"x", quant.Q4_0, []int64{33}}}
	if _, err := meta().Stream(&sb, bad); err == nil {
		t.Error("row length 33 as Q4_0: no error")
	}
	dup := []TensorInfo{infos[0], infos[0]}
	if _, err := meta().Stream(&sb, dup); err == nil {
		t.Error("duplicate names: no error")
	}
}
