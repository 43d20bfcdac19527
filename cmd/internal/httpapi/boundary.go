package httpapi

// The browser boundary (issue 22): a local HTTP API is reachable by every
// page its user opens. Before any handler runs the guard checks
//   - the Host header against an allow-list (DNS rebinding: a page at
//     evil.example whose name now resolves to 127.0.0.1 sends
//     Host: evil.example and would read every answer),
//   - the Origin against the server's own origin and --http-origins
//     (a page elsewhere may not use the API; allowed origins get CORS
//     answers, preflights included),
//   - the content type of a body: JSON only from browsers, so that a
//     cross-origin "simple" request (text/plain, a form) cannot reach a
//     handler without a preflight,
//   - that a browser's request for what changes the box or reveals
//     stored texts (a pull, the feed with texts, a chat) comes from
//     geist's own page or carries the token.

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
)

// PullPolicy says who may pull models through /api/pull.
type PullPolicy string

const (
	// PullLoopback (the default) lets loopback clients pull; others get 403.
	PullLoopback PullPolicy = "loopback"
	// PullOn lets every allowed client pull (--http-allow, the token).
	PullOn PullPolicy = "on"
	// PullOff refuses every pull.
	PullOff PullPolicy = "off"
)

// ParsePullPolicy parses --http-pull.
func ParsePullPolicy(s string) (PullPolicy, error) {
	switch p := PullPolicy(strings.ToLower(strings.TrimSpace(s))); p {
	case "", PullLoopback:
		return PullLoopback, nil
	case PullOn, PullOff:
		return p, nil
	}
	return "", fmt.Errorf("http pull %q: want off, loopback or on", s)
}

// hostNames are the names besides IP literals and localhost that the Host
// header may carry: the machine's host name, its short form and its mDNS
// name (NAME.local), and the configured additions (exact, or *.SUFFIX).
func hostNames(extra []string) []string {
	var names []string
	if h, err := os.Hostname(); err == nil && h != "" {
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		short, _, _ := strings.Cut(h, ".")
		names = append(names, h, short, short+".local")
	}
	for _, e := range extra {
		for _, f := range strings.Split(e, ",") {
			if f = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(f), ".")); f != "" {
				names = append(names, f)
			}
		}
	}
	return names
}

// hostAllowed says whether a request's Host may be answered.
func (s *Server) hostAllowed(hostport string) bool {
	host := strings.ToLower(hostport)
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if host == "" {
		return true // HTTP/1.0 without a Host: no browser sends that
	}
	if a, err := netip.ParseAddr(host); err == nil && a.IsValid() {
		return true // an IP literal cannot be rebound
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	for _, n := range s.hosts {
		if n == "*" || n == host || strings.HasPrefix(n, "*.") && strings.HasSuffix(host, n[1:]) {
			return true
		}
	}
	return false
}

// browser reports a request a browser sent: browsers send Origin with
// every cross-origin request and every POST, and Sec-Fetch-Site with
// every request (Chromium, Firefox, Safari); "none" is the user's own
// navigation (a typed URL, a bookmark).
func browser(r *http.Request) bool {
	if r.Header.Get("Origin") != "" {
		return true
	}
	site := r.Header.Get("Sec-Fetch-Site")
	return site != "" && site != "none"
}

// sameOrigin reports a browser request from a page of this server's own
// origin (its own page, under an allowed Host).
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		return o == "http://"+r.Host || o == "https://"+r.Host
	}
	return r.Header.Get("Sec-Fetch-Site") == "same-origin"
}

// originAllowed matches an Origin against --http-origins: exact, or with
// * standing for any run of characters (http://localhost:*, *).
func (s *Server) originAllowed(origin string) bool {
	o := strings.ToLower(origin)
	for _, p := range s.cfg.Origins {
		if wildcard(strings.ToLower(strings.TrimSpace(p)), o) {
			return true
		}
	}
	return false
}

