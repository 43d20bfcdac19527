package main

import (
	"context"
	"fmt"
	"time"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/convert"
)

const quantizeUsage = "quantize [-t N] IN OUT TYPE"

func cmdQuantize(ctx context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "quantize", quantizeUsage)
	threads := fs.IntP("threads", "t", 0, "threads (0: all CPUs)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 3 {
		return cli.Usagef("want IN OUT TYPE, got %d arguments (usage: geist %s)", fs.NArg(), quantizeUsage)
	}
	in, out := fs.Arg(0), fs.Arg(1)
	ft, err := convert.ParseFileType(fs.Arg(2))
	if err != nil {
		return cli.UsageError{Err: err}
	}
	if in == out {
		return cli.Usagef("IN and OUT are the same file")
	}
	start := time.Now()
	res, err := convert.Quantize(ctx, in, out, ft, *threads)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "wrote %s: %s, %d tensors (%s), %.1f MiB in %.1fs\n",
		out, ft, res.Tensors, res.TypeSummary(), float64(res.Bytes)/(1<<20), time.Since(start).Seconds())
	return nil
}
