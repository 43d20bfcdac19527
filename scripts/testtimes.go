//go:build ignore

// testtimes reads `go test -json` and keeps the suite's timings.
//
//	go test -json ./... | go run scripts/testtimes.go -save bin/test-json/native.json
//
// copies the stream to the file and prints what plain `go test` prints
// (one line per package, the whole output of a failing test), and
//
//	go run scripts/testtimes.go -table bin/test-json/*.json > testdata/test-timings.tsv
//
// summarises the saved streams (the phase is the file's name) into one row
// per package and phase: its seconds and its slowest top-level tests. The
// table is committed, so that a test or package that grows shows in a diff.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

func main() {
	save := flag.String("save", "", "copy the `go test -json` stream on stdin to this file and print it as go test does")
	table := flag.Bool("table", false, "summarise the saved streams given as arguments (phase: the file's base name)")
	top := flag.Int("top", 3, "slowest top-level tests listed per package")
	note := flag.String("note", "", "with -table: a comment line under the header (when and at what load the phases ran)")
	prefix := flag.String("prefix", "", "with -save: begin each printed line with `phase` (phases run side by side)")
	flag.Parse()
	switch {
	case *save != "":
		var w io.Writer = os.Stdout
		if *prefix != "" {
			w = &prefixWriter{w: os.Stdout, prefix: *prefix + ": "}
		}
		if err := filter(os.Stdin, w, *save); err != nil {
			fmt.Fprintln(os.Stderr, "testtimes:", err)
			os.Exit(1)
		}
	case *table:
		if err := summarise(os.Stdout, flag.Args(), *top, *note); err != nil {
			fmt.Fprintln(os.Stderr, "testtimes:", err)
			os.Exit(1)
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
}

// filter copies r to the file path and writes to w what go test without
// -json would: each package's result line, and the output of the tests
// that fail (a failing test's subtests' output included).
func filter(r io.Reader, w io.Writer, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	held := map[string][]string{} // package + " " + top-level test: its output so far
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		f.Write(line)
		f.Write([]byte{'\n'})
		var e event
		if json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line) // go vet's and the like come as plain text
			continue
		}
		if e.Package == "" {
			io.WriteString(w, e.Output) // build-output
			continue
		}
		if e.Test == "" {
			// The package's own lines: ok/FAIL, panics, timeouts, build
			// failures; the verbose run's PASS/FAIL summary is left out.
			if e.Output != "" && e.Output != "PASS\n" && e.Output != "FAIL\n" {
				io.WriteString(w, e.Output)
			}
			continue
		}
		key := e.Package + " " + strings.SplitN(e.Test, "/", 2)[0]
		switch e.Action {
		case "output":
			held[key] = append(held[key], e.Output)
		case "fail":
			if !strings.Contains(e.Test, "/") {
				io.WriteString(w, strings.Join(held[key], ""))
				delete(held, key)
			}
		case "pass", "skip":
			if !strings.Contains(e.Test, "/") {
				delete(held, key)
			}
		}
	}
	// A binary that died (a timeout's panic) leaves its running tests'
	// output held: print it.
	for _, k := range slices.Sorted(maps.Keys(held)) {
		io.WriteString(w, strings.Join(held[k], ""))
	}
	return sc.Err()
}

// prefixWriter begins every line written to w with prefix, writing whole
// lines only (phases side by side share the terminal).
type prefixWriter struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := append([]byte(p.prefix), p.buf[:i+1]...)
		if _, err := p.w.Write(line); err != nil {
			return 0, err
		}
		p.buf = p.buf[i+1:]
	}
}

// row is one package in one phase.
type row struct {
	pkg, phase string
	seconds    float64
	result     string
	tests      map[string]float64 // top-level tests' seconds
}

// summarise writes one tab-separated row per package and phase: the
// package, the phase, its seconds, its result, and its slowest top-level
// tests.
func summarise(w io.Writer, paths []string, top int, note string) error {
	var rows []*row
	wall := map[string]float64{} // phase: its first event to its last
	for _, p := range paths {
		phase := strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
		var first, last time.Time
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		byPkg := map[string]*row{}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Package == "" {
				continue
			}
			if first.IsZero() || e.Time.Before(first) {
				first = e.Time
			}
			if e.Time.After(last) {
				last = e.Time
			}
			r := byPkg[e.Package]
			if r == nil {
				r = &row{pkg: e.Package, phase: phase, tests: map[string]float64{}}
				byPkg[e.Package] = r
				rows = append(rows, r)
			}
			switch e.Action {
			case "pass", "fail", "skip":
				if e.Test == "" {
					r.seconds, r.result = e.Elapsed, e.Action
				} else if !strings.Contains(e.Test, "/") {
					r.tests[e.Test] = e.Elapsed
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return fmt.Errorf("%s: %v", p, err)
		}
		wall[phase] = last.Sub(first).Seconds()
	}
	slices.SortStableFunc(rows, func(a, b *row) int {
		return cmp.Or(cmp.Compare(a.pkg, b.pkg), cmp.Compare(a.phase, b.phase))
	})
	fmt.Fprintln(w, "# go test -json summarised by scripts/testtimes.go (make test writes it); seconds are wall time, so they follow the machine's load")
	if note != "" {
		fmt.Fprintln(w, "# "+note)
	}
	fmt.Fprintln(w, "package\tphase\tseconds\tresult\tslowest tests (seconds)")
	var total = map[string]float64{}
	for _, r := range rows {
		if r.result == "" {
			r.result = "none" // the binary died, or the package has no test files
		}
		if r.result == "skip" && len(r.tests) == 0 {
			continue // no test files
		}
		names := slices.Collect(maps.Keys(r.tests))
		slices.SortFunc(names, func(a, b string) int {
			return cmp.Or(cmp.Compare(r.tests[b], r.tests[a]), cmp.Compare(a, b))
		})
		var slow []string
		for _, n := range names[:min(top, len(names))] {
			slow = append(slow, fmt.Sprintf("%s %.1f", n, r.tests[n]))
		}
		total[r.phase] += r.seconds
		fmt.Fprintf(w, "%s\t%s\t%.1f\t%s\t%s\n", strings.TrimPrefix(r.pkg, "github.com/geisten/geist/"), r.phase, r.seconds, r.result, strings.Join(slow, ", "))
	}
	for _, ph := range slices.Sorted(maps.Keys(total)) {
		fmt.Fprintf(w, "(packages' sum)\t%s\t%.1f\t\t\n", ph, total[ph])
		fmt.Fprintf(w, "(phase's wall)\t%s\t%.1f\t\tfrom its first test's start to its last package's end\n", ph, wall[ph])
	}
	return nil
}
