package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"text/tabwriter"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/model"
)

type inspectInfo struct {
	File          string `json:"file"`
	FileBytes     int64  `json:"file_bytes"`
	GGUFVersion   uint32 `json:"gguf_version"`
	Name          string `json:"name,omitempty"`
	Architecture  string `json:"architecture"`
	Supported     bool   `json:"supported"`
	Problem       string `json:"problem,omitempty"`
	Layers        int    `json:"layers,omitempty"`
	ConvLayers    int    `json:"conv_layers,omitempty"`           // short-convolution layers (lfm2)
	RecLayers     int    `json:"recurrent_layers,omitempty"`      // gated DeltaNet (qwen35) or Mamba-2 (granitehybrid) layers
	RecKind       string `json:"recurrent_kind,omitempty"`        // which of the two
	RecStateBytes int64  `json:"recurrent_state_bytes,omitempty"` // one sequence's recurrent state (all those layers)
	MTPLayers     int    `json:"nextn_predict_layers,omitempty"`  // next-token prediction blocks the main pass leaves out
	LocalLayers   int    `json:"local_layers,omitempty"`          // sliding-window layers (gemma4)
	SlidingWindow int    `json:"sliding_window,omitempty"`        // their window
	SharedKV      int    `json:"shared_kv_layers,omitempty"`
	PerLayerEmbd  int    `json:"per_layer_embedding,omitempty"`
	Experts       int    `json:"expert_count,omitempty"` // mixture of experts (qwen3moe)
	// What a load under --repack-budget would repack, and leave in the
	// mapped file.
	Repack        string         `json:"repack,omitempty"`
	RepackedBytes int64          `json:"repacked_bytes,omitempty"`
	InFileBytes   int64          `json:"in_file_bytes,omitempty"`
	ExpertsUsed   int            `json:"expert_used_count,omitempty"` // experts run per token
	ExpertFFN     int            `json:"expert_feed_forward_length,omitempty"`
	NoRopeLayers  int            `json:"no_rope_layers,omitempty"` // layers without rope (smollm3)
	Embedding     int            `json:"embedding_length,omitempty"`
	FeedForward   int            `json:"feed_forward_length,omitempty"`
	Heads         int            `json:"heads,omitempty"`
	HeadsKV       int            `json:"heads_kv,omitempty"`
	HeadDim       int            `json:"head_dim,omitempty"`
	ContextLength int            `json:"context_length,omitempty"`
	RopeBase      float32        `json:"rope_base,omitempty"`
	TiedOutput    bool           `json:"tied_output"`
	Params        int64          `json:"params"`
	Tensors       int            `json:"tensors"`
	TensorTypes   map[string]int `json:"tensor_types"`
	VocabType     string         `json:"vocab_type"`
	VocabPre      string         `json:"vocab_pre,omitempty"`
	VocabSize     int            `json:"vocab_size"`
	ChatTemplate  bool           `json:"chat_template"`
	// An embedding model's: "embedding" (it does not generate text), its
	// pooling and the length of its vectors.
	Task         string `json:"task,omitempty"`
	Pooling      string `json:"pooling,omitempty"`
	EmbeddingDim int    `json:"embedding_dim,omitempty"`
}

func cmdInspect(_ context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "inspect", "inspect MODEL|-m MODEL [--json]")
	path := fs.StringP("model", "m", "", "GGUF model file or stored model name (or the argument)")
	asJSON := fs.Bool("json", false, "print JSON")
	repack := fs.String("repack-budget", engine.RepackAuto, "the budget to say what a load would repack under (as run's --repack-budget)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() == 1 && *path == "":
		p, err := cli.ModelStore(fs).Resolve(fs.Arg(0))
		if err != nil {
			return err
		}
		*path = p
	case fs.NArg() != 0 || *path == "":
		return cli.Usagef("want one MODEL, as the argument or -m, got %d arguments", fs.NArg())
	}
	avail, _ := engine.ReadMemAvailable(cmp.Or(os.Getenv("GEIST_MEMINFO"), engine.MemInfo))
	budget, err := engine.RepackBudget(*repack, avail)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	return inspect(e, *path, *asJSON, budget)
}

