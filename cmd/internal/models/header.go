package models

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/quant"
)

// The header check: a pull reads the GGUF header (architecture, tensor
// types) from the first bytes it gets and refuses a model geist cannot run
// before it downloads the rest. From a server that takes ranges the first
// requests ask for the header's bytes only (1 MiB, then more while the
// tensor table has not come), so a refusal costs about the header; those
// bytes are the start of the partial file, so an accepted model costs no
// byte more.

const (
	firstProbe = 1 << 20  // the first request of a fresh pull asks for this much
	maxHeader  = 64 << 20 // a header is looked for in this many first bytes (a 262k-token vocabulary takes ~6 MiB)
)

// ErrUnsupported: the file's header shows a model geist cannot run.
var ErrUnsupported = errors.New("geist cannot run this model")

// checkHeader reads what b, the file's first bytes, say. done is true
// once the verdict is in: err nil (the model can run, as far as its
// header tells) or why not. done is false while b ends inside the
// header before anything disqualifying was seen.
func checkHeader(b []byte) (done bool, err error) {
	if len(b) < 4 {
		return false, nil
	}
	if string(b[:4]) != gguf.Magic {
		return true, fmt.Errorf("%w: it does not serve a GGUF file", ErrNotModel)
	}
	f, perr := gguf.ParseHeader(b)
	truncated := errors.Is(perr, gguf.ErrTruncated)
	if perr != nil && !truncated {
		return true, fmt.Errorf("%w: its header is unreadable: %v", ErrNotModel, strings.TrimPrefix(perr.Error(), "gguf: "))
	}
	if f == nil {
		return false, nil
	}
	embedding := model.IsEmbedding(f)
	if arch := f.Arch(); arch != "" && !embedding && !slices.Contains(model.SupportedArchs(), arch) {
		return true, fmt.Errorf("%w: its architecture is %q; geist runs %s, and embeds with %s", ErrUnsupported, arch, strings.Join(model.SupportedArchs(), ", "), strings.Join(model.EncoderArchs(), ", "))
	}
	if kind, _ := f.String("general.type"); kind == "adapter" {
		return true, fmt.Errorf("%w: it is an adapter (LoRA), not a model", ErrUnsupported)
	}
	if truncated {
		return false, nil
	}
	if len(f.Tensors) == 0 {
		return true, nil // a vocabulary file: geist tokenizes with it
	}
	bad := map[string]int{}
	for i := range f.Tensors {
		if t := f.Tensors[i].Type; !quant.Supported(t) {
			bad[t.String()]++
		}
	}
	if len(bad) > 0 {
		var types []string
		for t, n := range bad {
			types = append(types, fmt.Sprintf("%s (%d tensors)", t, n))
		}
		sort.Strings(types)
		return true, fmt.Errorf("%w: its tensors are of types geist has no kernels for: %s (take a Q4_0, Q4_K_M or Q8_0 file)", ErrUnsupported, strings.Join(types, ", "))
	}
	if embedding {
		if _, err := model.ReadEncoderConfig(f); err != nil {
			return true, fmt.Errorf("%w: %s", ErrUnsupported, strings.TrimPrefix(err.Error(), "model: "))
		}
		return true, nil
	}
	if _, err := model.ReadConfig(f); err != nil {
		return true, fmt.Errorf("%w: %s", ErrUnsupported, strings.TrimPrefix(err.Error(), "model: "))
	}
	return true, nil
}
