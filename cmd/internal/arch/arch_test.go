package arch_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// The architecture of the module: one row per package (paths relative to
// the module), what it may import of the module and of third parties;
// the standard library is always allowed (net is forbidden below where
// it must not be). TestArchitecture holds every package of the module to
// its row and to the rules after it, replacing per-folder import tests
// (tailscale's tstest/deptest is the model).
var architecture = map[string]struct {
	mod []string // module packages it may import ("*": any)
	ext []string // third-party import path prefixes it may import
}{
	// Kernels and formats.
	"neon":        {[]string{"neon/ggml"}, []string{"golang.org/x/sys/cpu"}},
	"neon/ggml":   {nil, nil}, // ggml's block sizes, fp16, scale unpackers (issue 16)
	"quant":       {[]string{"neon"}, nil},
	"engine/gguf": {[]string{"quant"}, []string{"golang.org/x/sys/unix"}},
	// The engine: what runs at inference time.
	"engine/tokenizer": {nil, nil},
	"engine/chat":      {[]string{"engine/chat/sandbox", "engine/dialect"}, []string{"github.com/ardanlabs/jinja"}},
	"engine/sample":    {nil, nil},
	"engine/spec":      {[]string{"engine/model"}, nil}, // the drafters: a draft model, the target with blocks skipped
	"engine/grammar":   {nil, nil},                      // constrained decoding: GBNF, schemas, tool-call grammars
	"engine/model":     {[]string{"engine/gguf", "quant", "neon"}, []string{"golang.org/x/sys/unix"}},
	"engine":           {[]string{"engine/chat", "engine/gguf", "engine/model", "engine/sample", "engine/spec", "engine/tokenizer", "engine/grammar", "quant"}, []string{"golang.org/x/sys/unix"}}, // unix: the snapshot writer's thread at nice 19
	"engine/embed":     {[]string{"engine/gguf", "engine/model", "engine/tokenizer"}, nil},                                                                                                         // embedding models: tokenize, bound, run, pool
	"engine/zoo":       {nil, nil},                                                                                                                                                                 // test helper: finds the conformance zoo
	// Chat templates (rendered in a sandbox) and the model families' dialects.
	"engine/chat/sandbox": {nil, []string{"github.com/ardanlabs/jinja"}}, // bounds what a template may cost
	"engine/dialect":      {[]string{"engine/grammar"}, nil},             // one file per model family: thinking marks, tool-call parser and grammar
	// What an answer must keep to, as front ends decode it, and its compile
	// (grammar, lazy trigger, check) once, for the core.
	"engine/constraint": {[]string{"engine/dialect", "engine/grammar"}, nil},
	// The appliance core: the queue and worker, admission, cancellation,
	// sessions, the prompt cache's wiring. It sits below engine so that
	// every front end imports it downward (none reaches up into cmd), and,
	// as the engine, it imports no storage: its SessionStore and
	// PromptCache are interfaces the daemon fills with sessions.db and
	// cache.db (cmd/internal/daemon/storage.go).
	"engine/appliance":               {[]string{"engine", "engine/chat", "engine/constraint", "engine/sample"}, nil},
	"engine/appliance/sentence":      {nil, nil},                                    // splits streamed text into sentences for speech (firmware/voice, mqtt/hermes)
	"engine/appliance/appliancetest": {[]string{"engine", "engine/appliance"}, nil}, // test helper: a scripted engine, a running core
	// Storage: opaque records in bbolt files.
	"storage": {nil, []string{"go.etcd.io/bbolt", "golang.org/x/sys/unix"}},
	// Front ends: one protocol or device each, through the core.
	"mqtt":                 {[]string{"engine/appliance", "mqtt/guard", "engine/constraint"}, []string{"github.com/eclipse/paho.mqtt.golang", "github.com/mochi-mqtt/server/v2"}},
	"mqtt/hermes":          {[]string{"engine/appliance", "engine/appliance/sentence", "mqtt/guard"}, []string{"github.com/eclipse/paho.mqtt.golang"}},
	"mqtt/guard":           {nil, []string{"github.com/eclipse/paho.mqtt.golang", "golang.org/x/time/rate"}}, // bounds what MQTT clients read
	"mqtt/mqtttest":        {nil, []string{"github.com/eclipse/paho.mqtt.golang"}},                           // test helper: Mosquitto and a client
	"firmware":             {[]string{"engine/appliance", "firmware/voice"}, []string{"periph.io/x/conn/v3", "periph.io/x/host/v3"}},
	"firmware/voice":       {[]string{"engine/appliance/sentence"}, nil},
	"cmd/internal/httpapi": {[]string{"engine/appliance", "engine/chat", "engine/constraint"}, []string{"github.com/prometheus/client_golang"}}, // Ollama, OpenAI, metrics; engine/chat reads tool calls, engine/constraint carries formats and tool_choice to the core
	// issue 13: the Wyoming server and its mDNS responder.
	"cmd/internal/wyoming":             {[]string{"engine/appliance"}, []string{"github.com/hashicorp/mdns", "github.com/miekg/dns", "golang.org/x/net/ipv4", "golang.org/x/sys/unix"}},
	"cmd/internal/wyoming/wyomingtest": {[]string{"engine/zoo"}, nil}, // test helper: the reference Wyoming client
	// Offline tools of the geist command, the model store, the files the
	// binary carries, and the command.
	"cmd/internal/convert":       {[]string{"engine/gguf", "engine/tokenizer", "quant"}, nil}, // synth --vocab checks a borrowed vocabulary loads
	"cmd/internal/models":        {[]string{"engine/gguf", "engine/model", "quant"}, []string{"golang.org/x/sys/unix"}},
	"cmd/internal/models/hftest": {nil, nil}, // test helper: a Hugging Face stand-in
	"scripts":                    {nil, nil},
	"cmd/internal/arch":          {nil, nil}, // this table and its test
	// The command: what its subcommands share, the daemon, the bench
	// harness, and the dispatcher.
	"cmd/internal/cli": {[]string{"cmd/internal/models", "engine/constraint"}, []string{"github.com/spf13/pflag"}}, // Env, flags, usage errors, data directory, version
	"cmd/internal/daemon": {[]string{"engine/appliance", "cmd/internal/cli", "cmd/internal/httpapi", "cmd/internal/models", "cmd/internal/wyoming",
		"engine", "engine/chat", "engine/embed", "engine/gguf", "engine/model", "engine/sample", "firmware", "mqtt", "quant", "storage"},
		[]string{"github.com/BurntSushi/toml", "github.com/eclipse/paho.mqtt.golang", "github.com/mattn/go-shellwords", "github.com/spf13/pflag", "golang.org/x/sys/unix"}}, // geist serve: wires the core and the front ends
	"cmd/internal/daemon/daemontest": {nil, nil},                                                                                                                                          // test helper: the daemon's and the command's tests' TestMain (a private data directory), log buffer, emulation check
	"cmd/internal/bench":             {[]string{"cmd/internal/cli", "cmd/internal/models", "engine", "engine/model", "engine/sample", "engine/spec"}, []string{"github.com/spf13/pflag"}}, // geist bench
	"cmd/geist":                      {[]string{"*"}, []string{"*"}},
}

