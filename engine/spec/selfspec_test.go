package spec

import (
	"testing"

	"github.com/geisten/geist/engine/model"
)

// TestSkipSetEncoding: a set survives encoding; malformed or foreign sets
// are refused with an error naming what is wrong.
func TestSkipSetEncoding(t *testing.T) {
	k := &SkipSet{Skip: model.Skip{Attn: []bool{false, true, true}, MLP: []bool{false, false, true}}, Agreement: 0.8, Cost: 0.5}
	b, _ := k.MarshalBinary()
	got, err := UnmarshalSkipSet(b, 3)
	if err != nil || got.String() != "attn 1,2 mlp 2" || got.Agreement != 0.8 || got.Cost != 0.5 {
		t.Fatalf("round trip: %v, %v", got, err)
	}
	none, _ := (&SkipSet{Skip: model.Skip{Attn: make([]bool, 3), MLP: make([]bool, 3)}, Agreement: 1, Cost: 1}).MarshalBinary()
	flags := append([]byte(nil), b...)
	flags[9] = 7
	nan := append([]byte(nil), b...)
	copy(nan[11:], []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f})
	for name, x := range map[string][]byte{"empty": nil, "magic": append([]byte("XSK1"), b[4:]...),
		"short": b[:len(b)-1], "long": append(b, 0), "flags": flags, "nan": nan, "nothing skipped": none} {
		if _, err := UnmarshalSkipSet(x, 3); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := UnmarshalSkipSet(b, 4); err == nil {
		t.Error("a set for 3 layers accepted for a model of 4")
	}
}
