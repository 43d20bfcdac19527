package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/geisten/geist/engine/grammar"
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

// Load returns the grammar the flags ask for ("" for none), checked.
func (f *GrammarFlags) Load() (string, error) {
	switch {
	case f.schema != "" && f.gbnf != "":
		return "", Usagef("--json-schema and --grammar cannot both be enforced: give one")
	case f.schema == "json":
		return grammar.AnyJSON(), nil
	case f.schema != "":
		b, err := readBounded(f.schema, grammar.MaxSchemaBytes)
		if err != nil {
			return "", fmt.Errorf("--json-schema: %w", err)
		}
		src, err := grammar.FromFormat(b)
		if err != nil {
			return "", fmt.Errorf("--json-schema %s: %w", f.schema, err)
		}
		return src, nil
	case f.gbnf != "":
		b, err := readBounded(f.gbnf, grammar.MaxGrammarBytes)
		if err != nil {
			return "", fmt.Errorf("--grammar: %w", err)
		}
		if _, err := grammar.Parse(string(b)); err != nil {
			return "", fmt.Errorf("--grammar %s: %w", f.gbnf, err)
		}
		return string(b), nil
	}
	return "", nil
}

// Set reports whether the flags ask for a grammar.
func (f *GrammarFlags) Set() bool { return f.schema != "" || f.gbnf != "" }
