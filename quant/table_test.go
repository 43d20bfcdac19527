package quant

import (
	"reflect"
	"testing"

	"github.com/geisten/geist/neon"
)

// TestOneTypeTable: a weight type is registered once in quant's type
// table and once in neon.Weights, and the two agree: every type neon
// multiplies is known here with the same block bytes and converts both
// ways, as does its activation type; every type that converts is a weight
// or an activation type of neon.Weights; and every weight kernel field of
// neon.Kernels (one-row, row-group, tile, packed layout) is selected by
// exactly one line of neon.Weights, so a kernel field without its line
// fails here.
func TestOneTypeTable(t *testing.T) {
	t.Parallel()
	named := map[Type]bool{}
	for _, w := range neon.Weights {
		wt, ok := ParseType(w.Weight)
		at, ok2 := ParseType(w.Act)
		if !ok || !ok2 {
			t.Errorf("neon.Weights: %s × %s: not in quant's type table", w.Weight, w.Act)
			continue
		}
		named[wt], named[at] = true, true
		if !Supported(wt) || ActType(wt) != at {
			t.Errorf("%s: Supported %v, activations %s, want %s", wt, Supported(wt), ActType(wt), at)
		}
		if wt.TypeSize() != w.WSize || at.TypeSize() != w.ASize {
			t.Errorf("%s × %s: neon's blocks are %d and %d bytes, quant's %d and %d", wt, at, w.WSize, w.ASize, wt.TypeSize(), at.TypeSize())
		}
		for _, x := range []Type{wt, at} {
			if typeTraits[x].dequant == nil || typeTraits[x].quant == nil {
				t.Errorf("%s: no reference conversion in quant's type table", x)
			}
		}
		if w.Dot(neon.Generic()) == nil {
			t.Errorf("%s: no generic one-row kernel", wt)
		}
	}
	for x, tr := range typeTraits {
		if (tr.dequant != nil || tr.quant != nil) && !named[x] {
			t.Errorf("%s converts but is neither a weight nor an activation type of neon.Weights", x)
		}
	}
	// One Kernels value whose weight kernel fields each say which they are.
	var k neon.Kernels
	kv := reflect.ValueOf(&k).Elem()
	dotT, rowsT := reflect.TypeFor[neon.DotFunc](), reflect.TypeFor[neon.RowsFunc]()
	tileT, packT := reflect.TypeFor[*neon.Tile](), reflect.TypeFor[*neon.Packing]()
	hit := -1
	fields := map[int]int{} // field index: Weights lines selecting it
	tiles, packs := map[*neon.Tile]int{}, map[*neon.Packing]int{}
	for i := range kv.NumField() {
		f := kv.Field(i)
		switch f.Type() {
		case dotT:
			f.Set(reflect.ValueOf(neon.DotFunc(func([]float32, []byte, []byte, int, int, int) { hit = i })))
		case rowsT:
			f.Set(reflect.ValueOf(neon.RowsFunc(func([]float32, int, []byte, int, []byte, int, int, int) { hit = i })))
		case tileT:
			tl := &neon.Tile{}
			f.Set(reflect.ValueOf(tl))
			tiles[tl] = i
		case packT:
			p := &neon.Packing{}
			f.Set(reflect.ValueOf(p))
			packs[p] = i
		default:
			continue
		}
		fields[i] = 0
	}
	for _, w := range neon.Weights {
		hit = -1
		w.Dot(&k)(nil, nil, nil, 0, 0, 0)
		fields[hit]++
		if w.Rows != nil {
			hit = -1
			w.Rows(&k)(nil, 0, nil, 0, nil, 0, 0, 0)
			fields[hit]++
		}
		if w.Tile != nil {
			fields[tiles[w.Tile(&k)]]++
		}
		if w.Pack != nil {
			fields[packs[w.Pack(&k)]]++
		}
	}
	for i, n := range fields {
		if n != 1 {
			t.Errorf("neon.Kernels.%s is selected by %d lines of neon.Weights, want 1", kv.Type().Field(i).Name, n)
		}
	}
}
