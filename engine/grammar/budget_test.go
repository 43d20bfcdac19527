package grammar

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

func heapInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestCompileBudget: the schemas and grammars of issue 33 that took
// seconds to minutes and gigabytes are refused with ErrTooLarge naming
// the limit and the rule, within a bound on memory (the budgets are
// counted as the structures grow); those just under the budgets and Home
// Assistant's tools compile.
func TestCompileBudget(t *testing.T) {
	bad := []struct{ name, src string }{
		{"gbnf a{0,50}{0,1000}", `root ::= (("a"{0,50}){0,1000})`},
		{"gbnf nested 6", `root ::= ((((("a"{0,10}){0,10}){0,10}){0,10}){0,10}){0,10}`},
		{"gbnf alternatives", `root ::= ("a" | "b" | "c" | "d"){0,10000} ("a"{0,100}){0,100}`},
	}
	for _, schema := range []string{
		`{"type":"string","pattern":"^((((a{0,10}){0,10}){0,10}){0,10}){0,10}$"}`,
		`{"type":"string","pattern":"^(((((a{0,10}){0,10}){0,10}){0,10}){0,10}){0,10}$"}`,
		`{"type":"object","properties":{"p":{"type":"string","pattern":"^((((a{0,10}){0,10}){0,10}){0,10}){0,10}$"}}}`,
	} {
		src, err := FromSchema([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		bad = append(bad, struct{ name, src string }{schema, src})
	}
	for _, c := range bad {
		runtime.GC()
		before := heapInUse()
		var peak uint64
		done, exited := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(exited)
			for {
				select {
				case <-done:
					return
				case <-time.After(5 * time.Millisecond):
					peak = max(peak, heapInUse())
				}
			}
		}()
		_, err := parse(c.src)
		close(done)
		<-exited // peak is the sampler's until it has returned
		if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), "rule ") {
			t.Errorf("%s: %v, want ErrTooLarge naming the rule", c.name, err)
			continue
		}
		grow := int64(peak) - int64(before)
		t.Logf("%s: %v (heap +%d MB)", c.name, err, grow>>20)
		if grow > 200<<20 {
			t.Errorf("%s: the heap grew by %d MB", c.name, grow>>20)
		}
	}
	for _, src := range []string{
		`root ::= ((("a"{0,10}){0,10}){0,10})`,
		`root ::= ("a"{0,50}){0,20}`,
	} {
		if _, err := parse(src); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
	tools, _, err := taggedCalls(readTools(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parse(tools); err != nil {
		t.Errorf("Home Assistant's tools: %v", err)
	}
}

// TestCompileContext: a cancelled context ends a compile with its error.
func TestCompileContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ParseContext(ctx, `root ::= ((("a"{0,10}){0,10}){0,10}) "b"`)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
}

// TestCompileRefusedOnce: a grammar refused for a budget is refused again
// from memory (the same error, no second compile), and at most
// compileSlots compiles run at once.
func TestCompileRefusedOnce(t *testing.T) { // not parallel: it takes every compile slot
	src := `root ::= (("b"{0,50}){0,1000}) "refused once"`
	_, err1 := ParseContext(context.Background(), src)
	_, err2 := ParseContext(context.Background(), src)
	if !errors.Is(err1, ErrTooLarge) || err2 != err1 {
		t.Fatalf("%v, then %v: want the same ErrTooLarge", err1, err2)
	}
	for range cap(compileSlots) {
		compileSlots <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := ParseContext(ctx, `root ::= "waits for a slot"`)
	for range cap(compileSlots) {
		<-compileSlots
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with every slot taken: %v, want the context's deadline", err)
	}
	if _, err := ParseContext(context.Background(), `root ::= "waits for a slot"`); err != nil {
		t.Fatal(err)
	}
}
