package sandbox

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// Budget is what one render may still spend, shared by the guard
// functions instrument puts into the template. The first limit hit is kept:
// the engine discards some errors (those of slice bounds), and Render
// reports it all the same.
type Budget struct {
	lim      Limits
	steps    int64
	bytes    int64
	err      error
	pcs      []uintptr
	ctx      context.Context // the request's: a render stops at its cancellation
	deadline time.Time       // the wall-clock bound of the render (Limits.Time)
	checked  int64           // steps at the last look at the clock
}

// NewBudget starts a render's budget under lim, ending with ctx.
func NewBudget(lim Limits, ctx context.Context) *Budget {
	b := &Budget{lim: lim, ctx: ctx}
	if lim.Time > 0 {
		b.deadline = time.Now().Add(lim.Time)
	}
	return b
}

// stringCost is the bytes of a string operation (a method, a filter, a
// test with in) that cost one step: a method on a 4 MiB string costs
// 512 Ki steps, so eight of them take the default budget.
const stringCost = 8

// valueBytes is what one element of a list a template builds costs in
// memory, charged to the byte budget before the list is built.
const valueBytes = 64

// chargeString charges the work of an operation over a string of n bytes.
func (b *Budget) chargeString(n int64) error {
	return b.step(n/stringCost + 1)
}

// Err returns the first limit the render hit, or nil: the engine
// discards some errors (those of slice bounds), and a render reports it
// all the same.
func (b *Budget) Err() error { return b.err }

// Reset starts a further render on b with a clean slate of errors; what
// was spent stays spent (Compile's trial renders share one budget).
func (b *Budget) Reset() { b.err = nil }

func (b *Budget) fail(err error) error {
	if b.err == nil {
		b.err = err
	}
	return b.err
}

// step charges n units of work.
func (b *Budget) step(n int64) error {
	if b.err != nil {
		return b.err
	}
	b.steps += n
	if b.steps > b.lim.Steps {
		return b.fail(Limitf("more than %d steps (a loop or recursion without end?)", b.lim.Steps))
	}
	// The clock and the request, every 1024 steps (and at every large
	// charge): the steps bound the work, these the time.
	if b.steps-b.checked >= 1024 || n >= 1024 {
		b.checked = b.steps
		if b.ctx != nil && b.ctx.Err() != nil {
			return b.fail(fmt.Errorf("chat: render cancelled: %w", context.Cause(b.ctx)))
		}
		if !b.deadline.IsZero() && time.Now().After(b.deadline) {
			return b.fail(Limitf("a render longer than %v", b.lim.Time))
		}
	}
	return nil
}

// produce charges n bytes built.
func (b *Budget) produce(n int64) error {
	if b.err != nil {
		return b.err
	}
	b.bytes += n
	if b.bytes > b.lim.Bytes {
		return b.fail(Limitf("builds more than %d bytes", b.lim.Bytes))
	}
	return nil
}

// sized checks that a string of n bytes may be built and charges it.
func (b *Budget) sized(n int64) error {
	if n > int64(b.lim.Output) {
		return b.fail(Limitf("a string of %d bytes (limit %d)", n, b.lim.Output))
	}
	return b.produce(n)
}

// depth fails when the Go stack under the caller is deeper than the
// limit: it runs at each macro call, so recursion stops long before the
// stack grows large (an overflow would kill the process).
func (b *Budget) depth() error {
	if b.pcs == nil {
		b.pcs = make([]uintptr, b.lim.Frames)
	}
	if runtime.Callers(1, b.pcs) == len(b.pcs) {
		return b.fail(Limitf("macro calls nested deeper than %d stack frames (recursion without end?)", b.lim.Frames))
	}
	return nil
}

// measure walks v as printing it would, returning an upper bound on its
// printed size, and fails when that exceeds the output limit, when v nests
// deeper than the nesting limit, or when it contains a cycle. Shared lists
// and dicts are measured once each (a memo), but count as often as they
// appear, as printing repeats them.
func (b *Budget) measure(v jinja.Value) (int64, error) {
	n, _, err := b.measureHeight(v)
	return n, err
}

