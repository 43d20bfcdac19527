package daemon

import (
	"fmt"
	"strconv"
)

// ctxSize is the ctx setting: "auto" (0, the default: the model's trained
// context capped by the memory available) or a number of tokens. It is a
// TOML value and a flag.
type ctxSize int

func (c *ctxSize) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case string:
		return c.Set(x)
	case int64:
		if x < 0 || x > 1<<24 {
			return fmt.Errorf("ctx = %d: want \"auto\" or a number of tokens from 1 to %d", x, 1<<24)
		}
		*c = ctxSize(x)
		return nil
	}
	return fmt.Errorf("ctx = %v: want \"auto\" or a number of tokens", v)
}

func (c *ctxSize) Set(s string) error {
	if s == "auto" || s == "0" {
		*c = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 1<<24 {
		return fmt.Errorf("%q is not \"auto\" or a number of tokens", s)
	}
	*c = ctxSize(n)
	return nil
}

func (c *ctxSize) String() string {
	if *c == 0 {
		return "auto"
	}
	return strconv.Itoa(int(*c))
}

func (c *ctxSize) Type() string { return "auto|N" }

// parallelN is the config's parallel (--parallel): the requests decoded
// together, "auto" (0: engine.AutoParallel, from the memory) or 1 to 16.
type parallelN int

func (p *parallelN) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case string:
		return p.Set(x)
	case int64:
		return p.Set(strconv.FormatInt(x, 10))
	}
	return fmt.Errorf("parallel = %v: want \"auto\" or a number of requests from 1 to 16", v)
}

func (p *parallelN) Set(s string) error {
	if s == "auto" {
		*p = 0
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 16 {
		return fmt.Errorf("parallel %q: want \"auto\" or a number of requests from 1 to 16", s)
	}
	*p = parallelN(n)
	return nil
}

func (p *parallelN) String() string {
	if *p == 0 {
		return "auto"
	}
	return strconv.Itoa(int(*p))
}

func (p *parallelN) Type() string { return "auto|N" }

// engine is the engine's Options.Parallel: -1 for auto.
func (p parallelN) engine() int {
	if p == 0 {
		return -1
	}
	return int(p)
}
