package sandbox

import (
	"reflect"
	"testing"
)

// TestGuardKnowsEngine fails when an upgrade of the template engine
// renames the node types the guard rewrites (Compile would then refuse
// every template, which the other tests also show).
func TestGuardKnowsEngine(t *testing.T) {
	t.Parallel()
	if err := loadNodeTypes(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"filterExpr", "nameExpr"} {
		found := false
		for _, typ := range []reflect.Type{nodeTypes.filterExpr, nodeTypes.nameExpr} {
			found = found || typ.Elem().Name() == name
		}
		if !found {
			t.Errorf("node type %s not found", name)
		}
	}
}
