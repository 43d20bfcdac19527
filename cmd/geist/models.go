package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/geisten/geist/cmd/internal/models"
)

const modelsUsage = "models list|catalog|ps|rm [NAME...] [--json] [--models-dir DIR]"

// modelsDirHelp describes --models-dir; the store lives in the data
// directory unless the flag moves it.
func modelsDirHelp() string {
	return fmt.Sprintf("directory of stored models (default: DATA-DIR/models, %s)", filepath.Join(defaultDataDir(), "models"))
}

// modelStore is the store a command's flags point at: --models-dir, else
// the models directory of --data-dir (when the command has it), else of
// the default data directory.
func modelStore(fs *pflag.FlagSet) *models.Store {
	if f := fs.Lookup("models-dir"); f != nil && f.Value.String() != "" {
		return models.New(f.Value.String())
	}
	if f := fs.Lookup("data-dir"); f != nil && f.Value.String() != "" {
		return models.New(filepath.Join(f.Value.String(), "models"))
	}
	return models.New(filepath.Join(defaultDataDir(), "models"))
}

// modelRefError is a model name that names no stored model (and no file).
type modelRefError struct{ err error }

func (m modelRefError) Error() string { return m.err.Error() }
func (m modelRefError) Unwrap() error { return m.err }

// modelFlagNames are the flags that take a model file, in every command.
var modelFlagNames = []string{"model", "draft-model", "embed-model"}

// addModelsDir gives every command that takes a model (-m) the
// --models-dir flag its model names are looked up in. parse calls it
// before parsing.
func addModelsDir(fs *pflag.FlagSet) {
	if fs.Lookup("model") != nil && fs.Lookup("models-dir") == nil {
		fs.String("models-dir", "", modelsDirHelp())
	}
}

// resolveModelFlags turns a stored model's name given to -m (or
// --draft-model) into its file, for every command: parse calls it after
// parsing. A value that is a file stays as it is.
func resolveModelFlags(fs *pflag.FlagSet) error {
	for _, name := range modelFlagNames {
		f := fs.Lookup(name)
		if f == nil || f.Value.String() == "" {
			continue
		}
		p, err := modelStore(fs).Resolve(f.Value.String())
		if err != nil {
			return modelRefError{err}
		}
		if p != f.Value.String() {
			if err := f.Value.Set(p); err != nil {
				return err
			}
		}
	}
	return nil
}

func cmdModels(_ context.Context, e *env, args []string) error {
	return runModels(e, "models", modelsUsage, args)
}

// modelsAlias is geist list, ps or rm: geist models SUB as an Ollama user
// types it.
func modelsAlias(sub, usage string) func(context.Context, *env, []string) error {
	return func(_ context.Context, e *env, args []string) error {
		return runModels(e, sub, usage, append([]string{sub}, args...))
	}
}

func runModels(e *env, name, usage string, args []string) error {
	fs := newFlags(e, name, usage)
	asJSON := fs.Bool("json", false, "list: print a JSON array")
	fs.String("models-dir", "", modelsDirHelp())
	fs.String("data-dir", defaultDataDir(), "data directory (models are in its models/)")
	if err := parse(fs, args); err != nil {
		return err
	}
	store := modelStore(fs)
	sub := "list"
	if fs.NArg() > 0 {
		sub = fs.Arg(0)
	}
	switch sub {
	case "list", "ls":
		if fs.NArg() > 1 {
			return usagef("list takes no arguments")
		}
		return listModels(e, store, *asJSON)
	case "catalog":
		if fs.NArg() > 1 {
			return usagef("catalog takes no arguments")
		}
		return listCatalog(e, store, *asJSON)
	case "ps":
		if fs.NArg() > 1 {
			return usagef("ps takes no arguments")
		}
		return listLoaded(e, fs.Lookup("data-dir").Value.String(), *asJSON)
	case "rm", "remove":
		if fs.NArg() < 2 {
			return usagef("rm needs the NAME of a stored model (geist models list shows them)")
		}
		for _, ref := range fs.Args()[1:] {
			name := ref
			if strings.ContainsRune(ref, os.PathSeparator) {
				n, ok := store.NameOf(ref)
				if !ok {
					return fmt.Errorf("%s is not in the model store %s: geist removes stored models only", ref, store.Dir())
				}
				name = n
			}
			if err := store.Remove(name); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "removed %s\n", name)
		}
		return nil
	}
	hint := ""
	if sim := models.Similar(sub, []string{"list", "catalog", "ps", "rm"}, 1); len(sim) > 0 {
		hint = fmt.Sprintf("; did you mean %q?", sim[0])
	}
	return usagef("unknown models command %q%s (want list, catalog, ps or rm)", sub, hint)
}

