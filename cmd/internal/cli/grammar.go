package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/geisten/geist/engine/constraint"
)

// GrammarFlags are run's and bench's constrained-decoding flags.
type GrammarFlags struct {
	schema, gbnf string
}

func (f *GrammarFlags) Register(fs interface {
	StringVar(p *string, name, value, usage string)
}) {
	fs.StringVar(&f.schema, "json-schema", "", "FILE: a JSON schema the output must validate against (\"json\": any JSON)")
	fs.StringVar(&f.gbnf, "grammar", "", "FILE: a GBNF grammar the output must keep to (llama.cpp's notation)")
}

// readBounded reads at most limit bytes of path, refusing larger files.
func readBounded(path string, limit int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return b, nil
}

// Load returns the constraint the flags ask for, compiled (nil for none).
func (f *GrammarFlags) Load() (*constraint.Compiled, error) {
	var c constraint.Constraint
	switch {
	case f.schema != "" && f.gbnf != "":
		return nil, Usagef("--json-schema and --grammar cannot both be enforced: give one")
	case f.schema == "json":
		c.JSON = true
	case f.schema != "":
		b, err := readBounded(f.schema, constraint.MaxSchemaBytes)
		if err != nil {
			return nil, fmt.Errorf("--json-schema: %w", err)
		}
		c.Format = b
		con, err := c.Compile(context.Background(), nil)
		if err != nil {
			return nil, fmt.Errorf("--json-schema %s: %w", f.schema, err)
		}
		return con, nil
	case f.gbnf != "":
		b, err := readBounded(f.gbnf, constraint.MaxGrammarBytes)
		if err != nil {
			return nil, fmt.Errorf("--grammar: %w", err)
		}
		c.GBNF = string(b)
		con, err := c.Compile(context.Background(), nil)
		if err != nil {
			return nil, fmt.Errorf("--grammar %s: %w", f.gbnf, err)
		}
		return con, nil
	}
	return c.Compile(context.Background(), nil)
}

// Source is c's grammar text ("" for none).
func Source(c *constraint.Compiled) string {
	if c == nil {
		return ""
	}
	return c.Source
}

// Set reports whether the flags ask for a grammar.
func (f *GrammarFlags) Set() bool { return f.schema != "" || f.gbnf != "" }
