package appliance

import (
	"slices"
	"sync"
)

// Group is the cores of a serve with several models, as one for what
// reports on them (MQTT's state, the status page): the first core, which
// the front ends submit to (its methods are the Group's), and the cores
// of the other models while they are loaded (Add, Remove). Its Snapshot
// counts the requests of every core, its Watch hears every core's events
// and its Recent lists every core's finished requests; what a core
// counted before it was removed stays counted.
type Group struct {
	*Core

	mu       sync.Mutex
	members  []*Core
	stops    map[*Core]map[int]func() // each member's watches, by the Group's watcher
	watchers map[int]func(Event)
	next     int
	retired  State           // what the removed members counted
	recent   []RequestRecord // their last finished requests, newest first
}

// NewGroup returns the Group of first and, so far, no other core.
func NewGroup(first *Core) *Group {
	return &Group{Core: first, stops: map[*Core]map[int]func(){}, watchers: map[int]func(Event){}}
}

// Add counts c's requests from now on (a model was loaded), and passes
// its events to the Group's watchers.
func (g *Group) Add(c *Core) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c == g.Core || g.stops[c] != nil {
		return
	}
	g.members = append(g.members, c)
	s := make(map[int]func(), len(g.watchers))
	for id, fn := range g.watchers {
		s[id] = c.Watch(fn)
	}
	g.stops[c] = s
}

// Remove takes c out (its model is unloaded; call it once c has stopped):
// its totals and its last finished requests stay in the Group's.
func (g *Group) Remove(c *Core) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.stops[c]
	if s == nil {
		return
	}
	for _, stop := range s {
		stop()
	}
	delete(g.stops, c)
	g.members = slices.DeleteFunc(g.members, func(m *Core) bool { return m == c })
	st := c.Snapshot()
	st.Busy, st.Queue, st.Running, st.Jobs, st.Stuck, st.Degraded = false, 0, nil, nil, "", nil
	g.retired.add(&st)
	g.recent = newestRecords(recentSize, g.recent, c.Recent(recentSize))
}

// Snapshot returns the first core's State with the requests of every
// core counted: totals and per-source counts summed (with the removed
// cores'), rates derived from the sums, the queue and the running jobs
// of all, the last answer's speed from whichever core answered last. The
// rest (model, sessions, prompt cache, links, dashboard) is the first
// core's.
func (g *Group) Snapshot() State {
	st := g.Core.Snapshot()
	g.mu.Lock()
	defer g.mu.Unlock()
	st.add(&g.retired)
	for _, m := range g.members {
		ms := m.Snapshot()
		st.add(&ms)
	}
	slices.SortStableFunc(st.Jobs, func(a, b JobState) int {
		return boolOrder(a.State != "running") - boolOrder(b.State != "running")
	})
	st.derive()
	return st
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Watch calls fn for every core's events, the members' added later's too.
func (g *Group) Watch(fn func(Event)) (stop func()) {
	stopFirst := g.Core.Watch(fn)
	g.mu.Lock()
	id := g.next
	g.next++
	g.watchers[id] = fn
	for _, m := range g.members {
		g.stops[m][id] = m.Watch(fn)
	}
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			stopFirst()
			g.mu.Lock()
			defer g.mu.Unlock()
			delete(g.watchers, id)
			for _, s := range g.stops {
				if stop, ok := s[id]; ok {
					stop()
					delete(s, id)
				}
			}
		})
	}
}

// Recent returns the last n finished requests of every core, the newest
// first.
func (g *Group) Recent(n int) []RequestRecord {
	recs := g.Core.Recent(n)
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.members) == 0 && len(g.recent) == 0 {
		return recs
	}
	lists := [][]RequestRecord{recs, g.recent}
	for _, m := range g.members {
		lists = append(lists, m.Recent(n))
	}
	return newestRecords(n, lists...)
}

// newestRecords merges lists of records into the newest n, newest first.
func newestRecords(n int, lists ...[]RequestRecord) []RequestRecord {
	all := slices.Concat(lists...)
	slices.SortStableFunc(all, func(a, b RequestRecord) int { return b.Finished.Compare(a.Finished) })
	if len(all) > n {
		all = all[:max(n, 0)]
	}
	return all
}

// add counts o's requests in st: the totals and per-source counts, the
// drafters', the queue and running jobs, the last answer's speed when o
// answered later; a busy o makes an idle st busy, and st keeps its
// degraded parts, adding o's others. The rates are derive's.
func (st *State) add(o *State) {
	st.Served += o.Served
	st.Refused += o.Refused
	st.Cancelled += o.Cancelled
	st.Failed += o.Failed
	st.Duplicates += o.Duplicates
	st.PromptTokens += o.PromptTokens
	st.CachedTokens += o.CachedTokens
	st.RestoredTokens += o.RestoredTokens
	st.GeneratedTokens += o.GeneratedTokens
	st.ThinkingTokens += o.ThinkingTokens
	st.Drafted += o.Drafted
	st.Accepted += o.Accepted
	st.TargetPasses += o.TargetPasses
	st.TreePasses += o.TreePasses
	for src, m := range o.Requests {
		if st.Requests == nil {
			st.Requests = map[Source]map[string]int64{}
		}
		if st.Requests[src] == nil {
			st.Requests[src] = map[string]int64{}
		}
		for k, v := range m {
			st.Requests[src][k] += v
		}
	}
	for name, d := range o.Drafters {
		if st.Drafters == nil {
			st.Drafters = map[string]DrafterUsage{}
		}
		t := st.Drafters[name]
		t.Drafted, t.Accepted, t.Steps = t.Drafted+d.Drafted, t.Accepted+d.Accepted, t.Steps+d.Steps
		st.Drafters[name] = t
	}
	if o.LastAnswered.After(st.LastAnswered) {
		st.LastTokS, st.LastAnswered = o.LastTokS, o.LastAnswered
	}
	st.Busy = st.Busy || o.Busy
	st.Queue += o.Queue
	st.Running = append(st.Running, o.Running...)
	st.Jobs = append(st.Jobs, o.Jobs...)
	if st.Stuck == "" {
		st.Stuck = o.Stuck
	}
	if st.State == "idle" && o.Busy {
		st.State = o.State
	}
	for p, why := range o.Degraded {
		if st.Degraded == nil {
			st.Degraded = map[Part]string{}
		}
		if _, ok := st.Degraded[p]; !ok {
			st.Degraded[p] = why
		}
	}
}
