package model

import (
	"strings"
	"testing"

	"github.com/geisten/geist/engine/gguf"
	"github.com/geisten/geist/engine/zoo"
)

// TestMetadataMustBePositive: a gemma3 file whose sliding_window or
// context_length is 0 (issue 33: both were accepted, the first as "no
// window", the second as a context of 0) is refused at load with an error
// naming the key.
func TestMetadataMustBePositive(t *testing.T) {
	for _, key := range []string{"gemma3.attention.sliding_window", "gemma3.context_length"} {
		f, err := gguf.Open(zoo.Path(t, "new", "models", "tiny-gemma3-Q4_0.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := ReadConfig(f); err != nil {
			t.Fatalf("the file as it is: %v", err)
		}
		found := false
		for i := range f.KV {
			if f.KV[i].Key == key {
				f.KV[i].Value, found = uint32(0), true
			}
		}
		if !found {
			t.Fatalf("the file has no %s", key)
		}
		_, err = ReadConfig(f)
		if want := `metadata "` + key + `" = 0 must be positive`; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s 0: %v, want an error containing %q", key, err, want)
		}
	}
}
