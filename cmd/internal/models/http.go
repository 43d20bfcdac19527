package models

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrPrivate: a pull that refuses private destinations was sent to one.
var ErrPrivate = errors.New("not a public address")

// notPublic reports the addresses a pull for a remote client must not
// reach: loopback, link-local, private (RFC 1918, fc00::/7), shared
// (100.64.0.0/10), unspecified, multicast, and everything else that is
// not global unicast.
func notPublic(a netip.Addr) bool {
	a = a.Unmap()
	return !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(a) || netip.MustParsePrefix("0.0.0.0/8").Contains(a)
}

func (p *puller) isPrivate(a netip.Addr) bool {
	if p.o.private != nil {
		return p.o.private(a)
	}
	return notPublic(a)
}

func privateErr(host string, a netip.Addr) error {
	a = a.Unmap()
	return fmt.Errorf("%w: refusing to fetch from %s (%s is not a public address; start geist serve with --pull-allow-private to pull from your own mirror)", ErrPrivate, host, a)
}

// checkHost resolves u's host and refuses it if any of its addresses is
// not public (before the first request and every redirect; the dialer
// checks the address it connects to again).
func (p *puller) checkHost(ctx context.Context, u *url.URL) error {
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		if p.isPrivate(a) {
			return privateErr(host, a)
		}
		return nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", host, err)
	}
	for _, a := range addrs {
		if p.isPrivate(a) {
			return privateErr(host, a)
		}
	}
	return nil
}

// publicOnly returns a transport like base whose connections go to public
// addresses only: the check runs on the address actually dialled, after
// DNS, so a name that resolves differently the second time (rebinding)
// is caught too. Behind a proxy (HTTPS_PROXY) the dial goes to the proxy,
// the user's own choice; checkHost still checks the names.
func (p *puller) publicOnly(base http.RoundTripper) http.RoundTripper {
	t, ok := base.(*http.Transport)
	if !ok || os.Getenv("HTTPS_PROXY") != "" || os.Getenv("https_proxy") != "" || os.Getenv("HTTP_PROXY") != "" || os.Getenv("http_proxy") != "" {
		return base
	}
	t = t.Clone()
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", ErrPrivate, address)
			}
			if p.isPrivate(ap.Addr()) {
				return privateErr(address, ap.Addr())
			}
			return nil
		}}
	t.DialContext = d.DialContext
	return t
}

// defaultTransport honours HTTPS_PROXY and gives up on a server that
// sends no response headers for a minute.
var defaultTransport http.RoundTripper = func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.ResponseHeaderTimeout = time.Minute
	return t
}()

