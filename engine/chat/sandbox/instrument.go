// Package sandbox bounds what a chat template may cost: the template
// engine (github.com/ardanlabs/jinja) has no limits and no hooks, and a
// template is model-file data. Precheck bounds the parser's recursion
// before it runs, Instrument rewrites a parsed template so that its
// loops, macros, operators and printing draw on a Budget, and the Budget
// (one a render, its Guards passed as template variables) fails a render
// that exceeds its Limits with an error wrapping ErrLimit. engine/chat
// renders every template under it.
package sandbox

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ardanlabs/jinja"
)

// The template engine has no limits and no hooks (github.com/ardanlabs/jinja
// v1.8.0; the releases after it need a newer Go than this project builds
// with). A template is model-file data, so one hostile GGUF could otherwise
// kill the process: a macro that calls itself overflows the goroutine stack
// (fatal in Go, not a panic), 'x' * 10**12 or a slice bound of 10**13 asks
// for terabytes in one allocation (fatal too), a list appended to itself
// makes printing recurse forever.
//
// So the parsed tree is instrumented once, at Compile, before any render:
//
//   - precheck bounds the parser's own recursion before jinja.Compile runs:
//     the source size, the nesting of brackets and of block tags, and the
//     runs of prefix operators ('not', '-', '+') and 'else' per tag.
//   - every loop body, macro body and call block starts with a call to a
//     budget function weighted by the size of that body, so loops and
//     recursion draw on a step budget, and macro calls check the Go stack
//     depth before it can grow far;
//   - the operators that make strings (+, ~, *) run through functions that
//     check the size of the result before building it;
//   - every value that gets printed, passed to a filter that prints it, used
//     as a non-literal key or method argument, or stored in a container is
//     measured first (its printed size, its nesting depth, whether storing
//     it would make a cycle), and what gets printed or built is charged to a
//     byte budget;
//   - slice bounds next to an explicit step are checked (the engine sizes
//     its result from them before clamping).
//
// The functions are ordinary template variables (named __geist_*, a prefix
// no template may use) reached through the engine's lookup of unknown
// filters in the scope: the engine evaluates a filter's input first and its
// arguments after, as it does the operands of the operator replaced, so the
// order of evaluation is unchanged. The tree is reached through reflection,
// which ties this file to the engine's internal node types: the package's
// tests fail, rather than the guard silently lapsing, if an upgrade renames
// them (instrumentation then refuses every template).

// guardPrefix starts the names of the budget functions.
const guardPrefix = "__geist_"

// ErrLimit is wrapped by the error Compile or Render returns when a
// template exceeds one of its Limits.
var ErrLimit = errors.New("chat: template exceeds a limit")

// Limits bound what compiling and rendering one template may cost.
type Limits struct {
	// Source is the largest template source in bytes.
	Source int
	// Nesting bounds the nesting of brackets and block tags in the source,
	// the runs of prefix operators in a tag, and the nesting depth of the
	// lists and dicts a template builds or stores.
	Nesting int
	// Steps bounds the work of one render: every loop iteration and macro
	// call costs the number of nodes of its body plus iterationCost,
	// range() its length, measuring a value its number of elements.
	Steps int64
	// Frames bounds the depth of the Go stack under a macro call, which
	// bounds recursion well before the stack grows large.
	Frames int
	// Bytes bounds the bytes one render builds: printed values, the text
	// of loop and macro bodies, strings made by operators and filters,
	// values stored into lists and dicts.
	Bytes int64
	// Output bounds the size of any single string a render builds, the
	// rendered prompt included.
	Output int
	// Time bounds the wall-clock time of one render (and of the trial
	// renders at Compile, together); 0: none.
	Time time.Duration
}

// DefaultLimits are far above what real chat templates need (the largest
// known ones are under 20 KiB, nest under 10 deep and render a long
// conversation in a few hundred thousand steps) and far below what would
// strain a 4 GB board.
var DefaultLimits = Limits{
	Source:  256 << 10,
	Nesting: 64,
	Steps:   1 << 22,
	Frames:  4096,
	Bytes:   64 << 20,
	Output:  4 << 20,
	Time:    2 * time.Second,
}

