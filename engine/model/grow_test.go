package model

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/geisten/geist/engine/zoo"
	"github.com/geisten/geist/quant"
)

// TestStateGrows: a cache started at 8 positions that may grow to 40
// gives, bit for bit, the logits of one sized 40 from the start (F16 and
// Q8_0 keys and values, a snapshot restored past its first size too), and
// refuses a pass past 40.
func TestStateGrows(t *testing.T) {
	m := openModel(t, zoo.Path(t, "models", "tiny-llama-Q4_0.gguf"))
	seq := make([]int32, 40)
	for i := range seq {
		seq[i] = int32(1 + i*7%(m.NVocab-1))
	}
	for _, kv := range []quant.Type{quant.F16, quant.Q8_0} {
		grow, err := m.NewState(StateOptions{Ctx: 8, MaxCtx: 40, Batch: 4, KVType: kv})
		if err != nil {
			t.Fatal(err)
		}
		defer grow.Close()
		full, err := m.NewState(StateOptions{Ctx: 40, Batch: 4, KVType: kv})
		if err != nil {
			t.Fatal(err)
		}
		defer full.Close()
		if grow.Ctx() != 40 || grow.Allocated() != 8 {
			t.Fatalf("%s: Ctx %d, Allocated %d, want 40 and 8", kv, grow.Ctx(), grow.Allocated())
		}
		for i := 0; i < len(seq); i += 4 {
			a, err := grow.Forward(seq[i:i+4], false)
			if err != nil {
				t.Fatal(err)
			}
			a = append([]float32(nil), a...)
			b, err := full.Forward(seq[i:i+4], false)
			if err != nil {
				t.Fatal(err)
			}
			for j := range a {
				if math.Float32bits(a[j]) != math.Float32bits(b[j]) {
					t.Fatalf("%s: position %d, logit %d: grown %v, sized once %v", kv, i+3, j, a[j], b[j])
				}
			}
		}
		if grow.Allocated() != 40 {
			t.Errorf("%s: Allocated %d after 40 positions", kv, grow.Allocated())
		}
		if _, err := grow.Forward(seq[:1], false); !errors.Is(err, ErrContextFull) {
			t.Errorf("%s: a pass past 40 positions: %v, want ErrContextFull", kv, err)
		}
		snap, err := full.Snapshot(30, nil)
		if err != nil {
			t.Fatal(err)
		}
		small, err := m.NewState(StateOptions{Ctx: 8, MaxCtx: 40, Batch: 4, KVType: kv})
		if err != nil {
			t.Fatal(err)
		}
		defer small.Close()
		if err := small.Restore(seq[:30], snap); err != nil {
			t.Fatalf("%s: restoring 30 positions into a cache of 8 that may grow: %v", kv, err)
		}
		if small.Len() != 30 || small.Allocated() < 30 {
			t.Errorf("%s: after the restore Len %d, Allocated %d", kv, small.Len(), small.Allocated())
		}
		// The same blob in pieces of odd sizes (the prompt cache's pages,
		// read in place) restores the same state, and the pieces are left
		// as they were.
		pieces := [][]byte{snap[:5], snap[5:5], snap[5:1000], snap[1000 : len(snap)-3], snap[len(snap)-3:]}
		kept := slices.Clone(pieces)
		inPieces, err := m.NewState(StateOptions{Ctx: 8, MaxCtx: 40, Batch: 4, KVType: kv})
		if err != nil {
			t.Fatal(err)
		}
		defer inPieces.Close()
		if err := inPieces.RestoreChunks(seq[:30], pieces); err != nil {
			t.Fatalf("%s: restoring in pieces: %v", kv, err)
		}
		a, _ := small.Snapshot(30, nil)
		b, _ := inPieces.Snapshot(30, nil)
		if !bytes.Equal(a, b) || !bytes.Equal(a, snap) {
			t.Errorf("%s: restored in pieces, the state differs", kv)
		}
		for i := range pieces {
			if len(pieces[i]) != len(kept[i]) {
				t.Errorf("%s: RestoreChunks changed the caller's pieces", kv)
			}
		}
	}
}
