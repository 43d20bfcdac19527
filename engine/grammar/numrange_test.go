package grammar

import (
	"fmt"
	"math/big"
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

// TestIntegerRangesExact: for random ranges (negative, mixed, one-sided,
// exclusive, fractional bounds, near ±(2^53-1)) every integer in and
// around the range is accepted by the grammar iff it is in range, and
// SchemaCheck (where there is one) agrees.
func TestIntegerRangesExact(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(1))
	const big53 = 1<<53 - 1
	centres := []int64{0, 0, 0, 7, -7, 100, -100, 12345, -98765, big53, -big53, 1e15, -1e15}
	n := 300
	if testing.Short() {
		n = 60
	}
	for i := 0; i < n; i++ {
		c := centres[rng.Intn(len(centres))]
		span := int64(1) << uint(rng.Intn(40))
		lo := c - rng.Int63n(span+1)
		hi := lo + rng.Int63n(2*span+1)
		var kws []string
		hasLo, hasHi := rng.Intn(4) != 0, rng.Intn(4) != 0
		l, h := lo, hi // the inclusive integer bounds
		if hasLo {
			switch rng.Intn(3) {
			case 0:
				kws = append(kws, fmt.Sprintf(`"minimum":%d`, lo))
			case 1:
				kws = append(kws, fmt.Sprintf(`"exclusiveMinimum":%d`, lo))
				l = lo + 1
			case 2:
				kws = append(kws, fmt.Sprintf(`"minimum":%d.5`, lo)) // lo >= 0: lo.5 -> lo+1; lo < 0: -(|lo|.5) -> lo
				if lo >= 0 {
					l = lo + 1
				}
			}
		}
		if hasHi {
			switch rng.Intn(3) {
			case 0:
				kws = append(kws, fmt.Sprintf(`"maximum":%d`, hi))
			case 1:
				kws = append(kws, fmt.Sprintf(`"exclusiveMaximum":%d`, hi))
				h = hi - 1
			case 2:
				kws = append(kws, fmt.Sprintf(`"maximum":%d.5`, hi))
				if hi < 0 {
					h = hi - 1
				}
			}
		}
		if hasLo && hasHi && l > h {
			continue
		}
		schema := `{"type":"integer"` + strings.Repeat(",", min(1, len(kws))) + strings.Join(kws, ",") + "}"
		src, err := FromSchema([]byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		g, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v\n%s", schema, err, src)
		}
		check, err := SchemaCheck([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		var probes []int64
		for _, b := range []int64{l, h, 0, c} {
			for d := int64(-3); d <= 3; d++ {
				probes = append(probes, b+d)
			}
		}
		for k := 0; k < 10; k++ {
			probes = append(probes, lo-span+rng.Int63n(3*span+1))
		}
		for _, x := range probes {
			s := strconv.FormatInt(x, 10)
			if len(strings.TrimPrefix(s, "-")) > 16 {
				continue
			}
			in := (!hasLo || x >= l) && (!hasHi || x <= h)
			if got := accepts(t, g, s); got != in {
				t.Fatalf("%s: %s accepted=%v, in range=%v\n%s", schema, s, got, in, src)
			}
			if check != nil {
				if err := check([]byte(s)); (err == nil) != in {
					t.Fatalf("%s: %s check %v, in range=%v", schema, s, err, in)
				}
			}
		}
	}
}

// TestNumberRangesExact: for random bounds on a number, every number
// written without an exponent (up to 16 integral and 16 fraction
// digits, trailing zeros or not) is accepted by the grammar iff it is in
// range (a zero is never written "-0" here), and every accepted
// one passes SchemaCheck.
func TestNumberRangesExact(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(2))
	randDec := func() string {
		ip := []string{"0", "1", "2", "9", "10", "99", "100", "12345", "9007199254740991", "9999999999999999"}[rng.Intn(10)]
		s := ip
		if rng.Intn(3) != 0 {
			s += "." + strconv.Itoa(rng.Intn(1000))
			if rng.Intn(4) == 0 {
				s += "0"
			}
		}
		if rng.Intn(2) == 0 {
			s = "-" + s
		}
		return s
	}
	n := 300
	if testing.Short() {
		n = 60
	}
	for i := 0; i < n; i++ {
		var kws []string
		var lo, hi *big.Rat
		var loEx, hiEx bool
		if rng.Intn(4) != 0 {
			d := randDec()
			lo, _ = new(big.Rat).SetString(d)
			loEx = rng.Intn(2) == 0
			kws = append(kws, fmt.Sprintf(`"%s":%s`, map[bool]string{false: "minimum", true: "exclusiveMinimum"}[loEx], d))
		}
		if rng.Intn(4) != 0 || lo == nil {
			d := randDec()
			if lo != nil && rng.Intn(2) == 0 { // a narrow range
				r, _ := new(big.Rat).SetString(d)
				d = new(big.Rat).Add(lo, new(big.Rat).Abs(new(big.Rat).Quo(r, big.NewRat(1000, 1)))).FloatString(6)
			}
			hi, _ = new(big.Rat).SetString(d)
			hiEx = rng.Intn(2) == 0
			kws = append(kws, fmt.Sprintf(`"%s":%s`, map[bool]string{false: "maximum", true: "exclusiveMaximum"}[hiEx], d))
		}
		inRange := func(v *big.Rat) bool {
			if lo != nil && (v.Cmp(lo) < 0 || loEx && v.Cmp(lo) == 0) {
				return false
			}
			if hi != nil && (v.Cmp(hi) > 0 || hiEx && v.Cmp(hi) == 0) {
				return false
			}
			return true
		}
		schema := `{"type":"number",` + strings.Join(kws, ",") + "}"
		src, err := FromSchema([]byte(schema))
		if lo != nil && hi != nil && (lo.Cmp(hi) > 0 || (loEx || hiEx) && lo.Cmp(hi) == 0) {
			continue // refused or empty: TestNumericBounds covers the error
		}
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		g, err := Parse(src)
		if err != nil {
			t.Fatalf("%s: %v\n%s", schema, err, src)
		}
		check, err := SchemaCheck([]byte(schema))
		if err != nil || check == nil {
			t.Fatalf("%s: check %v", schema, err)
		}
		// Probes: the bounds and numbers near them at several scales,
		// written with fractions of every length.
		var probes []*big.Rat
		for _, b := range []*big.Rat{lo, hi, new(big.Rat)} {
			if b == nil {
				continue
			}
			for _, e := range []int64{1, 1000, 1e6, 1e10, 1e16} {
				step := big.NewRat(1, e)
				for d := int64(-2); d <= 2; d++ {
					probes = append(probes, new(big.Rat).Add(b, new(big.Rat).Mul(step, big.NewRat(d, 1))))
				}
			}
			probes = append(probes, new(big.Rat).Add(b, big.NewRat(rng.Int63n(1e6)-5e5, 1e5)))
		}
		for _, v := range probes {
			for _, s := range writings(v) {
				got := accepts(t, g, s)
				in := inRange(v)
				if got && !in {
					t.Fatalf("%s: %s accepted, out of range\n%s", schema, s, src)
				}
				if !got && in {
					t.Fatalf("%s: %s refused, in range\n%s", schema, s, src)
				}
				if got {
					if err := check([]byte(s)); err != nil {
						t.Fatalf("%s: %s accepted, check: %v", schema, s, err)
					}
				}
			}
		}
	}
}

// writings is v written without an exponent in the grammar's reach: its
// shortest form and with trailing zeros to 16 fraction digits (none if
// v needs more than 16 fraction or integral digits).
func writings(v *big.Rat) []string {
	s := v.FloatString(fracDigits)
	if new(big.Rat).SetFrac(big.NewInt(0), big.NewInt(1)).Cmp(v) == 0 {
		s = "0." + strings.Repeat("0", fracDigits)
	}
	if r, _ := new(big.Rat).SetString(s); r.Cmp(v) != 0 {
		return nil
	}
	ip, fp, _ := strings.Cut(s, ".")
	if len(strings.TrimPrefix(ip, "-")) > 16 {
		return nil
	}
	short := strings.TrimRight(fp, "0")
	out := []string{ip + "." + fp}
	if short == "" {
		out = append(out, ip, ip+".0")
	} else {
		out = append(out, ip+"."+short)
		if len(short) < fracDigits {
			out = append(out, ip+"."+short+"0")
		}
	}
	return out
}
