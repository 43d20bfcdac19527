package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"slices"
	"strings"
	"syscall"

	"github.com/geisten/geist/cmd/internal/cli"
)

// SIGHUP makes geist serve re-read its configuration: the file and the
// flags it was started with. It does not reopen logs, because geist
// writes none: it logs to stderr, which journald (or whatever supervises
// it) keeps and rotates. What a reload can change at once, it changes
// (log_level); every other change is named in one line as needing a
// restart, so an edit is never silently ignored; a file that no longer
// parses or validates is reported and the running configuration stays.

// watchHangups reloads on every SIGHUP until ctx ends.
func watchHangups(ctx context.Context, args []string, running *Config, level *slog.LevelVar, log *slog.Logger) {
	cur := *running // reload's own copy: serve reads running
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-hup:
				reload(args, &cur, level, log)
			case <-ctx.Done():
				return
			}
		}
	}()
}

// reload re-reads the configuration given by args and applies or
// reports what differs from running.
func reload(args []string, running *Config, level *slog.LevelVar, log *slog.Logger) {
	quiet := &cli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}
	next, err := ParseConfig(quiet, args)
	if err == nil {
		err = next.modelErr
	}
	if err != nil {
		log.Error("SIGHUP: the configuration was not reloaded; the running one stays", "err", cli.OneLine(err.Error()))
		return
	}
	changed := configDiff(running, &next)
	if slices.Contains(changed, "log_level") {
		level.Set(logLevel(next.LogLevel))
		log.Info("SIGHUP: log_level is now " + next.LogLevel)
		running.LogLevel = next.LogLevel
		changed = slices.DeleteFunc(changed, func(k string) bool { return k == "log_level" })
	}
	if len(changed) == 0 {
		log.Info("SIGHUP: configuration re-read; nothing else changed")
		return
	}
	log.Warn("SIGHUP: these changes take effect only after a restart (systemctl restart geist)", "keys", strings.Join(changed, ", "))
}

// configDiff lists the settings (by their configuration key) whose values
// differ between a and b.
func configDiff(a, b *Config) []string {
	fa, fb := map[string]string{}, map[string]string{}
	flatten(reflect.ValueOf(*a), "", fa)
	flatten(reflect.ValueOf(*b), "", fb)
	var out []string
	for k, v := range fa {
		if fb[k] != v {
			out = append(out, k)
		}
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// flatten records every setting of v (a configuration struct) under its
// dotted TOML key.
func flatten(v reflect.Value, prefix string, out map[string]string) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			out[strings.TrimSuffix(prefix, ".")] = "<none>"
			return
		}
		flatten(v.Elem(), prefix, out)
		return
	case reflect.Struct:
	default:
		out[strings.TrimSuffix(prefix, ".")] = fmt.Sprintf("%#v", v.Interface())
		return
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		switch {
		case name == "-":
		case f.Anonymous && name == "":
			flatten(v.Field(i), prefix, out)
		case name != "":
			flatten(v.Field(i), prefix+name+".", out)
		}
	}
}

func logLevel(s string) slog.Level {
	var lv slog.Level
	lv.UnmarshalText([]byte(s))
	return lv
}
