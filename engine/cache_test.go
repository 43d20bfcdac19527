package engine

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/geisten/geist/engine/chat"
	"github.com/geisten/geist/engine/model"
	"github.com/geisten/geist/engine/spec"
	"github.com/geisten/geist/engine/zoo"
)

// memCache is a PromptCache and DraftStatsStore in memory, standing in
// for storage.Cache (whose own tests cover the file): the engine's tests
// need no storage, and engines that share one memCache are processes
// sharing cache.db.
type memCache struct {
	mu      sync.Mutex
	entries []memEntry
	stats   map[string][]byte
}

type memEntry struct {
	model []byte
	toks  []int32
	blob  []byte
}

func (c *memCache) Lookup(model []byte, toks []int32) (int, []byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	best := -1
	for i, en := range c.entries {
		if bytes.Equal(en.model, model) && len(en.toks) <= len(toks) && slices.Equal(en.toks, toks[:len(en.toks)]) &&
			(best < 0 || len(en.toks) > len(c.entries[best].toks)) {
			best = i
		}
	}
	if best < 0 {
		return 0, nil, false
	}
	en := c.entries[best]
	return len(en.toks), bytes.Clone(en.blob), true
}

func (c *memCache) Put(model []byte, toks []int32, blob []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = append(c.entries, memEntry{bytes.Clone(model), slices.Clone(toks), bytes.Clone(blob)})
	return nil
}

func (c *memCache) PutDraftStats(model, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stats == nil {
		c.stats = map[string][]byte{}
	}
	c.stats[string(model)] = bytes.Clone(data)
	return nil
}

func (c *memCache) DraftStats(model []byte) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.stats[string(model)]
	return bytes.Clone(b), ok
}

// TestPromptCacheRestore: greedy output after a restore from the prompt
// cache is token-identical to a cold run, for every zoo model. The
// restored prefix was computed by another engine (another process sharing
// cache.db) in other batches; batch invariance makes the state
// bit-identical.
func TestPromptCacheRestore(t *testing.T) {
	files, _ := filepath.Glob(zoo.Path(t, "models", "*.gguf"))
	promptCacheRestore(t, files)
}

func promptCacheRestore(t *testing.T, files []string, specs ...SpecOptions) {
	if len(specs) == 0 {
		specs = []SpecOptions{{Mode: SpecOff}}
	}
	system := "You are the house assistant. You answer briefly. The kitchen lights are on, the garden lights are off, the front door is locked and the heating is set to twenty degrees. Never invent devices."
	questions := []string{"Are the garden lights on?", "Is the front door locked?"}
	n := 24
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".gguf")
		if testing.Short() && !strings.Contains(name, "Q4_0") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			cache := &memCache{}
			req := func(q string) Request {
				return Request{Messages: []chat.Message{{Role: "system", Content: system}, {Role: "user", Content: q}},
					MaxTokens: n, Sampling: greedy(), Spec: SpecOptions{Mode: SpecOff}}
			}
			type turn struct {
				q  string
				sp SpecOptions
			}
			var turns []turn // the other question, then the first again, under each speculation
			for _, sp := range specs {
				turns = append(turns, turn{questions[1], sp}, turn{questions[0], sp})
			}
			// Cold runs, no cache at all.
			cold := map[string][]int32{}
			e0 := loadFile(t, path, Options{Ctx: 512, Batch: 32})
			for _, q := range questions {
				r := req(q)
				var ids []int32
				r.OnToken = func(id int32) { ids = append(ids, id) }
				if _, err := e0.Generate(t.Context(), r); err != nil {
					t.Fatal(err)
				}
				e0.Reset()
				cold[q] = ids
			}
			// First process: fills the cache (batch 7: other batches than the cold run).
			e1 := loadFile(t, path, Options{Ctx: 512, Batch: 7, Cache: cache})
			r := req(questions[0])
			if _, err := e1.Generate(t.Context(), r); err != nil {
				t.Fatal(err)
			}
			e1.Close()
			// Second process: same system prompt, the other question, and
			// the first question again.
			e2 := loadFile(t, path, Options{Ctx: 512, Batch: 32, Cache: cache})
			installLastMLPSkip(e2) // for SpecSelf: a draft that always drafts, and is often wrong
			for i, tu := range turns {
				q := tu.q
				e2.Reset()
				r := req(q)
				r.Spec = tu.sp
				var ids []int32
				r.OnToken = func(id int32) { ids = append(ids, id) }
				st, err := e2.Generate(t.Context(), r)
				if err != nil {
					t.Fatal(err)
				}
				if st.ReusedTokens < minRestore {
					t.Errorf("request %d: reused %d of %d prompt tokens: no restore from the cache", i, st.ReusedTokens, st.PromptTokens)
				}
				// After a Reset every reused token came from the cache.
				if st.RestoredTokens != st.ReusedTokens || st.EvaluatedTokens != st.PromptTokens-st.ReusedTokens {
					t.Errorf("request %d: %d prompt tokens, %d reused, %d restored, %d evaluated", i, st.PromptTokens, st.ReusedTokens, st.RestoredTokens, st.EvaluatedTokens)
				}
				if tu.sp.Fixed && st.Drafted == 0 {
					t.Errorf("request %d (%+v): nothing drafted after the restore", i, tu.sp)
				}
				if !equal(ids, cold[q]) {
					t.Errorf("request %d (%+v): after a restore\n got %v\nwant %v (cold)", i, tu.sp, ids, cold[q])
				}
			}
		})
	}
}