// testHelpers may be imported by any package's tests.
var testHelpers = []string{"engine/zoo", "mqtt/mqtttest", "engine/appliance/appliancetest", "cmd/internal/models/hftest", "cmd/internal/wyoming/wyomingtest", "cmd/internal/daemon/daemontest"}

// testExtra are further module packages a package's tests may import.
var testExtra = map[string][]string{
	"quant":                {"engine/gguf"}, // reads the zoo's models
	"engine/chat":          {"engine/gguf"}, // reads the zoo's templates
	"engine/dialect":       {"engine/chat"}, // each family's template writes what its dialect reads
	"engine/model":         {"engine/sample"},
	"engine/tokenizer":     {"engine/gguf"},             // reads vocabularies from GGUF files
	"cmd/internal/convert": {"engine", "engine/sample"}, // converted files load and generate (greedily)
	"cmd/internal/httpapi": {"engine"},                  // scripted engines see engine.Request
	"engine":               {"storage"},                 // prompt-cache restores from a real cache.db
	"engine/spec":          {"engine/gguf"},             // the tuner searches a zoo model
	"engine/embed":         {"engine"},                  // Load refuses an embedding model
}

// forbidden are dependencies (direct or not) a package must not have, by
// path prefix: layers below never reach up, front ends never reach each
// other. Above these, archViolations holds every package outside cmd to
// importing nothing of cmd (upward).
var forbidden = []struct {
	pkgs []string // packages the rule applies to, by prefix
	deps []string // dependencies they must not have, by prefix
	why  string
}{
	{[]string{"engine"}, []string{"storage", "mqtt", "firmware", "cmd"}, "the engine imports no front end, no storage, no command (nor does the core, engine/appliance: its stores come in as interfaces)"},
	{[]string{"neon"}, []string{"quant"}, "the kernels do not know the block formats' package"},
	{[]string{"storage"}, []string{"engine", "mqtt", "firmware", "cmd", "neon", "quant"}, "storage keeps opaque records"},
	{[]string{"engine/appliance"}, []string{"net", "github.com/eclipse/paho.mqtt.golang", "periph.io"}, "the core speaks no protocol and touches no network or GPIO"},
	{[]string{"mqtt"}, []string{"firmware", "cmd/internal/httpapi", "cmd/internal/wyoming"}, "front ends import none of each other"},
	{[]string{"firmware"}, []string{"mqtt", "cmd/internal/httpapi", "cmd/internal/wyoming", "github.com/eclipse/paho.mqtt.golang"}, "front ends import none of each other"},
	{[]string{"cmd/internal/httpapi"}, []string{"mqtt", "firmware", "cmd/internal/wyoming", "cmd/internal/daemon", "cmd/geist"}, "front ends import none of each other, nor the daemon that wires them"},
	{[]string{"cmd/internal/wyoming"}, []string{"mqtt", "firmware", "cmd/internal/httpapi", "cmd/internal/daemon", "cmd/geist"}, "front ends import none of each other, nor the daemon that wires them"},
	{[]string{"cmd/internal/bench"}, []string{"cmd/internal/daemon", "engine/appliance", "mqtt", "firmware", "cmd/internal/httpapi", "cmd/internal/wyoming", "storage"}, "the bench harness measures the engine, and a server only as its clients reach it"},
	{[]string{"cmd/internal/cli"}, []string{"engine/appliance", "cmd/internal/daemon", "mqtt", "firmware", "cmd/internal/httpapi", "cmd/internal/wyoming"}, "what the commands share loads no model and serves nothing"},
}

