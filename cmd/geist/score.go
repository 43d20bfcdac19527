package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/geisten/geist/cmd/internal/cli"
)

func cmdScore(ctx context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "score", "score -m MODEL --tokens '[1,2,3]' [--top N]")
	var mf modelFlags
	mf.register(fs)
	tokens := fs.String("tokens", "", "token ids as a JSON array")
	top := fs.Int("top", 8, "most likely next tokens to list per position")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	var ids []int32
	if err := json.Unmarshal([]byte(*tokens), &ids); err != nil {
		return cli.Usagef("--tokens must be a JSON array of token ids: %v", err)
	}
	if len(ids) == 0 {
		return cli.Usagef("--tokens is empty")
	}
	if *top < 1 {
		return cli.Usagef("--top %d must be at least 1", *top)
	}
	if mf.ctx == 0 {
		mf.ctx = len(ids)
	}
	eng, err := mf.load()
	if err != nil {
		return err
	}
	defer eng.Close()
	for i, id := range ids {
		if id < 0 || int(id) >= eng.Model().NVocab {
			return fmt.Errorf("token %d (position %d) is outside the vocabulary of %d", id, i, eng.Model().NVocab)
		}
	}
	lp, err := eng.Score(ctx, ids, *top)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(map[string]any{"top_logprobs": lp})
	fmt.Fprintf(e.Stdout, "%s\n", b)
	return nil
}