// measureHeight is measure that also returns how deep v nests.
func (b *Budget) measureHeight(v jinja.Value) (size, height int64, err error) {
	if !v.IsList() && !v.IsDict() {
		return int64(len(printed(v))), 0, nil
	}
	m := measurer{b: b, memo: map[any]measured{}, open: map[any]bool{}}
	r, err := m.value(v, 0)
	if err != nil {
		return 0, 0, b.fail(err)
	}
	return r.size, r.height, nil
}

type measured struct{ size, height int64 }

type measurer struct {
	b    *Budget
	memo map[any]measured
	open map[any]bool
}

func (m *measurer) value(v jinja.Value, depth int) (measured, error) {
	var key any
	switch {
	case v.IsList():
		key = v.AsList()
	case v.IsDict():
		key = v.AsDict()
	case v.IsString():
		return measured{size: int64(len(v.AsString())) + 2}, nil
	default:
		return measured{size: int64(len(v.String()))}, nil
	}
	if r, ok := m.memo[key]; ok {
		return r, nil
	}
	if m.open[key] {
		return measured{}, Limitf("a list or dict that contains itself")
	}
	if depth >= m.b.lim.Nesting {
		return measured{}, Limitf("lists or dicts nested deeper than %d", m.b.lim.Nesting)
	}
	m.open[key] = true
	r := measured{size: 2, height: 1}
	add := func(c measured, extra int64) error {
		r.size += c.size + extra
		r.height = max(r.height, c.height+1)
		if r.size > int64(m.b.lim.Output) {
			return Limitf("a value that prints to more than %d bytes", m.b.lim.Output)
		}
		return nil
	}
	if v.IsList() {
		items := v.AsList().Items
		if err := m.b.step(int64(len(items))); err != nil {
			return measured{}, err
		}
		for _, it := range items {
			c, err := m.value(it, depth+1)
			if err != nil {
				return measured{}, err
			}
			if err := add(c, 2); err != nil {
				return measured{}, err
			}
		}
	} else {
		d := v.AsDict()
		if err := m.b.step(int64(len(d.Keys))); err != nil {
			return measured{}, err
		}
		for _, k := range d.Keys {
			val, _ := d.Get(k)
			c, err := m.value(val, depth+1)
			if err != nil {
				return measured{}, err
			}
			if err := add(c, int64(len(k))+6); err != nil {
				return measured{}, err
			}
		}
	}
	delete(m.open, key)
	m.memo[key] = r
	return r, nil
}

// reaches reports whether target (a list or dict) is reachable from v.
func reaches(v, target jinja.Value, seen map[any]bool) bool {
	var key, tk any
	switch {
	case v.IsList():
		key = v.AsList()
	case v.IsDict():
		key = v.AsDict()
	default:
		return false
	}
	switch {
	case target.IsList():
		tk = target.AsList()
	case target.IsDict():
		tk = target.AsDict()
	default:
		return false
	}
	if key == tk {
		return true
	}
	if seen[key] {
		return false
	}
	seen[key] = true
	if v.IsList() {
		for _, it := range v.AsList().Items {
			if reaches(it, target, seen) {
				return true
			}
		}
		return false
	}
	d := v.AsDict()
	for _, k := range d.Keys {
		if val, _ := d.Get(k); reaches(val, target, seen) {
			return true
		}
	}
	return false
}

// printed is the engine's printing of a value (its printValue).
func printed(v jinja.Value) string {
	switch {
	case v.IsUndefined(), v.IsNone(), v.IsCallable():
		return ""
	case v.IsString():
		return v.AsString()
	default:
		return v.String()
	}
}

// toInt and toFloat are the engine's numeric conversions (toInt64,
// toFloat64) for the operands the guarded operators see.
func toInt(v jinja.Value) int64 {
	i, _ := numbers(v)
	return i
}

func toFloat(v jinja.Value) float64 {
	_, f := numbers(v)
	return f
}

func numbers(v jinja.Value) (int64, float64) {
	switch {
	case v.IsInt():
		return v.AsInt(), float64(v.AsInt())
	case v.IsFloat():
		return int64(v.AsFloat()), v.AsFloat()
	case v.IsBool():
		if v.AsBool() {
			return 1, 1
		}
	case v.IsString():
		var n int64
		var f float64
		fmt.Sscanf(v.AsString(), "%d", &n)
		fmt.Sscanf(v.AsString(), "%f", &f)
		return n, f
	}
	return 0, 0
}