// Limitf is an error wrapping ErrLimit, its text formatted.
func Limitf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrLimit}, args...)...)
}

// Precheck bounds the recursion jinja.Compile will do on src, scanning tags
// exactly as the engine's scanner does (opener, optional '-', quoted strings
// with backslash escapes in expressions and statements, closer).
func Precheck(src string, lim Limits) error {
	if len(src) > lim.Source {
		return Limitf("template source of %d bytes (limit %d)", len(src), lim.Source)
	}
	if strings.Contains(src, guardPrefix) {
		return fmt.Errorf("chat: template uses the reserved name prefix %q", guardPrefix)
	}
	blocks := 0
	for i := 0; i+1 < len(src); i++ {
		if src[i] != '{' {
			continue
		}
		var closer byte
		switch src[i+1] {
		case '{':
			closer = '}'
		case '%':
			closer = '%'
		case '#':
			closer = '#'
		default:
			continue
		}
		start := i + 2
		j := start
		depth, run, elses := 0, 0, 0
		word := func(w string) {
			switch w {
			case "not":
				run++
			case "else":
				elses++
				run = 0
			default:
				run = 0
			}
		}
		for j < len(src) {
			c := src[j]
			if closer != '#' && (c == '\'' || c == '"') {
				j++
				for j < len(src) && src[j] != c {
					if src[j] == '\\' && j+1 < len(src) {
						j++
					}
					j++
				}
				j++
				run = 0
				continue
			}
			if c == closer && j+1 < len(src) && src[j+1] == '}' {
				break
			}
			if closer != '#' {
				switch {
				case c == '(' || c == '[' || c == '{':
					depth++
					if depth > lim.Nesting {
						return Limitf("brackets nested deeper than %d at byte %d", lim.Nesting, j)
					}
				case c == ')' || c == ']' || c == '}':
					depth--
				case c == '-' || c == '+':
					run++
				case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
					k := j
					for k < len(src) && (src[k] == '_' || src[k] >= 'a' && src[k] <= 'z' || src[k] >= 'A' && src[k] <= 'Z' || src[k] >= '0' && src[k] <= '9') {
						k++
					}
					word(src[j:k])
					j = k - 1
				case c == ' ' || c == '\t' || c == '\n' || c == '\r':
				default:
					run = 0
				}
				if run > lim.Nesting || elses > lim.Nesting {
					return Limitf("a chain of more than %d prefix operators or else branches in the tag at byte %d", lim.Nesting, i)
				}
			}
			j++
		}
		if closer == '%' {
			switch kw := firstWord(src[start:min(j, len(src))]); kw {
			case "if", "for", "macro", "call", "filter", "raw":
				blocks++
			case "set":
				if !strings.Contains(src[start:min(j, len(src))], "=") {
					blocks++
				}
			default:
				if strings.HasPrefix(kw, "end") {
					blocks--
				}
			}
			if blocks > lim.Nesting {
				return Limitf("block tags nested deeper than %d at byte %d", lim.Nesting, i)
			}
		}
		i = j + 1
	}
	return nil
}

func firstWord(s string) string {
	s = strings.TrimLeft(s, "- \t\r\n")
	k := 0
	for k < len(s) && (s[k] == '_' || s[k] >= 'a' && s[k] <= 'z' || s[k] >= 'A' && s[k] <= 'Z') {
		k++
	}
	return s[:k]
}

// iterationCost is what a loop iteration or a macro call costs besides the
// nodes of its body, in steps: the engine spends about as long setting up
// an iteration (the loop variables, a closure) as evaluating eight nodes.
const iterationCost = 8

// nodeTypes are the engine's node types the instrumentation builds.
var nodeTypes struct {
	once       sync.Once
	filterExpr reflect.Type // *filterExpr
	nameExpr   reflect.Type // *nameExpr
	err        error
}

