package grammar

import (
	"context"
	"crypto/sha256"
	"sync"
)

// cacheSize is how many compiled grammars a vocabulary keeps (the masks
// computed for a schema are worth keeping across requests: Home
// Assistant sends the same few schemas again and again).
const cacheSize = 32

type cache struct {
	mu    sync.Mutex
	m     map[[32]byte]*Compiled
	order [][32]byte
}

func (v *Vocab) cached(key [32]byte, build func() (*Compiled, error)) (*Compiled, error) {
	v.cache.mu.Lock()
	if c, ok := v.cache.m[key]; ok {
		v.cache.mu.Unlock()
		return c, nil
	}
	v.cache.mu.Unlock()
	c, err := build()
	if err != nil {
		return nil, err
	}
	v.cache.mu.Lock()
	defer v.cache.mu.Unlock()
	if v.cache.m == nil {
		v.cache.m = map[[32]byte]*Compiled{}
	}
	if old, ok := v.cache.m[key]; ok {
		return old, nil
	}
	if len(v.cache.order) >= cacheSize {
		delete(v.cache.m, v.cache.order[0])
		v.cache.order = v.cache.order[1:]
	}
	v.cache.m[key] = c
	v.cache.order = append(v.cache.order, key)
	return c, nil
}

// Compile parses a GBNF grammar and binds it to v, or returns the
// compiled grammar of the same source from v's cache.
func (v *Vocab) Compile(src string) (*Compiled, error) {
	return v.CompileContext(context.Background(), src)
}

// CompileContext is Compile whose compile ctx ends.
func (v *Vocab) CompileContext(ctx context.Context, src string) (*Compiled, error) {
	return v.cached(sha256.Sum256([]byte("gbnf\x00"+src)), func() (*Compiled, error) {
		g, err := ParseContext(ctx, src)
		if err != nil {
			return nil, err
		}
		return Bind(g, v), nil
	})
}

// BindCached binds an already parsed grammar to v, or returns the bound
// grammar of the same hash from v's cache: a request's grammar is parsed
// once, where it was compiled (engine/constraint), and not again here.
func (v *Vocab) BindCached(g *Grammar) *Compiled {
	h := g.Hash()
	c, _ := v.cached(sha256.Sum256(append([]byte("parsed\x00"), h[:]...)), func() (*Compiled, error) {
		return Bind(g, v), nil
	})
	return c
}

// CompileSchema converts a JSON schema and binds it to v, cached by the
// schema's hash.
func (v *Vocab) CompileSchema(schema []byte) (*Compiled, error) {
	return v.cached(sha256.Sum256(append([]byte("schema\x00"), schema...)), func() (*Compiled, error) {
		src, err := FromSchema(schema)
		if err != nil {
			return nil, err
		}
		g, err := Parse(src)
		if err != nil {
			return nil, err
		}
		return Bind(g, v), nil
	})
}

// parsedCache keeps the last parsed grammars by source hash.
type parsedCache struct {
	mu    sync.Mutex
	m     map[[32]byte]*Grammar
	order [][32]byte
}

var parsed parsedCache

func (c *parsedCache) get(k [32]byte) *Grammar {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *parsedCache) put(k [32]byte, g *Grammar) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[32]byte]*Grammar{}
	}
	if _, ok := c.m[k]; ok {
		return
	}
	if len(c.order) >= 2*cacheSize {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[k] = g
	c.order = append(c.order, k)
}
