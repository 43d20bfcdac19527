package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/convert"
	"github.com/geisten/geist/engine/chat"
)

const synthUsage = "synth --shape NAME --type TYPE -o FILE [--vocab GGUF] [--template FILE] [--seed N] [--exact] [-t N]"

func cmdSynth(ctx context.Context, e *cli.Env, args []string) error {
	return runSynth(ctx, e, args, convert.LookupShape)
}

// runSynth is cmdSynth with the shape table as a parameter (tests add
// small shapes).
func runSynth(ctx context.Context, e *cli.Env, args []string, lookup func(string) (convert.Shape, error)) error {
	fs := cli.NewFlags(e, "synth", synthUsage)
	var names []string
	for _, s := range convert.Shapes() {
		names = append(names, s.Name)
	}
	shapeName := fs.String("shape", "", "model shape: "+strings.Join(names, ", "))
	typeName := fs.String("type", "", "file type: Q4_0, Q4_K_M, Q8_0 (also F16, BF16, F32)")
	out := fs.StringP("output", "o", "", "GGUF file to write")
	seed := fs.Uint64("seed", 1, "random seed: the same seed gives the same file")
	exact := fs.Bool("exact", false, "quantize a fresh normal row for every row (slow for Q4_K_M) instead of drawing quantized blocks from a pool")
	threads := fs.IntP("threads", "t", 0, "threads (0: all CPUs)")
	vocab := fs.String("vocab", "", "GGUF file whose tokenizer (vocabulary, merges, token types, pre-tokenizer, special tokens, chat template) the file gets, with the embedding and head sized to it")
	tmplFile := fs.String("template", "", "file holding the chat template to write (replaces the vocabulary's)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 0:
		return cli.Usagef("unexpected arguments %q (usage: geist %s)", fs.Args(), synthUsage)
	case *shapeName == "":
		return cli.Usagef("no shape given (--shape %s)", strings.Join(names, "|"))
	case *typeName == "":
		return cli.Usagef("no type given (--type Q4_0|Q4_K_M|Q8_0)")
	case *out == "":
		return cli.Usagef("no output file given (-o FILE)")
	}
	shape, err := lookup(*shapeName)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	ft, err := convert.ParseFileType(*typeName)
	if err != nil {
		return cli.UsageError{Err: err}
	}
	o := convert.SynthOptions{Seed: *seed, Threads: *threads, Exact: *exact}
	if *tmplFile != "" {
		if o.Template, err = readTemplate(*tmplFile); err != nil {
			return err
		}
	}
	tmplFrom := "its family's"
	if *vocab != "" {
		if o.Vocab, err = convert.ReadVocab(*vocab); err != nil {
			return err
		}
		shape.Vocab, shape.Text = o.Vocab.Tokens, o.Vocab.Tokens
		if o.Vocab.Template {
			tmplFrom = *vocab + "'s"
		}
	}
	if o.Template != "" {
		tmplFrom = *tmplFile + "'s"
	}
	start := time.Now()
	res, err := convert.Synth(ctx, shape, ft, *out, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "wrote %s: %s %s, %d weights, %d tensors (%s), %.1f MiB in %.1fs\n",
		*out, shape.Name, ft, shape.Params(), res.Tensors, res.TypeSummary(),
		float64(res.Bytes)/(1<<20), time.Since(start).Seconds())
	if *vocab != "" || *tmplFile != "" {
		from := "synthetic"
		if *vocab != "" {
			from = *vocab + "'s"
		}
		fmt.Fprintf(e.Stdout, "tokenizer: %s (%d tokens), chat template: %s\n", from, shape.Vocab, tmplFrom)
	}
	return nil
}

// readTemplate reads a chat template file of at most the template
// compiler's source limit.
func readTemplate(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	limit := chat.DefaultLimits.Source
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	if len(b) > limit {
		return "", fmt.Errorf("%s: a chat template of more than %d bytes", path, limit)
	}
	if len(b) == 0 {
		return "", fmt.Errorf("%s: empty chat template", path)
	}
	return string(b), nil
}