// frontEnds import the core, not storage (the daemon gives the core its
// stores), and fill a constraint rather than build grammars.
var frontEnds = []string{"mqtt", "firmware", "cmd/internal/httpapi", "cmd/internal/wyoming"}

type listedPackage struct {
	ImportPath   string
	Dir          string
	GoFiles      []string
	Standard     bool
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
}

// modulePackages lists the module's packages with go list.
func modulePackages(t *testing.T) (module string, pkgs map[string]*listedPackage) {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		t.Skipf("go env GOMOD: %v (the architecture test needs the go command)", err)
	}
	root := filepath.Dir(string(bytes.TrimSpace(out)))
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if out, err = cmd.Output(); err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	mod, err := exec.Command("go", "list", "-m").Output()
	if err != nil {
		t.Fatal(err)
	}
	module = strings.TrimSpace(string(mod))
	pkgs = map[string]*listedPackage{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")] = &p
	}
	return module, pkgs
}

func hasPrefix(path string, prefixes []string) bool {
	for _, p := range prefixes {
		if p == "*" || path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// archViolations checks every package of pkgs against the architecture
// and returns what breaks it.
func archViolations(module string, pkgs map[string]*listedPackage) []string {
	var bad []string
	rel := func(path string) (string, bool) {
		if path == module {
			return "", true
		}
		r, ok := strings.CutPrefix(path, module+"/")
		return r, ok
	}
	isStd := func(path string) bool {
		first, _, _ := strings.Cut(path, "/")
		return !strings.Contains(first, ".")
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range pkgs {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		p := pkgs[name]
		row, ok := architecture[name]
		if !ok {
			bad = append(bad, name+": not in the architecture table (cmd/internal/arch/arch_test.go): add a row saying what it may import")
			continue
		}
		check := func(imports []string, extra []string, what string) {
			for _, imp := range imports {
				if r, inMod := rel(imp); inMod {
					if r != name && !hasPrefix(r, row.mod) && !slices.Contains(extra, r) {
						bad = append(bad, name+": "+what+" "+r+", which is not in its row of the architecture table (may import: "+strings.Join(row.mod, ", ")+")")
					}
					continue
				}
				if what == "imports" && !isStd(imp) && !hasPrefix(imp, row.ext) {
					bad = append(bad, name+": imports "+imp+", a third-party package not in its row of the architecture table")
				}
			}
		}
		check(p.Imports, nil, "imports")
		check(append(p.TestImports, p.XTestImports...), append(slices.Clone(testHelpers), testExtra[name]...), "tests import")
		if hasPrefix(name, frontEnds) {
			for _, imp := range p.Imports {
				r, _ := rel(imp)
				if hasPrefix(r, []string{"storage"}) {
					bad = append(bad, name+": imports storage; front ends reach storage only through the core")
				}
				// Issue 34: a front end decodes its protocol's fields
				// into an engine/constraint.Constraint; the core
				// compiles it once. None builds grammars itself.
				if hasPrefix(r, []string{"engine/grammar", "engine/dialect"}) {
					bad = append(bad, name+": imports "+r+"; front ends fill an engine/constraint.Constraint and the core compiles it")
				}
			}
		}
		// Issue 34: the arrows run downward. The command's tree (cmd/...)
		// sits on top; no package outside it (kernels, formats, the engine
		// and the core, storage, the front ends mqtt and firmware,
		// scripts) imports anything of it, in its code or its tests.
		if !hasPrefix(name, []string{"cmd"}) {
			for _, imp := range slices.Concat(p.Deps, p.TestImports, p.XTestImports) {
				if r, inMod := rel(imp); inMod && hasPrefix(r, []string{"cmd"}) {
					bad = append(bad, name+": reaches up into "+r+": only the command's tree (cmd/...) imports cmd/...; the core is engine/appliance")
				}
			}
		}
		for _, f := range forbidden {
			if !hasPrefix(name, f.pkgs) {
				continue
			}
			for _, d := range p.Deps {
				r, inMod := rel(d)
				if !inMod {
					r = d
				}
				if hasPrefix(r, f.deps) && r != name {
					bad = append(bad, name+": depends on "+r+" (via "+strings.Join(importPath(module, pkgs, p.ImportPath, d), " -> ")+"): "+f.why)
				}
			}
		}
	}
	return bad
}

// importPath returns a chain of imports from one package to a dependency.
func importPath(module string, pkgs map[string]*listedPackage, from, to string) []string {
	byPath := map[string]*listedPackage{}
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var chain []string
			for c := cur; c != ""; c = prev[c] {
				chain = append(chain, strings.TrimPrefix(c, module+"/"))
			}
			slices.Reverse(chain)
			return chain
		}
		p := byPath[cur]
		if p == nil {
			continue
		}
		for _, imp := range p.Imports {
			if _, seen := prev[imp]; !seen {
				prev[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return []string{strings.TrimPrefix(from, module+"/"), "…", strings.TrimPrefix(to, module+"/")}
}

// TestArchitecture: every package of the module keeps to its row of the
// architecture table and to the forbidden dependencies.
func TestArchitecture(t *testing.T) {
	module, pkgs := modulePackages(t)
	for _, v := range archViolations(module, pkgs) {
		t.Error(v)
	}
	var names []string
	for n := range pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	t.Logf("%d packages checked: %s", len(names), strings.Join(names, " "))
}

// TestArchitectureCatches: the test fails on forbidden imports: the MQTT
// front end importing firmware (and so another front end), the engine
// importing storage, the kernels importing quant, a front end importing
// storage directly, the core importing storage, a package outside cmd
// reaching up into it, and a package missing from the table.
func TestArchitectureCatches(t *testing.T) {
	module, pkgs := modulePackages(t)
	add := func(from, to string) func() {
		p := pkgs[from]
		imports, deps := p.Imports, p.Deps
		p.Imports = append(slices.Clone(p.Imports), module+"/"+to)
		p.Deps = append(slices.Clone(p.Deps), module+"/"+to)
		return func() { p.Imports, p.Deps = imports, deps }
	}
	for _, c := range []struct {
		from, to string
		want     []string
	}{
		{"mqtt", "firmware", []string{"mqtt: imports firmware, which is not in its row", "mqtt: depends on firmware (via mqtt -> firmware): front ends import none of each other"}},
		{"engine", "storage", []string{"engine: imports storage, which is not in its row", "engine: depends on storage (via engine -> storage): the engine imports no front end, no storage, no command"}},
		{"neon", "quant", []string{"neon: depends on quant"}},
		{"firmware", "storage", []string{"firmware: imports storage; front ends reach storage only through the core"}},
		{"engine/appliance", "storage", []string{"engine/appliance: imports storage, which is not in its row", "engine/appliance: depends on storage (via engine/appliance -> storage): the engine imports no front end, no storage, no command (nor does the core"}},
		{"mqtt", "cmd/internal/daemon", []string{"mqtt: reaches up into cmd/internal/daemon: only the command's tree"}},
		{"engine/appliance/sentence", "cmd/internal/cli", []string{"engine/appliance/sentence: reaches up into cmd/internal/cli"}},
	} {
		undo := add(c.from, c.to)
		got := strings.Join(archViolations(module, pkgs), "\n")
		undo()
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s importing %s: violations\n%s\nlack %q", c.from, c.to, got, w)
			}
		}
		t.Logf("%s importing %s:\n%s", c.from, c.to, got)
	}
	pkgs["newpkg"] = &listedPackage{ImportPath: module + "/newpkg"}
	if got := strings.Join(archViolations(module, pkgs), "\n"); !strings.Contains(got, "newpkg: not in the architecture table") {
		t.Errorf("a package missing from the table: %s", got)
	}
}

// TestOnlyTheCoreRenders: only the core renders prompts for the front
// ends: no front end compiles or renders a chat template (engine/chat's
// Compile, CompileLimits, Template), so every request reaches the model
// through the core's one rendering (system message, session history,
// thinking policy).
func TestOnlyTheCoreRenders(t *testing.T) {
	_, pkgs := modulePackages(t)
	rendering := []string{"Compile", "CompileLimits", "Template"}
	checked := 0
	for fe, p := range pkgs {
		if !slices.ContainsFunc(frontEnds, func(f string) bool { return fe == f || strings.HasPrefix(fe, f+"/") }) {
			continue
		}
		checked++
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			chatName := ""
			for _, im := range f.Imports {
				if strings.Trim(im.Path.Value, `"`) == "github.com/geisten/geist/engine/chat" {
					chatName = "chat"
					if im.Name != nil {
						chatName = im.Name.Name
					}
				}
			}
			if chatName == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == chatName && slices.Contains(rendering, sel.Sel.Name) {
						t.Errorf("%s/%s uses chat.%s: only the core renders prompts", fe, name, sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
	if checked < len(frontEnds) {
		t.Errorf("%d front-end packages found, want at least %d", checked, len(frontEnds))
	}
}