// Guards returns the functions Instrument refers to, bound to b: the
// render passes them as template variables. tojson is the template's
// tojson filter (Hugging Face's, which Instrument puts in the engine's
// place), which the guards call once its output is bounded.
func (b *Budget) Guards(tojson func(args []jinja.Value, kw map[string]jinja.Value) (jinja.Value, error)) map[string]jinja.Value {
	g := map[string]jinja.Value{}
	fn := func(name string, f func(args []jinja.Value, kw map[string]jinja.Value) (jinja.Value, error)) {
		g[guardPrefix+name] = jinja.NewCallable(name, f)
	}
	arg := func(args []jinja.Value, i int) jinja.Value {
		if i < len(args) {
			return args[i]
		}
		return jinja.Undefined()
	}
	// step(nodes, text) opens a loop iteration; call(nodes, text) a macro
	// or call block, and checks the depth of the stack too.
	fn("step", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if err := b.step(toInt(arg(args, 0))); err != nil {
			return jinja.Undefined(), err
		}
		return jinja.NewString(""), b.produce(toInt(arg(args, 1)))
	})
	fn("call", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if err := b.depth(); err != nil {
			return jinja.Undefined(), err
		}
		if err := b.step(toInt(arg(args, 0))); err != nil {
			return jinja.Undefined(), err
		}
		return jinja.NewString(""), b.produce(toInt(arg(args, 1)))
	})
	// print(v) passes v on to be printed once measured and charged; str(v)
	// does the same for a filter that turns v into a string about its size;
	// walk(v) only measures.
	fn("print", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		v := arg(args, 0)
		n, err := b.measure(v)
		if err != nil {
			return jinja.Undefined(), err
		}
		return v, b.sized(n)
	})
	// read measures v and charges reading it, for the filters below.
	read := func(v jinja.Value) (int64, error) {
		n, err := b.measure(v)
		if err != nil {
			return 0, err
		}
		return n, b.chargeString(n)
	}
	fn("str", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		v := arg(args, 0)
		n, err := read(v)
		if err != nil {
			return jinja.Undefined(), err
		}
		return v, b.sized(n)
	})
	// cost(v) charges an operation that reads all of v (a method, in):
	// its length in steps, before the operation runs.
	fn("cost", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		v := arg(args, 0)
		var n int64
		switch {
		case v.IsString():
			n = int64(len(v.AsString()))
		case v.IsList():
			n = int64(len(v.AsList().Items)) * stringCost
		case v.IsDict():
			n = int64(v.AsDict().Len()) * stringCost
		}
		return v, b.chargeString(n)
	})
	// listof(v) is v|list: a string becomes one element per character,
	// charged before the list is built.
	fn("listof", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		v := arg(args, 0)
		n, err := read(v)
		if err != nil {
			return jinja.Undefined(), err
		}
		return v, b.produce(n * valueBytes)
	})
	// split(s, sep) is s.split(sep): one element per piece, charged before.
	fn("split", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		v := arg(args, 0)
		str := printed(v)
		if err := b.chargeString(int64(len(str))); err != nil {
			return jinja.Undefined(), err
		}
		var pieces int64
		switch sep := arg(args, 1); {
		case sep.IsUndefined() || sep.IsNone():
			pieces = int64(len(strings.Fields(str)))
		case printed(sep) == "":
			pieces = int64(len(str))
		default:
			pieces = int64(strings.Count(str, printed(sep))) + 1
		}
		return v, b.produce(pieces*valueBytes + int64(len(str)))
	})
	fn("walk", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		v := arg(args, 0)
		_, err := b.measure(v)
		return v, err
	})
	// keep(v[, container]) passes on a value about to be stored (in a
	// variable, or into container), refusing one that nests too deep or
	// that contains container (a cycle, which printing would follow
	// forever), and charges its size.
	fn("keep", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		v := arg(args, 0)
		if len(args) > 1 && reaches(v, args[1], map[any]bool{}) {
			return jinja.Undefined(), b.fail(Limitf("a list or dict stored into itself"))
		}
		if !v.IsList() && !v.IsDict() {
			return v, nil
		}
		n, err := b.measure(v)
		if err != nil {
			return jinja.Undefined(), err
		}
		if len(args) > 1 {
			return v, b.produce(n)
		}
		return v, nil
	})
	// cat, add and mul are the engine's ~, + and * with the size of a
	// string or list result checked before it is built.
	cat := func(l, r jinja.Value) (jinja.Value, error) {
		ls, rs := printed(l), printed(r)
		if err := b.sized(int64(len(ls)) + int64(len(rs))); err != nil {
			return jinja.Undefined(), err
		}
		return jinja.NewString(ls + rs), nil
	}
	fn("cat", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		return cat(arg(args, 0), arg(args, 1))
	})
	fn("add", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		l, r := arg(args, 0), arg(args, 1)
		switch {
		case l.IsString() || r.IsString():
			return cat(l, r)
		case l.IsList() && r.IsList():
			a, c := l.AsList().Items, r.AsList().Items
			if err := b.step(int64(len(a) + len(c))); err != nil {
				return jinja.Undefined(), err
			}
			if err := b.produce(16 * int64(len(a)+len(c))); err != nil {
				return jinja.Undefined(), err
			}
			items := make([]jinja.Value, 0, len(a)+len(c))
			return jinja.NewList(append(append(items, a...), c...)), nil
		case l.IsFloat() || r.IsFloat():
			return jinja.NewFloat(toFloat(l) + toFloat(r)), nil
		}
		return jinja.NewInt(toInt(l) + toInt(r)), nil
	})
	fn("mul", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		l, r := arg(args, 0), arg(args, 1)
		switch {
		case l.IsString() && r.IsInt():
			s, n := l.AsString(), r.AsInt()
			if n < 0 {
				return jinja.Undefined(), errors.New("chat: negative repeat count")
			}
			if len(s) > 0 && n > int64(b.lim.Output)/int64(len(s)) {
				return jinja.Undefined(), b.fail(Limitf("a string of %d times %d bytes (limit %d)", n, len(s), b.lim.Output))
			}
			if err := b.sized(int64(len(s)) * n); err != nil {
				return jinja.Undefined(), err
			}
			return jinja.NewString(strings.Repeat(s, int(n))), nil
		case l.IsFloat() || r.IsFloat():
			return jinja.NewFloat(toFloat(l) * toFloat(r)), nil
		}
		return jinja.NewInt(toInt(l) * toInt(r)), nil
	})
	// index checks a slice bound given with a step (the engine sizes the
	// result from the bounds before it clamps them to the sequence).
	fn("index", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		v := arg(args, 0)
		if n := toInt(v); n > int64(b.lim.Output) || n < -int64(b.lim.Output) {
			return jinja.Undefined(), b.fail(Limitf("a slice bound of %d", n))
		}
		return v, nil
	})
	// The filters and methods that can build far more than their input:
	// each guard sees the call's arguments and passes the input on.
	pass := func(v jinja.Value, n int64) (jinja.Value, error) {
		if err := b.sized(n); err != nil {
			return jinja.Undefined(), err
		}
		return v, nil
	}
	fn("replace", func(args []jinja.Value, kw map[string]jinja.Value) (jinja.Value, error) {
		// s|replace(old, new[, count]) and s.replace(old, new[, count]).
		s := arg(args, 0)
		str := printed(s)
		old, repl := printed(arg(args, 1)), printed(arg(args, 2))
		n := int64(strings.Count(str, old))
		if c, ok := kw["count"]; ok {
			n = min(n, max(toInt(c), 0))
		} else if len(args) > 3 && toInt(args[3]) >= 0 {
			n = min(n, toInt(args[3]))
		}
		return pass(s, int64(len(str))+n*int64(len(repl)))
	})
	fn("format", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		// s.format(a, b, ...) replaces {i} and one {} per argument.
		s := arg(args, 0)
		str := printed(s)
		size := int64(len(str))
		for i, a := range args[min(1, len(args)):] {
			k := int64(strings.Count(str, fmt.Sprintf("{%d}", i)) + 1)
			size += k * int64(len(printed(a)))
			if size > int64(b.lim.Output) {
				break
			}
		}
		return pass(s, size)
	})
	fn("indent", func(args []jinja.Value, kw map[string]jinja.Value) (jinja.Value, error) {
		s := arg(args, 0)
		width := int64(4)
		if len(args) > 1 {
			width = toInt(args[1])
		}
		if w, ok := kw["width"]; ok {
			width = toInt(w)
		}
		if width < 0 {
			return jinja.Undefined(), errors.New("chat: indent: negative width")
		}
		str := printed(s)
		lines := int64(strings.Count(str, "\n") + 1)
		if width > int64(b.lim.Output) || lines*width > int64(b.lim.Output) {
			return jinja.Undefined(), b.fail(Limitf("indent(%d) of %d lines", width, lines))
		}
		return pass(s, int64(len(str))+lines*width)
	})
	fn("join", func(args []jinja.Value, kw map[string]jinja.Value) (jinja.Value, error) {
		v := arg(args, 0)
		n, err := b.measure(v)
		if err != nil {
			return jinja.Undefined(), err
		}
		sep := printed(arg(args, 1))
		if d, ok := kw["d"]; ok {
			sep = printed(d)
		}
		if v.IsList() {
			n += int64(v.AsList().Len()) * int64(len(sep))
		}
		return pass(v, n)
	})
	g[guardPrefix+"pytojson"] = jinja.NewCallable("tojson", tojson)
	fn("tojson", func(args []jinja.Value, kw map[string]jinja.Value) (jinja.Value, error) {
		v := arg(args, 0)
		n, height, err := b.measureHeight(v)
		if err != nil {
			return jinja.Undefined(), err
		}
		// Every element prints at least two bytes, so there are at most
		// n/2 of them, each on a line of its own when indented (at most
		// height times indent spaces) and each followed by separators.
		// (Escaping can grow a string up to six times more: that stays
		// within the output limit times six, once.)
		extra := int64(0)
		if in, ok := kw["indent"]; ok && !in.IsNone() && !in.IsUndefined() {
			w := toInt(in)
			if w < 0 || w > 64 {
				return jinja.Undefined(), b.fail(Limitf("tojson(indent=%d) (limit 64)", w))
			}
			extra += w*height + 1
		}
		if s, ok := kw["separators"]; ok {
			sn, err := b.measure(s)
			if err != nil {
				return jinja.Undefined(), err
			}
			extra += sn
		}
		return pass(v, n+n/2*extra)
	})
	return g
}

