package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

func versionString() string {
	v := version
	if v == "" {
		v = "devel"
		if bi, ok := debug.ReadBuildInfo(); ok {
			if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				v = bi.Main.Version
			}
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" && len(s.Value) >= 12 {
					v += "+" + s.Value[:12]
				}
			}
		}
	}
	return v
}

func cmdVersion(_ context.Context, e *env, args []string) error {
	fs := newFlags(e, "version", "version")
	if err := parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "geist %s (%s, %s/%s)\n", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