// loadNodeTypes takes the node types from a template compiled for the
// purpose, and checks that they have the fields this file sets.
func loadNodeTypes() error {
	nodeTypes.once.Do(func() {
		fail := func(what string) {
			nodeTypes.err = fmt.Errorf("chat: template guard does not know this version of the template engine (%s)", what)
		}
		p, err := jinja.Compile("{{ a|f(b) }}")
		if err != nil {
			fail(err.Error())
			return
		}
		nodes := field(reflect.ValueOf(p).Elem(), "nodes")
		if !nodes.IsValid() || nodes.Kind() != reflect.Slice || nodes.Len() != 1 {
			fail("Template.nodes")
			return
		}
		out := nodes.Index(0).Elem()
		if typeName(out) != "outputNode" {
			fail("outputNode")
			return
		}
		fe := field(out.Elem(), "expression").Elem()
		if typeName(fe) != "filterExpr" || !field(fe.Elem(), "expr").IsValid() || !field(fe.Elem(), "args").IsValid() || !field(fe.Elem(), "kwargs").IsValid() {
			fail("filterExpr")
			return
		}
		ne := field(fe.Elem(), "expr").Elem()
		if typeName(ne) != "nameExpr" || field(ne.Elem(), "name").Kind() != reflect.String {
			fail("nameExpr")
			return
		}
		nodeTypes.filterExpr = fe.Type()
		nodeTypes.nameExpr = ne.Type()
	})
	return nodeTypes.err
}

// field returns the named field of the struct s, settable whether exported
// or not (s must be addressable), or the zero Value.
func field(s reflect.Value, name string) reflect.Value {
	if s.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	f := s.FieldByName(name)
	if !f.IsValid() {
		return f
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// typeName is the name of the type v points to ("" when v is not a
// non-nil pointer).
func typeName(v reflect.Value) string {
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return ""
	}
	return v.Elem().Type().Name()
}

// cheapFilters neither print their input nor walk all of it.
var cheapFilters = map[string]bool{
	"length": true, "count": true, "first": true, "last": true,
	"default": true, "d": true, "int": true, "float": true, "abs": true, "round": true,
}

// stringFilters build a string about the size of their printed input.
var stringFilters = map[string]bool{
	"string": true, "trim": true, "upper": true, "lower": true, "title": true,
	"capitalize": true, "escape": true, "e": true, "safe": true,
	"wordcount": true,
}

// guardedFilters have a guard of their own, given the filter's arguments.
var guardedFilters = map[string]string{
	"join":    guardPrefix + "join",
	"tojson":  guardPrefix + "tojson",
	"indent":  guardPrefix + "indent",
	"replace": guardPrefix + "replace",
	"list":    guardPrefix + "listof",
}

// instrumenter rewrites one compiled template.
type instrumenter struct {
	hooks map[string]reflect.Value // compiled hook nodes by source
	err   error
}

// Instrument rewrites the tree of t in place (see the top of this file).
func Instrument(t *jinja.Template) (err error) {
	if err := loadNodeTypes(); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("chat: template guard failed: %v", r)
		}
	}()
	in := &instrumenter{hooks: map[string]reflect.Value{}}
	nodes := field(reflect.ValueOf(t).Elem(), "nodes")
	in.walk(nodes)
	return in.err
}

// walk visits every node and expression reachable from v (a settable
// value of one of the engine's types) and rewrites them.
func (in *instrumenter) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.Slice:
		for i := range v.Len() {
			in.walk(v.Index(i))
		}
	case reflect.Struct:
		if v.Type().PkgPath() != nodeTypes.filterExpr.Elem().PkgPath() || v.Type() == reflect.TypeFor[jinja.Value]() {
			return
		}
		for i := range v.NumField() {
			in.walk(field(v, v.Type().Field(i).Name))
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		p := v.Elem()
		if p.Kind() != reflect.Pointer || p.IsNil() {
			return
		}
		s := p.Elem()
		for i := range s.NumField() {
			in.walk(field(s, s.Type().Field(i).Name))
		}
		in.rewrite(v, s)
	}
}

