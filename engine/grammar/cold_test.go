package grammar

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A cold compile is the first one in a fresh process: the heap is small
// (the collector runs several times while it grows), nothing is cached
// and no page of the compile's memory has been touched. A request after
// a restart pays this, so the benchmarks below run each compile in a
// child process of its own and time it there (the process start is not
// counted). BenchmarkCompileHATools and BenchmarkCompileAITask measure
// the warm case.

const coldEnv = "GEIST_GRAMMAR_COLD"

func readTools(tb testing.TB) []json.RawMessage {
	raw, err := os.ReadFile("testdata/ha-tools.json")
	if err != nil {
		tb.Fatal(err)
	}
	var tools []json.RawMessage
	if err := json.Unmarshal(raw, &tools); err != nil {
		tb.Fatal(err)
	}
	return tools
}

// taggedCalls is the grammar of Hermes' tagged calls of the tools
// (engine/dialect's; its Grammar is the frame, CallRules the calls).
func taggedCalls(tools []json.RawMessage) (string, string, error) {
	c, err := CallRules(tools, "", JSONCall)
	if err != nil {
		return "", "", err
	}
	return c.Grammar(`"<tool_call>" "\n"? call "</tool_call>" ( "\n"* "<tool_call>" "\n"? call "</tool_call>" )*`), "", nil
}

func readAITask(tb testing.TB) []json.RawMessage {
	raw, err := os.ReadFile("testdata/schemas.json")
	if err != nil {
		tb.Fatal(err)
	}
	var schemas map[string]json.RawMessage
	if err := json.Unmarshal(raw, &schemas); err != nil {
		tb.Fatal(err)
	}
	var out []json.RawMessage
	for name, s := range schemas {
		if strings.HasPrefix(name, "ha-ai-task") {
			out = append(out, s)
		}
	}
	return out
}

// TestColdCompileChild is the child of BenchmarkCompileCold: it compiles
// once (through the public, cached path, as a request does) and prints
// the time.
func TestColdCompileChild(t *testing.T) {
	which := os.Getenv(coldEnv)
	if which == "" {
		t.Skip("only run by BenchmarkCompileCold")
	}
	v := testVocab()
	var start time.Time
	var ru0 syscall.Rusage
	switch which {
	case "ha-tools":
		tools := readTools(t)
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		start = time.Now()
		src, _, err := taggedCalls(tools)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Compile(src); err != nil {
			t.Fatal(err)
		}
	case "ai-task":
		schemas := readAITask(t)
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		start = time.Now()
		for _, s := range schemas {
			if _, err := v.CompileSchema(s); err != nil {
				t.Fatal(err)
			}
		}
	default:
		t.Fatalf("%s=%q", coldEnv, which)
	}
	wall := time.Since(start)
	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := func(r *syscall.Rusage) int64 { return r.Utime.Nano() + r.Stime.Nano() }
	fmt.Printf("cold-ns %d %d\n", wall.Nanoseconds(), cpu(&ru1)-cpu(&ru0))
}

// BenchmarkCompileCold compiles Home Assistant's 17 intent tools and
// the AI Task schemas, each compile the first of a fresh process. It
// reports the mean and the worst wall time (cold-ms, cold-max-ms) and
// the mean CPU time of the process over the compile, the collector's
// threads included (cold-cpu-ms: on a loaded machine the wall time
// mostly measures the wait for a core); ns/op includes starting the
// process and means nothing here.
func BenchmarkCompileCold(b *testing.B) {
	for _, which := range []string{"ha-tools", "ai-task"} {
		b.Run(which, func(b *testing.B) {
			var sum, worst, cpu time.Duration
			n := 0
			for b.Loop() {
				cmd := exec.Command(os.Args[0], "-test.run=^TestColdCompileChild$", "-test.count=1")
				cmd.Env = append(os.Environ(), coldEnv+"="+which)
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("%v\n%s", err, out)
				}
				_, after, ok := strings.Cut(string(out), "cold-ns ")
				if !ok {
					b.Fatalf("child said\n%s", out)
				}
				f := strings.Fields(after)
				ns, err := strconv.ParseInt(f[0], 10, 64)
				if err != nil {
					b.Fatal(err)
				}
				cns, err := strconv.ParseInt(f[1], 10, 64)
				if err != nil {
					b.Fatal(err)
				}
				cpu += time.Duration(cns)
				d := time.Duration(ns)
				sum += d
				worst = max(worst, d)
				n++
			}
			b.ReportMetric(float64(sum.Microseconds())/1e3/float64(n), "cold-ms")
			b.ReportMetric(float64(worst.Microseconds())/1e3, "cold-max-ms")
			b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(n), "cold-cpu-ms")
		})
	}
}

// TestShallowMasksMatchInlined: calling the whitespace rule instead of
// inlining it (masks per return state) allows exactly the tokens the
// inlined automaton allows, along random walks through Home Assistant's
// tool calls that write whitespace often.
func TestShallowMasksMatchInlined(t *testing.T) {
	t.Parallel()
	src, _, err := taggedCalls(readTools(t))
	if err != nil {
		t.Fatal(err)
	}
	g, err := parse(src)
	if err != nil {
		t.Fatal(err)
	}
	saved := inlineBudget
	inlineBudget = 1 << 30
	gi, err := parse(src)
	inlineBudget = saved
	if err != nil {
		t.Fatal(err)
	}
	if g.States() >= gi.States() {
		t.Fatalf("%d states called, %d inlined: nothing saved", g.States(), gi.States())
	}
	v := testVocab()
	a, b := Bind(g, v), Bind(gi, v)
	ma, mb := make([]uint64, (v.n+63)/64), make([]uint64, (v.n+63)/64)
	var ws []int32
	for id := int32(0); id < int32(v.n); id++ {
		if p := v.piece(id); len(p) > 0 && strings.Trim(string(p), " \n\t") == "" || strings.HasPrefix(string(p), " ") || strings.HasPrefix(string(p), "\n") {
			ws = append(ws, id)
		}
	}
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 11))
		x, y := a.NewMatcher(), b.NewMatcher()
		for step := range 300 {
			x.Mask(ma)
			y.Mask(mb)
			if !slices.Equal(ma, mb) {
				t.Fatalf("seed %d step %d: the masks differ", seed, step)
			}
			var allowed, white []int32
			for id := int32(1); id < int32(v.n); id++ {
				if ma[id>>6]&(1<<(id&63)) != 0 {
					allowed = append(allowed, id)
					if slices.Contains(ws, id) {
						white = append(white, id)
					}
				}
			}
			if len(allowed) == 0 {
				break
			}
			id := allowed[r.IntN(len(allowed))]
			if len(white) > 0 && r.IntN(3) == 0 {
				id = white[r.IntN(len(white))]
			}
			if !x.AcceptToken(id) || !y.AcceptToken(id) {
				t.Fatalf("seed %d step %d: token %q refused", seed, step, v.piece(id))
			}
		}
	}
}