func listModels(e *env, store *models.Store, asJSON bool) error {
	ms, err := store.List()
	if err != nil {
		return err
	}
	if asJSON {
		if ms == nil {
			ms = []models.Model{}
		}
		b, _ := json.MarshalIndent(ms, "", "  ")
		fmt.Fprintf(e.stdout, "%s\n", b)
		return nil
	}
	if len(ms) == 0 {
		fmt.Fprintf(e.stdout, "no models in %s; get one with\n  geist pull %s\n(geist models catalog lists the names geist pull takes)\n", store.Dir(), models.Catalog()[0].Name)
		return nil
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSIZE\tTYPE\tARCH\tQUANT\tPARAMS\tPATH")
	for _, m := range ms {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, humanBytes(m.Size), m.Type,
			dash(m.Architecture), dash(m.Quantization), dash(m.ParameterSize), m.Path)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, m := range ms {
		if m.Problem != "" {
			fmt.Fprintf(e.stdout, "%s: geist cannot run it: %s\n", m.Name, oneLine(m.Problem))
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// listCatalog prints the names geist pull takes, marking those stored.
func listCatalog(e *env, store *models.Store, asJSON bool) error {
	cat := models.Catalog()
	if asJSON {
		b, _ := json.MarshalIndent(cat, "", "  ")
		fmt.Fprintf(e.stdout, "%s\n", b)
		return nil
	}
	stored := map[string]bool{}
	if ms, err := store.List(); err == nil {
		for _, m := range ms {
			stored[m.Name] = true
		}
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tARCH\tQUANT\tSTORED\tABOUT")
	for _, c := range cat {
		have := ""
		if stored[c.Name] {
			have = "yes"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", c.Name, c.Architecture, c.Quantization, dash(have), c.About)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, "geist pull NAME fetches one (FAMILY alone is its default size; -q8_0 etc. pick another quantization); the sources are Hugging Face files: geist models catalog --json shows them")
	return nil
}

// listLoaded prints what the geist serve of dataDir has loaded, asking
// it over the control socket (geist ps).
func listLoaded(e *env, dataDir string, asJSON bool) error {
	d := dialDaemon(dataDir)
	if d == nil {
		if asJSON {
			fmt.Fprintln(e.stdout, "[]")
			return nil
		}
		fmt.Fprintf(e.stdout, "no geist serve is running for the data directory %s (nothing is loaded; --data-dir names another)\n", dataDir)
		return nil
	}
	st, err := d.Status()
	if err != nil {
		return err
	}
	if asJSON {
		b, _ := json.MarshalIndent([]daemonStatus{st}, "", "  ")
		fmt.Fprintf(e.stdout, "%s\n", b)
		return nil
	}
	w := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSIZE\tCONTEXT\tSINCE\tPID\tPATH")
	if st.Model == "" {
		fmt.Fprintf(w, "(loading)\t-\t-\t-\t%d\t%s\n", st.PID, dash(st.Path))
	} else {
		fmt.Fprintf(w, "%s\t%s\t%d (up to %d)\t%s\t%d\t%s\n", st.Model, humanBytes(st.Size), st.Ctx, st.MaxCtx,
			st.Since.Local().Format("2006-01-02 15:04"), st.PID, st.Path)
	}
	return w.Flush()
}
