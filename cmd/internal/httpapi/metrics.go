package httpapi

import (
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/geisten/geist/engine/appliance"
)

// metrics are geist's Prometheus metrics. The totals come from the core's
// State at every scrape (stateCollector); what the State has no place for
// (distributions, per-drafter counts) from the core's events.
type metrics struct {
	ttft      *prometheus.HistogramVec
	decode    *prometheus.HistogramVec
	prefill   *prometheus.HistogramVec
	duration  *prometheus.HistogramVec
	queued    *prometheus.HistogramVec
	drafted   *prometheus.CounterVec
	accepted  *prometheus.CounterVec
	http      *prometheus.CounterVec
	httpDur   *prometheus.HistogramVec
	stopWatch func()
}

// speedBuckets are tokens per second, from a Pi 4 running a 3B model
// (a few) to a Jetson running a 0.5B one (hundreds).
var speedBuckets = []float64{1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256, 512}

func newMetrics(s *Server) (*metrics, error) {
	m := &metrics{
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "geist_time_to_first_token_seconds", Help: "Time from the start of generation (prefill included) to the first token, per answer.",
			Buckets: []float64{.025, .05, .1, .25, .5, 1, 2, 4, 8, 16, 32, 64},
		}, []string{"source"}),
		decode: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "geist_decode_tokens_per_second", Help: "Decoding speed of each answer (tokens after the first, per second).",
			Buckets: speedBuckets,
		}, []string{"source"}),
		prefill: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "geist_prefill_tokens_per_second", Help: "Prompt processing speed of each answer (prompt tokens not reused from a cache, per second).",
			Buckets: []float64{4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096},
		}, []string{"source"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "geist_generation_seconds", Help: "Duration of each generation (prefill and decoding), by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"source", "outcome"}),
		queued: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "geist_queue_wait_seconds", Help: "Time requests waited in the queue before generation.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"source"}),
		drafted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "geist_draft_tokens_total", Help: "Tokens drafted for speculative decoding, by drafter.",
		}, []string{"drafter"}),
		accepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "geist_draft_accepted_tokens_total", Help: "Drafted tokens the model accepted, by drafter.",
		}, []string{"drafter"}),
		http: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "geist_http_requests_total", Help: "HTTP requests by route and status code (guard refusals included).",
		}, []string{"route", "code"}),
		httpDur: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "geist_http_request_seconds", Help: "HTTP request durations by route (streams last as long as their generation).",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 11),
		}, []string{"route"}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "geist_build_info", Help: "geist's version and the Go version it was built with (always 1).",
	}, []string{"version", "goversion"})
	build.WithLabelValues(s.cfg.Version, runtime.Version()).Set(1)
	for _, c := range []prometheus.Collector{m.ttft, m.decode, m.prefill, m.duration, m.queued, m.drafted, m.accepted, m.http, m.httpDur, build, &stateCollector{s: s}} {
		if err := s.reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.stopWatch = s.core.Watch(func(ev appliance.Event) {
		if ev.Kind == appliance.EventFinished && ev.Outcome != nil && !ev.Outcome.Replayed {
			m.finished(ev.Outcome)
		}
	})
	return m, nil
}

// finished records the distributions of one outcome.
func (m *metrics) finished(o *appliance.Outcome) {
	src := string(o.Source)
	u := &o.Usage
	outcome := "answered"
	if o.Err != nil {
		outcome = string(o.Err.Code)
	}
	if u.Duration > 0 {
		m.duration.WithLabelValues(src, outcome).Observe(u.Duration.Seconds())
		m.queued.WithLabelValues(src).Observe(u.Queued.Seconds())
	}
	for name, d := range u.Drafters {
		m.drafted.WithLabelValues(name).Add(float64(d.Drafted))
		m.accepted.WithLabelValues(name).Add(float64(d.Accepted))
	}
	if o.Err != nil {
		return
	}
	if u.TTFT > 0 {
		m.ttft.WithLabelValues(src).Observe(u.TTFT.Seconds())
	}
	if u.TokS > 0 {
		m.decode.WithLabelValues(src).Observe(u.TokS)
	}
	if u.PrefillTokS > 0 {
		m.prefill.WithLabelValues(src).Observe(u.PrefillTokS)
	}
}

func (m *metrics) observeHTTP(r *http.Request, code int, d time.Duration) {
	route := r.Pattern
	if route == "" {
		route = "other"
	}
	m.http.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.httpDur.WithLabelValues(route).Observe(d.Seconds())
}

// stateCollector reports the core's State at every scrape.
type stateCollector struct{ s *Server }