// inspect describes the file at path and what a load with the repack
// budget would repack (without repacking).
func inspect(e *cli.Env, path string, asJSON bool, budget int64) error {
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, _ := os.Stat(path)
	info := inspectInfo{File: path, FileBytes: st.Size(), GGUFVersion: f.Version, Architecture: f.Arch(),
		Tensors: len(f.Tensors), TensorTypes: map[string]int{}}
	info.Name, _ = f.String("general.name")
	info.VocabType, _ = f.String("tokenizer.ggml.model")
	info.VocabPre, _ = f.String("tokenizer.ggml.pre")
	if v, ok := f.Value("tokenizer.ggml.tokens"); ok {
		if toks, ok := v.([]string); ok {
			info.VocabSize = len(toks)
		}
	}
	_, info.ChatTemplate = f.String("tokenizer.chat_template")
	for i := range f.Tensors {
		t := &f.Tensors[i]
		info.Params += t.Elements()
		info.TensorTypes[t.Type.String()]++
	}
	if len(f.Tensors) == 0 {
		info.Problem = "vocab only: the file has no tensors"
	} else if model.IsEmbedding(f) {
		info.Task = "embedding"
		if enc, err := model.LoadEncoder(f); err != nil {
			info.Problem = err.Error()
		} else {
			info.Supported = true
			c := enc.EncoderConfig
			info.Pooling, info.EmbeddingDim = c.Pooling.String(), c.Dim
			info.Layers, info.Embedding, info.FeedForward, info.Heads, info.HeadsKV, info.HeadDim = c.NLayer, c.NEmbd, c.NFF, c.NHead, c.NHeadKV, c.HeadDim
			info.ContextLength, info.RopeBase = c.CtxTrain, c.RopeBase
			for _, local := range c.SWA {
				if local {
					info.LocalLayers++
				}
			}
			if info.LocalLayers > 0 {
				info.SlidingWindow = 2*c.Window + 1
			}
		}
	} else if m, err := model.LoadWith(f, model.LoadOptions{RepackBudget: budget, Plan: true}); err != nil {
		info.Problem = err.Error()
		if c, err := model.ReadConfig(f); err == nil {
			fillConfig(&info, c)
		}
	} else {
		info.Supported = true
		fillConfig(&info, m.Config)
		info.Repack, info.RepackedBytes, info.InFileBytes = m.Repack.String(), m.Repack.Packed, m.Repack.InFile
	}
	if asJSON {
		b, _ := json.MarshalIndent(info, "", "  ")
		fmt.Fprintf(e.Stdout, "%s\n", b)
		return nil
	}
	w := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(w, "%s\t%v\n", k, v) }
	row("file", fmt.Sprintf("%s (%s, GGUF v%d)", path, humanBytes(info.FileBytes), info.GGUFVersion))
	if info.Name != "" {
		row("name", info.Name)
	}
	row("architecture", info.Architecture)
	if info.Task == "embedding" {
		row("model type", fmt.Sprintf("embedding (%s pooling, vectors of %d): geist embed, POST /api/embed and /v1/embeddings; it does not generate text", info.Pooling, info.EmbeddingDim))
	}
	if info.Supported {
		row("supported", "yes")
	} else {
		row("supported", "no: "+info.Problem)
	}
	if info.Layers > 0 {
		switch {
		case info.ConvLayers > 0:
			row("layers", fmt.Sprintf("%d (%d short convolution, %d attention)", info.Layers, info.ConvLayers, info.Layers-info.ConvLayers))
		case info.RecLayers > 0:
			l := fmt.Sprintf("%d (%d %s with a state of %.2f MiB each, %d attention", info.Layers, info.RecLayers, info.RecKind, float64(info.RecStateBytes)/float64(info.RecLayers)/(1<<20), info.Layers-info.RecLayers)
			if info.MTPLayers > 0 {
				l += fmt.Sprintf("; %d next-token prediction block(s) not run by the main pass", info.MTPLayers)
			}
			row("layers", l+")")
		case info.LocalLayers > 0:
			l := fmt.Sprintf("%d (%d local with a %d-token window, %d global", info.Layers, info.LocalLayers, info.SlidingWindow, info.Layers-info.LocalLayers)
			if info.SharedKV > 0 {
				l += fmt.Sprintf("; the last %d read earlier layers' keys and values", info.SharedKV)
			}
			if info.PerLayerEmbd > 0 {
				l += fmt.Sprintf("; per-layer embeddings of %d", info.PerLayerEmbd)
			}
			row("layers", l+")")
		default:
			row("layers", info.Layers)
		}
		if info.NoRopeLayers > 0 {
			row("layers without rope", info.NoRopeLayers)
		}
		row("width", info.Embedding)
		if info.Experts > 0 {
			row("feed-forward", fmt.Sprintf("%d experts of %d, %d per token", info.Experts, info.ExpertFFN, info.ExpertsUsed))
		} else {
			row("feed-forward", info.FeedForward)
		}
		row("heads", fmt.Sprintf("%d query, %d key/value, size %d", info.Heads, info.HeadsKV, info.HeadDim))
		row("context length", info.ContextLength)
		row("rope base", info.RopeBase)
		row("tied output", info.TiedOutput)
	}
	row("parameters", fmt.Sprintf("%d (%.2fM)", info.Params, float64(info.Params)/1e6))
	if info.Repack != "" {
		row("repacking", info.Repack)
	}
	types := make([]string, 0, len(info.TensorTypes))
	for k := range info.TensorTypes {
		types = append(types, k)
	}
	sort.Strings(types)
	hist := ""
	for _, k := range types {
		hist += fmt.Sprintf("%s×%d ", k, info.TensorTypes[k])
	}
	row("tensors", fmt.Sprintf("%d: %s", info.Tensors, hist))
	vocab := info.VocabType
	if info.VocabPre != "" {
		vocab += " (pre " + info.VocabPre + ")"
	}
	row("vocabulary", fmt.Sprintf("%s, %d tokens", vocab, info.VocabSize))
	row("chat template", info.ChatTemplate)
	return w.Flush()
}

