package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/engine"
)

func cmdTokenize(_ context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "tokenize", "tokenize -m MODEL [--no-special] [--no-parse-special] TEXT")
	path := fs.StringP("model", "m", "", "GGUF model or vocab file")
	noSpecial := fs.Bool("no-special", false, "add no BOS/EOS")
	noParse := fs.Bool("no-parse-special", false, "treat special-token text as plain text")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *path == "" {
		return cli.Usagef("no model given (-m MODEL)")
	}
	if fs.NArg() != 1 {
		return cli.Usagef("want exactly one TEXT argument (- reads stdin), got %d", fs.NArg())
	}
	text := fs.Arg(0)
	if text == "-" {
		b, err := io.ReadAll(e.Stdin)
		if err != nil {
			return err
		}
		text = string(b)
	}
	tok, f, err := engine.LoadVocab(*path)
	if err != nil {
		return err
	}
	defer f.Close()
	ids := tok.Encode(text, !*noSpecial, !*noParse)
	if ids == nil {
		ids = []int32{}
	}
	b, _ := json.Marshal(ids)
	fmt.Fprintf(e.Stdout, "%s\n", b)
	return nil
}