// rewrite applies the instrumentation to the node or expression held by
// the interface value v, whose struct is s (its children are done).
func (in *instrumenter) rewrite(v, s reflect.Value) {
	switch s.Type().Name() {
	case "outputNode":
		e := field(s, "expression")
		e.Set(in.filter(e, guardPrefix+"print"))
	case "forNode":
		in.hook(field(s, "body"), "step")
	case "macroNode", "callNode":
		in.hook(field(s, "body"), "call")
	case "setNode":
		val := field(s, "value")
		if ns := field(s, "namespace"); ns.String() != "" {
			val.Set(in.filter(val, guardPrefix+"keep", in.name(ns.String())))
		} else {
			val.Set(in.filter(val, guardPrefix+"keep"))
		}
	case "binExpr":
		var guard string
		switch field(s, "op").String() {
		case "*":
			guard = "mul"
		case "+":
			guard = "add"
		case "~":
			guard = "cat"
		case "in", "not in":
			// A substring or member search reads all of the right side.
			r := field(s, "right")
			r.Set(in.filter(r, guardPrefix+"cost"))
			return
		default:
			return
		}
		v.Set(in.filter(field(s, "left"), guardPrefix+guard, field(s, "right")))
	case "filterExpr":
		name := field(s, "name").String()
		if strings.HasPrefix(name, guardPrefix) || cheapFilters[name] {
			return
		}
		in.measureArgs(field(s, "args"), field(s, "kwargs"))
		input := field(s, "expr")
		switch {
		case guardedFilters[name] != "":
			input.Set(in.filterArgs(input, guardedFilters[name], field(s, "args"), field(s, "kwargs")))
			if name == "tojson" {
				// Hugging Face's tojson (Guards' tojson), not the engine's.
				field(s, "name").SetString(guardPrefix + "pytojson")
			}
		case stringFilters[name]:
			input.Set(in.filter(input, guardPrefix+"str"))
		default:
			input.Set(in.filter(input, guardPrefix+"walk"))
		}
	case "callExpr":
		fn := field(s, "fn")
		if typeName(fn.Elem()) != "attrExpr" {
			return // a macro or a function: its arguments are bound, not printed
		}
		args := field(s, "args")
		in.measureArgs(args, field(s, "kwargs"))
		attr := fn.Elem().Elem()
		obj := field(attr, "obj")
		switch field(attr, "attr").String() {
		case "replace", "format":
			obj.Set(in.filterArgs(obj, guardPrefix+field(attr, "attr").String(), args, field(s, "kwargs")))
		case "append", "update":
			if args.Len() > 0 {
				args.Index(0).Set(in.filter(args.Index(0), guardPrefix+"keep", obj))
			}
		case "insert":
			if args.Len() > 1 {
				args.Index(1).Set(in.filter(args.Index(1), guardPrefix+"keep", obj))
			}
		case "split", "rsplit", "splitlines":
			obj.Set(in.filterArgs(obj, guardPrefix+"split", args, field(s, "kwargs")))
		default:
			// upper, strip, find, count, startswith, items, ...: their
			// work is the length of what they read.
			obj.Set(in.filter(obj, guardPrefix+"cost"))
		}
	case "itemExpr":
		in.measure(field(s, "key"))
	case "dictExpr":
		pairs := field(s, "pairs")
		for i := range pairs.Len() {
			in.measure(field(pairs.Index(i), "key"))
		}
	case "sliceExpr":
		if field(s, "step").IsNil() {
			return
		}
		for _, name := range []string{"start", "stop"} {
			if b := field(s, name); !b.IsNil() {
				b.Set(in.filter(b, guardPrefix+"index"))
			}
		}
	}
}

// measureArgs measures the non-literal arguments of a filter or method,
// which the engine prints as it pleases.
func (in *instrumenter) measureArgs(args, kwargs reflect.Value) {
	for i := range args.Len() {
		in.measure(args.Index(i))
	}
	for i := range kwargs.Len() {
		in.measure(field(kwargs.Index(i), "value"))
	}
}