// TestDraftStatsPersist: the n-gram statistics learned in one process draft
// in the next one.
func TestDraftStatsPersist(t *testing.T) {
	cache := &memCache{}
	e1 := load(t, "stories260K-Q4_0", Options{Ctx: 256, Cache: cache})
	if _, err := e1.Generate(t.Context(), Request{Prompt: "Once upon a time", MaxTokens: 64, Sampling: greedy()}); err != nil {
		t.Fatal(err)
	}
	// The background skipped-layer search a request starts may end and
	// be installed (seeding the controller's estimate for the self draft)
	// any time before Close saves the statistics: wait for it, so that the
	// estimates read here are the ones saved (under make test's load the
	// search once ended between the read and Close).
	e1.WaitTuned()
	learned := e1.spec.ngram.Len()
	accept := e1.spec.ctrl.MarshalAcceptance()
	e1.Close()
	e2 := load(t, "stories260K-Q4_0", Options{Ctx: 256, Cache: cache})
	if learned == 0 || e2.spec.ngram.Len() != learned {
		t.Errorf("n-gram contexts: learned %d, restored %d", learned, e2.spec.ngram.Len())
	}
	if !bytes.Equal(e2.spec.ctrl.MarshalAcceptance(), accept) {
		t.Error("the controller's acceptance estimates were not restored")
	}
}

// TestSelfSpecPersist: the skipped-layer choice made by a background
// search after a request is saved with the drafting statistics and used
// by the next process without a new search; a damaged choice is refused,
// logged, and searched afresh.
func TestSelfSpecPersist(t *testing.T) {
	cache := &memCache{}
	e1 := load(t, "stories260K-F32", Options{Ctx: 256, Cache: cache})
	ids, _ := generateIDs(t, e1, "Once upon a time", 96, SpecOptions{Mode: SpecAuto}, greedy())
	if len(ids) < 64 {
		t.Fatalf("only %d tokens generated", len(ids))
	}
	set := e1.WaitTuned()
	if set == nil {
		t.Fatal("no skipped-layer draft chosen after a request")
	}
	t.Logf("chosen: %s, agreement %.3f, cost %.3f, modelled gain %.3f, %d sets measured on %d tokens",
		set, set.Agreement, set.Cost, set.Gain, set.Evals, set.Tokens)
	e1.Close()
	e2 := load(t, "stories260K-F32", Options{Ctx: 256, Cache: cache})
	if e2.spec.self == nil || e2.spec.self.Set().String() != set.String() {
		t.Fatalf("restored %v, want %s", e2.spec.self, set)
	}
	// A foreign choice (another layer count) in the stored statistics.
	e2.Close()
	for k, b := range cache.stats {
		p, err := splitDraftStats(b)
		if err != nil {
			t.Fatal(err)
		}
		bad, _ := (&spec.SkipSet{Skip: model.Skip{Attn: []bool{true}, MLP: []bool{false}}, Agreement: 1, Cost: 0.5}).MarshalBinary()
		p.skip = bad
		cache.stats[k] = joinDraftStats(p)
	}
	var logged strings.Builder
	e3 := load(t, "stories260K-F32", Options{Ctx: 256, Cache: cache, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if e3.spec.self != nil {
		t.Error("a choice for a model of one layer was installed")
	}
	if !strings.Contains(logged.String(), "skipped-layer draft unusable") {
		t.Errorf("no warning logged: %q", logged.String())
	}
	if e3.spec.ngram.Len() == 0 {
		t.Error("the n-gram statistics beside the damaged choice were lost")
	}
}

// TestDraftStatsFormats: the stored drafting statistics split back into
// their parts; blobs of the earlier formats split as they were written;
// a damaged header is an error.
func TestDraftStatsFormats(t *testing.T) {
	want := draftStats{[]byte("NGRAM-BYTES"), []byte("ACCEPT"), []byte("SKIP")}
	p, err := splitDraftStats(joinDraftStats(want))
	if err != nil || !bytes.Equal(p.ngram, want.ngram) || !bytes.Equal(p.accept, want.accept) || !bytes.Equal(p.skip, want.skip) {
		t.Errorf("round trip: %q %v", p, err)
	}
	if p, err := splitDraftStats([]byte("GNG1old")); err != nil || string(p.ngram) != "GNG1old" || p.accept != nil {
		t.Errorf("first format: %q %v", p, err)
	}
	if p, err := splitDraftStats([]byte("GDS2\x02\x00\x00\x00ngACC")); err != nil || string(p.ngram) != "ng" || string(p.accept) != "ACC" || p.skip != nil {
		t.Errorf("second format: %q %v", p, err)
	}
	for _, x := range [][]byte{[]byte("GDS2"), []byte("GDS2\xff\xff\x00\x00abc"), []byte("GDS3\x00\x00\x00\x00"),
		[]byte("GDS3\x00\x00\x00\x00\x05\x00\x00\x00abc")} {
		if _, err := splitDraftStats(x); err == nil {
			t.Errorf("%q: no error", x)
		}
	}
}