func fillConfig(info *inspectInfo, c model.Config) {
	info.Layers, info.Embedding, info.FeedForward = c.NLayer, c.NEmbd, c.NFF
	info.ConvLayers = c.ConvLayers()
	info.RecLayers = c.RecLayers()
	if info.RecLayers > 0 {
		info.RecKind, info.RecStateBytes = "gated DeltaNet", int64(info.RecLayers)*int64(c.RecState)*4
		if c.SSMLayerCount() > 0 {
			info.RecKind, info.RecStateBytes = "Mamba-2", c.SSMStateBytes()
		}
	}
	info.MTPLayers = c.NextN
	for l := range c.NLayer {
		if c.IsSWA(l) {
			info.LocalLayers++
		}
		if c.KVFrom != nil && c.KVFrom[l] != l {
			info.SharedKV++
		}
	}
	if info.LocalLayers > 0 {
		info.SlidingWindow = c.Window
	}
	info.PerLayerEmbd = c.PerLayerEmbd
	info.Experts, info.ExpertsUsed, info.ExpertFFN = c.Experts, c.ExpertsUsed, c.FFNExp
	for l := range c.NLayer {
		if c.NoRope != nil && c.NoRope[l] && !c.IsSSM(l) { // attention layers
			info.NoRopeLayers++
		}
	}
	info.Heads, info.HeadsKV, info.HeadDim = c.NHead, c.NHeadKV, c.HeadDim
	info.ContextLength, info.RopeBase, info.TiedOutput = c.CtxTrain, c.RopeBase, c.TiedOutput
}

func humanBytes(n int64) string { return models.ByteSize(n) }
