package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/cmd/internal/models"
)

const modelsUsage = "models list|catalog|ps|rm [NAME...] [--json] [--models-dir DIR]"

func cmdModels(_ context.Context, e *cli.Env, args []string) error {
	return runModels(e, "models", modelsUsage, args)
}

// modelsAlias is geist list, ps or rm: geist models SUB as an Ollama user
// types it.
func modelsAlias(sub, usage string) func(context.Context, *cli.Env, []string) error {
	return func(_ context.Context, e *cli.Env, args []string) error {
		return runModels(e, sub, usage, append([]string{sub}, args...))
	}
}

func runModels(e *cli.Env, name, usage string, args []string) error {
	fs := cli.NewFlags(e, name, usage)
	asJSON := fs.Bool("json", false, "list: print a JSON array")
	fs.String("models-dir", "", cli.ModelsDirHelp())
	fs.String("data-dir", cli.DefaultDataDir(), "data directory (models are in its models/)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	store := cli.ModelStore(fs)
	sub := "list"
	if fs.NArg() > 0 {
		sub = fs.Arg(0)
	}
	switch sub {
	case "list", "ls":
		if fs.NArg() > 1 {
			return cli.Usagef("list takes no arguments")
		}
		return listModels(e, store, *asJSON)
	case "catalog":
		if fs.NArg() > 1 {
			return cli.Usagef("catalog takes no arguments")
		}
		return listCatalog(e, store, *asJSON)
	case "ps":
		if fs.NArg() > 1 {
			return cli.Usagef("ps takes no arguments")
		}
		return listLoaded(e, fs.Lookup("data-dir").Value.String(), *asJSON)
	case "rm", "remove":
		if fs.NArg() < 2 {
			return cli.Usagef("rm needs the NAME of a stored model (geist models list shows them)")
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
			fmt.Fprintf(e.Stdout, "removed %s\n", name)
		}
		return nil
	}
	hint := ""
	if sim := models.Similar(sub, []string{"list", "catalog", "ps", "rm"}, 1); len(sim) > 0 {
		hint = fmt.Sprintf("; did you mean %q?", sim[0])
	}
	return cli.Usagef("unknown models command %q%s (want list, catalog, ps or rm)", sub, hint)
}

func listModels(e *cli.Env, store *models.Store, asJSON bool) error {
	ms, err := store.List()
	if err != nil {
		return err
	}
	if asJSON {
		if ms == nil {
			ms = []models.Model{}
		}
		b, _ := json.MarshalIndent(ms, "", "  ")
		fmt.Fprintf(e.Stdout, "%s\n", b)
		return nil
	}
	if len(ms) == 0 {
		fmt.Fprintf(e.Stdout, "no models in %s; get one with\n  geist pull %s\n(geist models catalog lists the names geist pull takes)\n", store.Dir(), models.Catalog()[0].Name)
		return nil
	}
	w := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
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
			fmt.Fprintf(e.Stdout, "%s: geist cannot run it: %s\n", m.Name, cli.OneLine(m.Problem))
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
func listCatalog(e *cli.Env, store *models.Store, asJSON bool) error {
	cat := models.Catalog()
	if asJSON {
		b, _ := json.MarshalIndent(cat, "", "  ")
		fmt.Fprintf(e.Stdout, "%s\n", b)
		return nil
	}
	stored := map[string]bool{}
	if ms, err := store.List(); err == nil {
		for _, m := range ms {
			stored[m.Name] = true
		}
	}
	w := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
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
	fmt.Fprintln(e.Stdout, "geist pull NAME fetches one (FAMILY alone is its default size; -q8_0 etc. pick another quantization); the sources are Hugging Face files: geist models catalog --json shows them")
	return nil
}

// listLoaded prints what the geist serve of dataDir has loaded, asking
// it over the control socket (geist ps).
func listLoaded(e *cli.Env, dataDir string, asJSON bool) error {
	d := daemon.Dial(dataDir)
	if d == nil {
		if asJSON {
			fmt.Fprintln(e.Stdout, "[]")
			return nil
		}
		fmt.Fprintf(e.Stdout, "no geist serve is running for the data directory %s (nothing is loaded; --data-dir names another)\n", dataDir)
		return nil
	}
	st, err := d.Status()
	if err != nil {
		return err
	}
	if asJSON {
		b, _ := json.MarshalIndent([]daemon.Status{st}, "", "  ")
		fmt.Fprintf(e.Stdout, "%s\n", b)
		return nil
	}
	w := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSIZE\tCONTEXT\tSINCE\tPID\tPATH")
	if st.Model == "" {
		fmt.Fprintf(w, "(loading)\t-\t-\t-\t%d\t%s\n", st.PID, dash(st.Path))
	} else {
		fmt.Fprintf(w, "%s\t%s\t%d (up to %d)\t%s\t%d\t%s\n", st.Model, humanBytes(st.Size), st.Ctx, st.MaxCtx,
			st.Since.Local().Format("2006-01-02 15:04"), st.PID, st.Path)
	}
	return w.Flush()
}