// measure wraps the expression e in the walk guard unless it is a literal.
func (in *instrumenter) measure(e reflect.Value) {
	if e.IsNil() || typeName(e.Elem()) == "litExpr" || typeName(e.Elem()) == "filterExpr" && strings.HasPrefix(field(e.Elem().Elem(), "name").String(), guardPrefix) {
		return
	}
	e.Set(in.filter(e, guardPrefix+"walk"))
}

// filter builds the expression input|name(args...) as an interface value
// of the engine's expr type.
func (in *instrumenter) filter(input reflect.Value, name string, args ...reflect.Value) reflect.Value {
	p := reflect.New(nodeTypes.filterExpr.Elem())
	s := p.Elem()
	field(s, "expr").Set(input)
	field(s, "name").SetString(name)
	as := field(s, "args")
	list := reflect.MakeSlice(as.Type(), 0, len(args))
	for _, a := range args {
		list = reflect.Append(list, a)
	}
	as.Set(list)
	out := reflect.New(input.Type()).Elem()
	out.Set(p)
	return out
}

// filterArgs is filter with the arguments and keyword arguments of
// another call, shared (so evaluated twice: they are literals in every
// real template).
func (in *instrumenter) filterArgs(input reflect.Value, name string, args, kwargs reflect.Value) reflect.Value {
	out := in.filter(input, name)
	s := out.Elem().Elem()
	field(s, "args").Set(args)
	field(s, "kwargs").Set(kwargs)
	return out
}

// name builds a reference to the variable n.
func (in *instrumenter) name(n string) reflect.Value {
	p := reflect.New(nodeTypes.nameExpr.Elem())
	field(p.Elem(), "name").SetString(n)
	return p
}

// hook puts a call to the budget function kind ("step" or "call") at the
// start of the node list body, weighted by the body's nodes and text.
func (in *instrumenter) hook(body reflect.Value, kind string) {
	nodes, text := weigh(body)
	src := fmt.Sprintf("{{ %s%s(%d, %d) }}", guardPrefix, kind, nodes+iterationCost, text)
	h, ok := in.hooks[src]
	if !ok {
		t, err := jinja.Compile(src)
		if err != nil {
			in.err = fmt.Errorf("chat: template guard: %w", err)
			return
		}
		h = field(reflect.ValueOf(t).Elem(), "nodes").Index(0)
		in.hooks[src] = h
	}
	list := reflect.MakeSlice(body.Type(), 0, body.Len()+1)
	list = reflect.Append(list, h)
	list = reflect.AppendSlice(list, body)
	body.Set(list)
}

// weigh counts the nodes and expressions under v and the bytes of its
// text nodes, not descending into loop, macro and call bodies (which pay
// for themselves) other than v itself.
func weigh(v reflect.Value) (nodes, text int64) {
	var visit func(v reflect.Value, top bool)
	visit = func(v reflect.Value, top bool) {
		switch v.Kind() {
		case reflect.Slice:
			for i := range v.Len() {
				visit(v.Index(i), false)
			}
		case reflect.Struct:
			if v.Type().PkgPath() != nodeTypes.filterExpr.Elem().PkgPath() || v.Type() == reflect.TypeFor[jinja.Value]() {
				return
			}
			for i := range v.NumField() {
				visit(field(v, v.Type().Field(i).Name), false)
			}
		case reflect.Interface:
			if v.IsNil() || v.Elem().Kind() != reflect.Pointer || v.Elem().IsNil() {
				return
			}
			s := v.Elem().Elem()
			nodes++
			switch s.Type().Name() {
			case "textNode":
				text += int64(len(field(s, "text").String()))
			case "forNode", "macroNode", "callNode":
				if !top {
					visit(field(s, "iter"), false)
					return
				}
			}
			for i := range s.NumField() {
				visit(field(s, s.Type().Field(i).Name), false)
			}
		}
	}
	visit(v, true)
	return max(nodes, 1), text
}