// maxRange bounds the list range() builds: the engine materializes it, so
// range(10**12) in a hostile template would exhaust memory (and each
// element takes 24 bytes: 2^16 of them take 1.5 MiB).
const maxRange = 1 << 16

// Range is Python's range(stop) / range(start, stop[, step]) over
// integers, refusing lists longer than maxRange and charging b a step per
// element: the template's range.
func (b *Budget) Range(args []jinja.Value) (jinja.Value, error) {
	var n [3]int64
	for i, a := range args {
		if i >= len(n) || !a.IsInt() {
			return jinja.Undefined(), errors.New("range: expected 1 to 3 integer arguments")
		}
		n[i] = a.AsInt()
	}
	start, stop, step := int64(0), int64(0), int64(1)
	switch len(args) {
	case 1:
		stop = n[0]
	case 2:
		start, stop = n[0], n[1]
	case 3:
		start, stop, step = n[0], n[1], n[2]
	default:
		return jinja.Undefined(), errors.New("range: expected 1 to 3 integer arguments")
	}
	if step == 0 {
		return jinja.Undefined(), errors.New("range: step must not be zero")
	}
	var count uint64
	switch {
	case step > 0 && stop > start:
		count = (uint64(stop-start) + uint64(step) - 1) / uint64(step)
	case step < 0 && start > stop:
		count = (uint64(start-stop) + uint64(-step) - 1) / uint64(-step)
	}
	if count > maxRange {
		return jinja.Undefined(), b.fail(Limitf("range() of %d elements (limit %d)", count, maxRange))
	}
	if err := b.step(int64(count)); err != nil {
		return jinja.Undefined(), err
	}
	items := make([]jinja.Value, count)
	for i := range items {
		items[i] = jinja.NewInt(start + int64(i)*step)
	}
	return jinja.NewList(items), nil
}
