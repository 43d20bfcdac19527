package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/quant"
)

func meminfo(t *testing.T, availKB int64) string {
	p := filepath.Join(t.TempDir(), "meminfo")
	body := "MemTotal:       25000000 kB\nMemFree:          100000 kB\nMemAvailable:   " + strconv.FormatInt(availKB, 10) + " kB\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestChooseContext: the context is the trained one while the memory left
// after the weights and the reserve takes it, the memory's cap (a multiple
// of 256) below that, never under 512; Q8_0 keys and values take about
// half as much; an unreadable meminfo leaves the trained context.
func TestChooseContext(t *testing.T) {
	// Llama 3.2 1B: 16 layers, 8 KV heads of 64, trained for 131072.
	c := model.Config{NLayer: 16, NHead: 32, NHeadKV: 8, HeadDim: 64, HeadDimV: 64, CtxTrain: 131072}
	const gib = 1 << 30
	weights := int64(773e6)
	per := KVBytesPerToken(c, quant.F16)
	if per != 16*8*128*2+32*4 {
		t.Fatalf("F16 KV per token %d", per)
	}
	for _, tc := range []struct {
		avail int64
		kv    quant.Type
		ctx   int
		bound string
	}{
		{24 * gib, quant.F16, 131072, "trained"},
		{3 * gib, quant.F16, 61952, "memory"}, // (3 GiB - 773 MB - 384 MiB) / 32896 bytes = 62183
		{3 * gib, quant.Q8_0, 116480, "memory"},
		{1 * gib, quant.F16, 768, "memory"},
		{800 << 20, quant.F16, 512, "memory"}, // nothing left: the floor
		{0, quant.F16, 131072, "trained"},
	} {
		ch := ChooseContext(c, tc.kv, weights, tc.avail)
		if ch.Ctx != tc.ctx || ch.Bound != tc.bound || ch.Ctx%256 != 0 {
			t.Errorf("%d GiB %s: %+v, want %d bounded by %s", tc.avail/gib, tc.kv, ch, tc.ctx, tc.bound)
		}
	}
	if got := ChooseContext(c, quant.F16, weights, 3*gib).String(); !strings.Contains(got, "bounded by the memory available") {
		t.Errorf("String %q", got)
	}
	if n, err := ReadMemAvailable(meminfo(t, 4<<20)); err != nil || n != 4*gib {
		t.Errorf("ReadMemAvailable: %d %v", n, err)
	}
	if _, err := ReadMemAvailable(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("a missing meminfo read")
	}
}

// TestNumCtx: an engine started with a context of 32 tokens on a machine
// with 4 GiB available (an injected meminfo) answers a request whose
// num_ctx asks for 160, growing its KV cache (the model is not loaded
// again), and a prompt too long names the tokens, the limit and what
// raises it.
func TestNumCtx(t *testing.T) {
	e := load(t, "stories260K-F32", Options{Ctx: 32, MemInfo: meminfo(t, 4<<20)})
	if e.Ctx() != 32 || e.MaxCtx() < 160 {
		t.Fatalf("Ctx %d, MaxCtx %d (choice %+v)", e.Ctx(), e.MaxCtx(), e.ContextChoice())
	}
	prompt := strings.Repeat("Once upon a time there was a little girl. ", 8)
	_, err := e.Generate(context.Background(), Request{Prompt: prompt, MaxTokens: 4, Sampling: greedy()})
	if !errors.Is(err, ErrPromptTooLong) || !strings.Contains(err.Error(), "num_ctx") || !strings.Contains(err.Error(), "--ctx") {
		t.Fatalf("a long prompt in 32 tokens: %v", err)
	}
	st, err := e.Generate(context.Background(), Request{Prompt: prompt, NumCtx: 160, MaxTokens: 4, Sampling: greedy()})
	if err != nil || st.PromptTokens <= 32 || st.GeneratedTokens != 4 {
		t.Fatalf("num_ctx 160: %+v %v", st, err)
	}
	if e.state.Allocated() < st.PromptTokens {
		t.Errorf("KV cache holds %d positions for a prompt of %d", e.state.Allocated(), st.PromptTokens)
	}
	_, err = e.Generate(context.Background(), Request{Prompt: strings.Repeat(prompt, 400), NumCtx: 1 << 30, Sampling: greedy()})
	if !errors.Is(err, ErrPromptTooLong) || !strings.Contains(err.Error(), "ctx in the config") {
		t.Errorf("a prompt past the cap: %v", err)
	}
}

// TestKVBytesPerTokenWindows: a position costs only the global layers'
// keys and values when the local layers keep rings (gemma3-1b: 4 global
// layers of 26, one KV head of 256).
func TestKVBytesPerTokenWindows(t *testing.T) {
	c := model.Config{NLayer: 26, NHead: 4, NHeadKV: 1, HeadDim: 256, HeadDimV: 256}
	c.Window, c.SWA, c.HeadDimSWA = 512, make([]bool, 26), 256
	for l := range c.SWA {
		c.SWA[l] = (l+1)%6 != 0
	}
	if got, want := KVBytesPerToken(c, quant.F16), int64(4*2*256*2+4*4); got != want {
		t.Errorf("KVBytesPerToken = %d, want %d (the 4 global layers)", got, want)
	}
	if got, want := kvRingBytes(c, quant.F16), int64(22*2*256*2*(512+640)); got != want {
		t.Errorf("kvRingBytes = %d, want %d", got, want)
	}
}

// TestKVBytesPerTokenMamba2: a Granite 4.0-H shape's context counts the
// keys and values of its attention layers only, and the memory left for
// them is less the Mamba-2 layers' states (four per layer whatever the
// context).
func TestKVBytesPerTokenMamba2(t *testing.T) {
	// Granite-4.0-H-1B-like: 40 layers, 4 of them attention (8 KV heads of
	// 64), Mamba-2 with 48 heads of 64 and a state of 128.
	c := model.Config{NLayer: 40, NHead: 24, NHeadKV: 8, HeadDim: 64, HeadDimV: 64, CtxTrain: 1 << 20}
	c.Rec = make([]bool, 40)
	for l := range c.Rec {
		c.Rec[l] = l%10 != 9
	}
	c.SSMInner, c.SSMState, c.SSMHeads, c.SSMGroups, c.SSMConv = 3072, 128, 48, 1, 4
	c.RecState = 3072 * 128
	if per := KVBytesPerToken(c, quant.F16); per != 4*8*128*2+24*4 {
		t.Fatalf("F16 KV per token %d, want the 4 attention layers' %d", per, 4*8*128*2+24*4)
	}
	state := c.SSMStateBytes()
	if want := int64(36) * 4 * (3072*128 + 3*(3072+2*128)); state != want {
		t.Fatalf("Mamba-2 state %d bytes, want %d", state, want)
	}
	const gib = 1 << 30
	ch := ChooseContext(c, quant.F16, 900e6, 2*gib)
	left := int64(2*gib) - 900e6 - max(int64(2*gib)/8, minReserve) - recStateBytes(c)
	if want := int(left / KVBytesPerToken(c, quant.F16) / ctxStep * ctxStep); ch.Ctx != want || ch.Bound != "memory" {
		t.Errorf("context %d (%s), want %d bounded by memory", ch.Ctx, ch.Bound, want)
	}
}

// TestKVBytesPerTokenQwen35: only the gated attention layers (one in four)
// hold keys and values per position; the DeltaNet layers' state is a fixed
// cost, taken from the memory before the context is sized (the 0.8B shape:
// 6 attention layers of 2 KV heads of 256, 18 DeltaNet layers of 1 MiB).
func TestKVBytesPerTokenQwen35(t *testing.T) {
	c := model.Config{NLayer: 24, NHead: 8, NHeadKV: 2, HeadDim: 256, HeadDimV: 256, Rec: make([]bool, 24)}
	for l := range c.Rec {
		c.Rec[l] = (l+1)%4 != 0
	}
	c.RecState, c.RecConv, c.RecTaps, c.RecIn, c.RecOut = 16*128*128, 3*2048, 3, 3*2048+32, 2048
	if got, want := KVBytesPerToken(c, quant.F16), int64(6*2*2*256*2+8*4); got != want {
		t.Errorf("KVBytesPerToken = %d, want %d (the 6 attention layers)", got, want)
	}
	r := recStateBytes(c)
	if r < 170<<20 || r > 220<<20 {
		t.Errorf("recStateBytes = %d MiB, want about 195", r>>20)
	}
	const gib = 1 << 30
	a := ChooseContext(c, quant.F16, 500<<20, 2*gib)
	c.Rec = nil
	b := ChooseContext(c, quant.F16, 500<<20, 2*gib)
	t.Logf("2 GiB available: %d positions with the DeltaNet layers, %d if all 24 layers attended", a.MemoryCap, b.MemoryCap)
	if 10*a.MemoryCap < 25*b.MemoryCap { // 4x the positions, less the state's fixed 195 MiB
		t.Errorf("a quarter of the layers attending: %d positions, all of them: %d", a.MemoryCap, b.MemoryCap)
	}
}
