package engine

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"

	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/quant"
)

// MemInfo is where the memory available to a new process is read
// (MemAvailable, as free(1) shows it); tests point it elsewhere.
const MemInfo = "/proc/meminfo"

// ReadMemAvailable returns MemAvailable of a meminfo file in bytes.
func ReadMemAvailable(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "MemAvailable:" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil || kb < 0 {
				return 0, fmt.Errorf("%s: MemAvailable %q is not a number of kB", path, f[1])
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("%s has no MemAvailable line", path)
}

// Context sizing: what the KV cache may take is what is available less
// the weights and a reserve for the OS, the page cache of the stores and
// the other buffers: an eighth of what is available, at least 256 MiB.
const (
	minReserve = 256 << 20
	minAutoCtx = 512 // below this the model is of no use for a chat
	ctxStep    = 256 // the chosen context is a multiple of it
)

// ContextChoice is the context geist runs a model with and why.
type ContextChoice struct {
	Ctx       int    // the context chosen (the cap a request's num_ctx may reach)
	Trained   int    // the model's trained context
	MemoryCap int    // the most positions the memory left takes (0: not known)
	KVPerTok  int64  // bytes of KV cache (and attention scores) per position
	Bound     string // what bounds Ctx: "trained", "memory" or "ctx" (set by hand)
}

// String says what was chosen and what bounds it, for logs and --check.
func (c ContextChoice) String() string {
	switch c.Bound {
	case "memory":
		return fmt.Sprintf("%d tokens, bounded by the memory available (%s of KV cache per 1,000 tokens; the model was trained for %d)", c.Ctx, kib(c.KVPerTok*1000), c.Trained)
	case "ctx":
		return fmt.Sprintf("%d tokens, set by --ctx or ctx in the config (the model was trained for %d)", c.Ctx, c.Trained)
	}
	s := fmt.Sprintf("%d tokens, the model's trained context", c.Ctx)
	if c.MemoryCap > 0 {
		s += fmt.Sprintf(" (the memory available would hold %d positions; %s of KV cache per 1,000 tokens)", c.MemoryCap, kib(c.KVPerTok*1000))
	}
	return s
}

func kib(n int64) string {
	if n >= 10<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// KVBytesPerToken is what one position costs in the KV cache of kv type
// (F16 or Q8_0), with its attention scores. A sliding-window layer keeps
// a ring of its window whatever the context: it is counted in
// kvRingBytes, not here.
func KVBytesPerToken(c model.Config, kv quant.Type) int64 {
	return kvBytes(c, kv, false) + int64(c.NHead)*4
}

// kvBytes is one position's keys and values in the global layers (local:
// false) or in the sliding-window ones.
func kvBytes(c model.Config, kv quant.Type, local bool) int64 {
	var per int64
	for l := range c.NLayer {
		if c.OwnKV(l) && c.IsSWA(l) == local {
			per += int64(c.KVHeadsOf(l)) * int64(c.HeadDimOf(l)+c.HeadDimVOf(l))
		}
	}
	if kv == quant.Q8_0 {
		return per / 32 * 34
	}
	return per * 2
}

// kvRingBytes is the most the sliding-window layers' rings take: the
// window, a batch of up to 512 tokens and the slack of model.State's
// rings.
func kvRingBytes(c model.Config, kv quant.Type) int64 {
	if c.SWA == nil {
		return 0
	}
	return kvBytes(c, kv, true) * int64(c.Window+512+128)
}

// recStateBytes is what the recurrent layers' state takes whatever the
// context (model/recurrent.go, State.RecStateBytes): per layer its state
// four times (base, work, two checkpoints with their conv rows), the log
// of a verification pass and a self-draft's steps (33+16 tokens' inputs)
// and the conv ring of as many positions; one layer's state per tree
// depth (33); the batch buffers of a 512-token pass. Qwen3.5-0.8B: about
// 195 MiB (72 the four states, 33 the tree slots, 42 the batch buffers).
func recStateBytes(c model.Config) int64 {
	n := int64(c.RecLayers())
	if n == 0 {
		return 0
	}
	st, in, conv, taps := int64(c.RecState), int64(c.RecIn), int64(c.RecConv), int64(c.RecTaps)
	per := 4*st + 2*taps*conv + 49*in + (49+taps+8)*conv
	return 4 * (n*per + 33*st + 512*(in+2*conv+int64(c.RecOut)))
}

// ChooseContext picks the context for a model of shape c whose weights
// take weights bytes, with available bytes of memory (<= 0: unknown, the
// trained context is taken). The trained context is the most; the memory
// left after the weights and the reserve caps it, in steps of 256 and
// never below 512 (or the trained context, when that is less).
func ChooseContext(c model.Config, kv quant.Type, weights, available int64) ContextChoice {
	trained := c.CtxTrain
	if trained <= 0 {
		trained = 2048
	}
	ch := ContextChoice{Ctx: trained, Trained: trained, KVPerTok: KVBytesPerToken(c, kv), Bound: "trained"}
	if available <= 0 {
		return ch
	}
	left := available - weights - max(available/8, minReserve) - kvRingBytes(c, kv) - recStateBytes(c)
	ch.MemoryCap = int(max(left, 0) / ch.KVPerTok / ctxStep * ctxStep)
	if ch.MemoryCap < trained {
		ch.Ctx, ch.Bound = max(ch.MemoryCap, min(minAutoCtx, trained)), "memory"
	}
	return ch
}
