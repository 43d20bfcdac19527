package mqtt

import (
	"go/build"
	"strings"
	"testing"
)

// TestImports keeps the package's role: the MQTT contract knows nothing of
// the engine, storage or GPIO.
func TestImports(t *testing.T) {
	p, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range p.Imports {
		if strings.HasPrefix(imp, "github.com/geisten/geist") {
			t.Errorf("mqtt imports %s", imp)
		}
	}
}
