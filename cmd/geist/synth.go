package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/geisten/geist/cmd/internal/convert"
)

const synthUsage = "synth --shape NAME --type TYPE -o FILE [--seed N] [--exact] [-t N]"

func cmdSynth(ctx context.Context, e *env, args []string) error {
	return runSynth(ctx, e, args, convert.LookupShape)
}

// runSynth is cmdSynth with the shape table as a parameter (tests add
// small shapes).
func runSynth(ctx context.Context, e *env, args []string, lookup func(string) (convert.Shape, error)) error {
	fs := newFlags(e, "synth", synthUsage)
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
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 0:
		return usagef("unexpected arguments %q (usage: geist %s)", fs.Args(), synthUsage)
	case *shapeName == "":
		return usagef("no shape given (--shape %s)", strings.Join(names, "|"))
	case *typeName == "":
		return usagef("no type given (--type Q4_0|Q4_K_M|Q8_0)")
	case *out == "":
		return usagef("no output file given (-o FILE)")
	}
	shape, err := lookup(*shapeName)
	if err != nil {
		return usageError{err}
	}
	ft, err := convert.ParseFileType(*typeName)
	if err != nil {
		return usageError{err}
	}
	start := time.Now()
	res, err := convert.Synth(ctx, shape, ft, *out, convert.SynthOptions{Seed: *seed, Threads: *threads, Exact: *exact})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote %s: %s %s, %d weights, %d tensors (%s), %.1f MiB in %.1fs\n",
		*out, shape.Name, ft, shape.Params(), res.Tensors, res.TypeSummary(),
		float64(res.Bytes)/(1<<20), time.Since(start).Seconds())
	return nil
}
