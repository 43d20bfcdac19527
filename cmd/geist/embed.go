package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/embed"
)

const embedUsage = "embed -m MODEL [--dimensions N] [--no-truncate] [--ctx N] [-t N] TEXT... (- reads stdin)"

// embedOutput is what geist embed prints: the shape of Ollama's
// /api/embed answer, with the vectors' width.
type embedOutput struct {
	Model      string      `json:"model"`
	Dim        int         `json:"dim"`
	Embeddings [][]float32 `json:"embeddings"`
	Tokens     int         `json:"prompt_eval_count"`
}

func cmdEmbed(ctx context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "embed", embedUsage)
	path := fs.StringP("model", "m", "", "embedding model (name or GGUF): all-minilm, nomic-embed-text, bge-small, qwen3-embedding:0.6b, embeddinggemma")
	dims := fs.Int("dimensions", 0, "shorten each vector to its first N values, normalized again (0: all)")
	noTrunc := fs.Bool("no-truncate", false, "refuse a text longer than the context instead of cutting it")
	ctxLen := fs.Int("ctx", 0, "most tokens of one text (0: the model's context, at most 4096)")
	threads := fs.IntP("threads", "t", 0, "threads for matrix products (0: all)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return cli.Usagef("no model given (-m MODEL)")
	}
	if fs.NArg() == 0 {
		return cli.Usagef("want at least one TEXT (- reads stdin)")
	}
	texts := fs.Args()
	for i, t := range texts {
		if t == "-" {
			b, err := io.ReadAll(io.LimitReader(e.Stdin, 16<<20))
			if err != nil {
				return err
			}
			texts[i] = string(b)
		}
	}
	m, err := embed.Open(*path, embed.Options{Ctx: *ctxLen, Threads: *threads})
	if err != nil {
		if isTextModel(*path) {
			return fmt.Errorf("%w: geist run and geist chat generate text with it; geist embed needs an embedding model (all-minilm, nomic-embed-text, bge-small, qwen3-embedding:0.6b, embeddinggemma)", err)
		}
		return err
	}
	defer m.Close()
	res, err := m.Embed(ctx, embed.Request{Inputs: embed.Texts(texts, !*noTrunc).Inputs, Truncate: !*noTrunc, Dimensions: *dims})
	if err != nil {
		if errors.Is(err, embed.ErrInput) {
			return cli.UsageError{Err: err}
		}
		return err
	}
	b, err := json.Marshal(embedOutput{Model: daemon.ModelName(*path), Dim: len(res.Embeddings[0]), Embeddings: res.Embeddings, Tokens: res.Tokens})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "%s\n", b)
	return nil
}

// isTextModel reports whether path loads as a text-generation model's
// vocabulary without being an embedding model.
func isTextModel(path string) bool {
	_, f, err := engine.LoadVocab(path)
	if err != nil {
		return false
	}
	f.Close()
	return !daemon.IsEmbeddingFile(path)
}