var (
	descRequests = prometheus.NewDesc("geist_requests_total", "Requests by front end (source) and outcome: answered, replayed, or an error code (bad_request, too_long, busy, cancelled, timeout, internal, duplicate).", []string{"source", "outcome"}, nil)
	descQueue    = prometheus.NewDesc("geist_queue_depth", "Requests waiting in the queue.", nil, nil)
	descDegraded = prometheus.NewDesc("geist_degraded", "1 while a part works less than configured (storage: sessions in memory or the last save failed; broker: not connected; gpio: pins missing), else 0.", []string{"part"}, nil)
	descRunning  = prometheus.NewDesc("geist_requests_running", "Requests generating now.", nil, nil)
	descTokens   = prometheus.NewDesc("geist_tokens_total", "Tokens of answered requests by kind: prompt, cached (prompt tokens whose KV state was reused: held in memory or restored), restored (of cached, those restored from the prompt cache), evaluated (prompt tokens the model evaluated), generated, thinking, drafted, accepted.", []string{"kind"}, nil)
	descSessions = prometheus.NewDesc("geist_sessions", "Conversations the session store holds.", nil, nil)
	descLoad     = prometheus.NewDesc("geist_model_load_seconds", "How long loading the model took.", []string{"model"}, nil)
	descUp       = prometheus.NewDesc("geist_start_time_seconds", "When the appliance core started (Unix time).", nil, nil)
	descLastTokS = prometheus.NewDesc("geist_last_decode_tokens_per_second", "Decoding speed of the last answer.", nil, nil)
	descCacheOps = prometheus.NewDesc("geist_prompt_cache_lookups_total", "Prompt cache (cache.db) lookups by result: hit or miss.", []string{"result"}, nil)
	descCacheEv  = prometheus.NewDesc("geist_prompt_cache_evictions_total", "Prompt cache entries evicted to stay within the budget.", nil, nil)
	descCacheB   = prometheus.NewDesc("geist_prompt_cache_bytes", "Prompt cache sizes: live (estimated bytes of the entries), file (cache.db), budget.", []string{"kind"}, nil)
	descCacheN   = prometheus.NewDesc("geist_prompt_cache_entries", "Prompt cache entries.", nil, nil)
	descPasses   = prometheus.NewDesc("geist_model_passes_total", "Forward passes of the model while decoding answered requests, by kind: all, and tree (those that verified drafted tokens).", []string{"kind"}, nil)
	descPerPass  = prometheus.NewDesc("geist_tokens_per_pass", "Tokens emitted per forward pass while decoding, all answers (1: no speculation).", nil, nil)
	descTreeSize = prometheus.NewDesc("geist_draft_tree_size", "Mean drafted tokens a verifying pass checked (the size of the token tree), all answers.", nil, nil)
	descDepth    = prometheus.NewDesc("geist_draft_accepted_depth", "Mean drafted tokens a verifying pass accepted (the depth of the accepted path), all answers.", nil, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRequests, descQueue, descDegraded, descRunning, descTokens, descSessions, descLoad, descUp, descLastTokS, descCacheOps, descCacheEv, descCacheB, descCacheN,
		descPasses, descPerPass, descTreeSize, descDepth} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.core.Snapshot()
	for src, m := range st.Requests {
		for outcome, n := range m {
			ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(n), string(src), outcome)
		}
	}
	ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(st.Queue))
	for _, p := range []appliance.Part{appliance.PartStorage, appliance.PartBroker, appliance.PartGPIO} {
		v := 0.0
		if st.Degraded[p] != "" {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(descDegraded, prometheus.GaugeValue, v, string(p))
	}
	ch <- prometheus.MustNewConstMetric(descRunning, prometheus.GaugeValue, float64(len(st.Running)))
	for kind, n := range map[string]int64{"prompt": st.PromptTokens, "cached": st.CachedTokens, "restored": st.RestoredTokens, "evaluated": st.PromptTokens - st.CachedTokens, "generated": st.GeneratedTokens, "thinking": st.ThinkingTokens, "drafted": st.Drafted, "accepted": st.Accepted} {
		ch <- prometheus.MustNewConstMetric(descTokens, prometheus.CounterValue, float64(n), kind)
	}
	ch <- prometheus.MustNewConstMetric(descPasses, prometheus.CounterValue, float64(st.TargetPasses), "all")
	ch <- prometheus.MustNewConstMetric(descPasses, prometheus.CounterValue, float64(st.TreePasses), "tree")
	ch <- prometheus.MustNewConstMetric(descPerPass, prometheus.GaugeValue, st.TokensPerPass)
	ch <- prometheus.MustNewConstMetric(descTreeSize, prometheus.GaugeValue, st.MeanTreeSize)
	ch <- prometheus.MustNewConstMetric(descDepth, prometheus.GaugeValue, st.MeanAcceptedDepth)
	if st.Sessions >= 0 {
		ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(st.Sessions))
	}
	if st.ModelLoad > 0 {
		ch <- prometheus.MustNewConstMetric(descLoad, prometheus.GaugeValue, st.ModelLoad.Seconds(), st.Model)
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, float64(st.Started.UnixNano())/1e9)
	ch <- prometheus.MustNewConstMetric(descLastTokS, prometheus.GaugeValue, st.LastTokS)
	if cs := st.Cache; cs != nil {
		ch <- prometheus.MustNewConstMetric(descCacheOps, prometheus.CounterValue, float64(cs.Hits), "hit")
		ch <- prometheus.MustNewConstMetric(descCacheOps, prometheus.CounterValue, float64(cs.Misses), "miss")
		ch <- prometheus.MustNewConstMetric(descCacheEv, prometheus.CounterValue, float64(cs.Evictions))
		ch <- prometheus.MustNewConstMetric(descCacheB, prometheus.GaugeValue, float64(cs.LiveBytes), "live")
		ch <- prometheus.MustNewConstMetric(descCacheB, prometheus.GaugeValue, float64(cs.FileBytes), "file")
		ch <- prometheus.MustNewConstMetric(descCacheB, prometheus.GaugeValue, float64(cs.Budget), "budget")
		ch <- prometheus.MustNewConstMetric(descCacheN, prometheus.GaugeValue, float64(cs.Entries))
	}
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{ErrorLog: slogPrinter{s}, MaxRequestsInFlight: 4})
}

type slogPrinter struct{ s *Server }

func (p slogPrinter) Println(v ...any) { p.s.log.Warn("metrics", "err", v) }
