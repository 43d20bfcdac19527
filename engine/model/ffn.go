package model

import (
	"fmt"

	"github.com/geisten/geist/quant"
)

// The feed-forward block's weights, in the three layouts files use:
// separate gate, up and down; gate and up fused in one ffn_up of twice
// the width (phi3: gate rows first); or a router and experts (qwen3moe).

// split loads a fused 2-D weight (ggml dims [cols, sum(rows)]) as one
// matrix per part, each a view of its rows in the file: nothing is copied.
func (l loader) split(name string, cols int, rows ...int) ([]*quant.Matrix, error) {
	total := 0
	for _, r := range rows {
		total += r
	}
	t, err := l.tensor(name, cols, total)
	if err != nil {
		return nil, err
	}
	rs, err := quant.RowSize(t.Type, cols)
	if err != nil {
		return nil, fmt.Errorf("model: tensor %q: %w", name, err)
	}
	out := make([]*quant.Matrix, len(rows))
	off := 0
	for i, r := range rows {
		if out[i], err = quant.NewMatrix(t.Type, r, cols, t.Data[off*rs:(off+r)*rs]); err != nil {
			return nil, fmt.Errorf("model: tensor %q part %d: %w", name, i, err)
		}
		off += r
	}
	return out, nil
}

// experts loads a 3-D expert weight (ggml dims [cols, rows, n]) as one
// matrix per expert, each a view of its part of the file.
func (l loader) experts(name string, rows, cols, n int) ([]*quant.Matrix, error) {
	t, err := l.tensor(name, cols, rows, n)
	if err != nil {
		return nil, err
	}
	rs, err := quant.RowSize(t.Type, cols)
	if err != nil {
		return nil, fmt.Errorf("model: tensor %q: %w", name, err)
	}
	out := make([]*quant.Matrix, n)
	size := rows * rs
	for e := range out {
		if out[e], err = quant.NewMatrix(t.Type, rows, cols, t.Data[e*size:(e+1)*size]); err != nil {
			return nil, fmt.Errorf("model: tensor %q expert %d: %w", name, e, err)
		}
	}
	return out, nil
}

// feedForward loads layer i's feed-forward weights in whichever layout
// the file has.
func (l loader) feedForward(L *Layer, p string, c *Config, i int) (err error) {
	E, F := c.NEmbd, c.FFNOf(i)
	if c.Experts > 0 {
		if L.Router, err = l.matrix(p+"ffn_gate_inp.weight", c.Experts, E); err != nil {
			return err
		}
		if L.ExpGate, err = l.experts(p+"ffn_gate_exps.weight", c.FFNExp, E, c.Experts); err != nil {
			return err
		}
		if L.ExpUp, err = l.experts(p+"ffn_up_exps.weight", c.FFNExp, E, c.Experts); err != nil {
			return err
		}
		L.ExpDown, err = l.experts(p+"ffn_down_exps.weight", E, c.FFNExp, c.Experts)
		return err
	}
	if _, ok := l.f.Tensor(p + "ffn_gate.weight"); !ok {
		// Fused: ffn_up holds the gate rows, then the up rows.
		ws, err := l.split(p+"ffn_up.weight", E, F, F)
		if err != nil {
			return err
		}
		L.Wgate, L.Wup = ws[0], ws[1]
	} else {
		if L.Wgate, err = l.matrix(p+"ffn_gate.weight", F, E); err != nil {
			return err
		}
		if L.Wup, err = l.matrix(p+"ffn_up.weight", F, E); err != nil {
			return err
		}
	}
	L.Wdown, err = l.matrix(p+"ffn_down.weight", E, F)
	return err
}