// authTransport adds the Hugging Face token to requests for the
// endpoint's host only: Hugging Face redirects downloads to a CDN with a
// signed URL, which must not see the token (Go's own redirect rule would
// forward it to any subdomain, and to another port of the same host).
type authTransport struct {
	base  http.RoundTripper
	host  string // scheme://host[:port]
	token string
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.token != "" && req.URL.Scheme+"://"+req.URL.Host == t.host {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	return t.base.RoundTrip(req)
}

// get requests the file from p.offset on (with If-Range, so that a changed
// file comes back whole) and collects what the redirects on the way said
// about it: Hugging Face answers with a redirect carrying X-Linked-Etag
// (the SHA-256) and X-Linked-Size. It stops at that redirect when the
// stored file already has that digest.
func (p *puller) get(ctx context.Context) (*http.Response, remote, error) {
	rem := remote{size: -1}
	base := http.Client{Transport: defaultTransport}
	if p.o.Client != nil {
		base = *p.o.Client
		if base.Transport == nil {
			base.Transport = http.DefaultTransport
		}
	}
	c := base
	tr := base.Transport
	if p.o.RefusePrivate {
		tr = p.publicOnly(tr)
	}
	c.Transport = &authTransport{base: tr, host: p.src.hfHost, token: p.o.HF.Token}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		if p.o.RefusePrivate {
			if err := p.checkHost(req.Context(), req.URL); err != nil {
				return err
			}
		}
		if req.Response != nil {
			rem.learn(req.Response.Header)
			// Not worth following: the stored file is the one, or the
			// digest is not the one asked for.
			if p.isUpToDate(rem) || p.want != "" && rem.sha256 != "" && rem.sha256 != p.want {
				return http.ErrUseLastResponse
			}
		}
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.src.URL, nil)
	if err != nil {
		return nil, rem, err
	}
	if p.o.RefusePrivate {
		if err := p.checkHost(ctx, req.URL); err != nil {
			return nil, rem, err
		}
	}
	ua := p.o.UserAgent
	if ua == "" {
		ua = "geist"
	}
	req.Header.Set("User-Agent", ua)
	req.Header.Set("Accept-Encoding", "identity") // byte ranges of the file itself
	switch {
	case p.probeEnd > 0:
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", p.offset, p.probeEnd-1))
	case p.offset > 0:
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", p.offset))
	}
	if p.offset > 0 {
		if v := p.val.ETag; v != "" && !strings.HasPrefix(v, "W/") {
			req.Header.Set("If-Range", v)
		} else if p.val.LastModified != "" {
			req.Header.Set("If-Range", p.val.LastModified)
		}
	} else if p.hasFile && p.have.SHA256 != "" {
		// A stored file of this URL: unchanged, the server says 304.
		if p.have.ETag != "" {
			req.Header.Set("If-None-Match", p.have.ETag)
		} else if p.have.LastModified != "" {
			req.Header.Set("If-Modified-Since", p.have.LastModified)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, rem, err
	}
	rem.learn(resp.Header)
	rem.etag, rem.lastModified = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	return resp, rem, nil
}

// learn takes the digest and size a response vouches for, the first one
// that does (the Hugging Face resolver's, before the CDN's).
func (r *remote) learn(h http.Header) {
	if r.sha256 == "" {
		for _, k := range []string{"X-Linked-Etag", "ETag"} {
			v := strings.ToLower(strings.Trim(strings.TrimPrefix(h.Get(k), "W/"), `"`))
			if hexRE.MatchString(v) {
				r.sha256 = v
				break
			}
		}
	}
	if r.size < 0 {
		if n, err := strconv.ParseInt(h.Get("X-Linked-Size"), 10, 64); err == nil && n >= 0 {
			r.size = n
		}
	}
}

// httpError words a response that ends the pull.
func (p *puller) httpError(resp *http.Response) error {
	code, msg := resp.Header.Get("X-Error-Code"), resp.Header.Get("X-Error-Message")
	u := p.src.URL
	e := &HTTPError{Status: resp.StatusCode, URL: u}
	repo := p.src.Repo
	if repo == "" {
		repo = "the repository"
	}
	switch fromHF := p.src.Repo != "" || resp.Request.URL.Scheme+"://"+resp.Request.URL.Host == p.src.hfHost; {
	case fromHF && code == "RepoNotFound":
		e.Msg = fmt.Sprintf("HTTP %d: %s not found on %s (a private repository needs HF_TOKEN)", resp.StatusCode, repo, p.src.hfHost)
	case fromHF && code == "RevisionNotFound":
		e.Msg = fmt.Sprintf("HTTP %d: %s has no revision %q (%s)", resp.StatusCode, repo, p.src.Revision, u)
	case fromHF && code == "EntryNotFound":
		e.Msg = fmt.Sprintf("HTTP %d: %s has no file %q at revision %s (%s)", resp.StatusCode, repo, p.src.File, p.src.Revision, u)
	case fromHF && (code == "GatedRepo" || resp.StatusCode == http.StatusForbidden):
		e.Msg = fmt.Sprintf("HTTP %d: %s is gated: accept its conditions on %s/%s with your account and set HF_TOKEN to an access token of it (%s)", resp.StatusCode, repo, p.src.hfHost, p.src.Repo, u)
	case fromHF && resp.StatusCode == http.StatusUnauthorized && p.o.HF.Token == "":
		e.Msg = fmt.Sprintf("HTTP 401: %s needs authentication: it is gated or private; set HF_TOKEN to a Hugging Face access token (%s)", repo, u)
	case resp.StatusCode == http.StatusUnauthorized && fromHF:
		e.Msg = fmt.Sprintf("HTTP 401: HF_TOKEN was refused for %s (%s)", repo, u)
	case resp.StatusCode == http.StatusNotFound:
		e.Msg = "HTTP 404 Not Found: " + u
	default:
		e.Msg = fmt.Sprintf("HTTP %s from %s", resp.Status, u)
	}
	if final := resp.Request.URL; final.Host != "" && final.String() != u && !strings.Contains(e.Msg, final.Host) {
		e.Msg += " (redirected to " + final.Scheme + "://" + final.Host + ")"
	}
	_ = msg // the remote's own words are not echoed (issue 22: a pull must not read out other servers)
	return e
}
