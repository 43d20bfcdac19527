package main

import (
	"context"
	"fmt"
	"runtime"

	"github.com/geisten/geist/cmd/internal/cli"
)

func cmdVersion(_ context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "version", "version")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(e.Stdout, "geist %s (%s, %s/%s)\n", cli.VersionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