func wildcard(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

// sensitive reports what a cross-origin page may not do even from an
// allowed origin without the token: pull a model (it writes the disk and
// fetches from the network) and read the stored texts of the live feed.
func sensitive(r *http.Request) bool {
	switch {
	case r.URL.Path == "/api/pull":
		return true
	case r.URL.Path == "/api/geist/events" && r.URL.Query().Get("text") != "":
		return true
	}
	return false
}

// asks reports the routes that run the model: a page may use them from
// geist's own origin, from an allowed origin, or with the token.
func asks(r *http.Request) bool {
	switch r.URL.Path {
	case "/api/chat", "/api/generate", "/v1/chat/completions", "/v1/completions":
		return true
	}
	return false
}

// corsHeaders are the request headers an allowed origin may send.
const corsHeaders = "Authorization, Content-Type, Accept, X-Requested-With, X-Stainless-Lang, X-Stainless-Package-Version, X-Stainless-OS, X-Stainless-Arch, X-Stainless-Runtime, X-Stainless-Runtime-Version, X-Stainless-Retry-Count, X-Stainless-Timeout, OpenAI-Beta, User-Agent"

// boundary applies the browser checks; it answers and returns false when
// the request goes no further.
func (s *Server) boundary(w http.ResponseWriter, r *http.Request, loopback bool) bool {
	if !s.hostAllowed(r.Host) {
		writeError(w, http.StatusForbidden, "host "+quoteHost(r.Host)+" is not one of this geist's names (DNS rebinding?): start geist with --http-host "+quoteHost(hostOnly(r.Host))+" to allow it")
		return false
	}
	origin := r.Header.Get("Origin")
	cross := origin != "" && !sameOrigin(r)
	if cross {
		if !s.originAllowed(origin) {
			writeError(w, http.StatusForbidden, "origin "+quoteHost(origin)+" may not use this geist (start geist with --http-origins listing it)")
			return false
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", "Retry-After, Content-Type")
	}
	if r.Method == http.MethodOptions {
		h := w.Header()
		if cross && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE, OPTIONS")
			h.Set("Access-Control-Allow-Headers", corsHeaders)
			h.Set("Access-Control-Max-Age", "600")
		}
		h.Set("Allow", "GET, HEAD, POST, DELETE, OPTIONS")
		w.WriteHeader(http.StatusNoContent)
		return false
	}
	if browser(r) && !sameOrigin(r) && !s.tokenOK(r) {
		if sensitive(r) || asks(r) && !cross {
			writeError(w, http.StatusForbidden, r.Method+" "+r.URL.Path+" from another page needs the bearer token or geist's own page")
			return false
		}
	}
	if r.URL.Path == "/api/pull" {
		switch {
		case s.cfg.Pull == PullOff:
			writeError(w, http.StatusForbidden, "pulls are switched off on this geist (--http-pull off)")
			return false
		case s.cfg.Pull != PullOn && !loopback:
			writeError(w, http.StatusForbidden, "pulls are allowed from this machine only (start geist with --http-pull on to allow them from the network)")
			return false
		}
	}
	if hasBody(r) && !jsonBody(r) {
		ct := r.Header.Get("Content-Type")
		if ct == "" {
			ct = "none"
		}
		writeError(w, http.StatusUnsupportedMediaType, "request body must be JSON (Content-Type: application/json), not "+quoteHost(ct))
		return false
	}
	return true
}

// hasBody reports a request that carries (or may carry) a body.
func hasBody(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return r.ContentLength != 0 || len(r.TransferEncoding) > 0
}

// jsonBody accepts application/json (and +json types) from anyone, and
// from clients that are not browsers also no type at all and curl -d's
// form type, as Ollama's documentation's examples send them.
func jsonBody(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return true
	}
	if browser(r) {
		return false
	}
	return ct == "" || mt == "application/x-www-form-urlencoded"
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// quoteHost quotes a client's string for an error, cut to 100 bytes.
func quoteHost(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return `"` + strings.ToValidUTF8(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '"' {
			return '?'
		}
		return r
	}, s), "?") + `"`
}
