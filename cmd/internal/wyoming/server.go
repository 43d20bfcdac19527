// Package wyoming is geist's Wyoming front end: a conversation ("handle")
// service as Home Assistant's Wyoming integration and voice satellites
// use it. describe answers info with one handle program; transcript
// asks the appliance core and answers handled with the text (streamed
// as handled-start, handled-chunk… around it), or not-handled with the
// reason (busy, too long, timeout…); ping answers pong.
//
// A conversation is kept per context.conversation_id (Home Assistant
// sends one with every transcript, on a new connection each time) or,
// without one, per connection; the handled event's context names it, so
// that a client may continue it on another connection.
//
// Every event is bounded before it is read (Limits). A malformed or
// oversized event closes its connection, with a log line; the server
// goes on. Advertise announces the service over mDNS (_wyoming._tcp).
package wyoming

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/sentence"
)

// Core is what the server needs of the appliance core.
type Core interface {
	Submit(ctx context.Context, r appliance.Request, sink appliance.Sink) (*appliance.Ticket, error)
	Reject(src appliance.Source, code appliance.Code)
}

// Config configures a Server; zero values take the defaults noted.
type Config struct {
	Name        string // the handle program's name ("geist")
	Description string // the program's description
	Model       string // the model's name
	// AnswerModel is the stored model that answers a transcript whose
	// context names none (context.model); "": the core's own.
	AnswerModel string
	Version     string // geist's version
	// Languages the model answers in; empty: any language.
	Languages []string
	Limits    Limits
	// MaxConns bounds the open connections (32): when all are open, an
	// idle one (no question being answered) is closed to make room for a
	// new one. MaxPerClient bounds those of one client address (8): past
	// it, an idle one of that address is closed for the new one, so that
	// idle connections never lock out a real client of the same address
	// (Home Assistant on the box connects from 127.0.0.1). The idle one
	// closed is the one idle longest of those that never sent a whole
	// event, else of all; a new one is refused only when every
	// connection it could replace is answering.
	MaxConns, MaxPerClient int
	// FirstTimeout closes a connection whose first whole event has not
	// arrived after this long (10 s); IdleTimeout one on which no whole
	// event arrived for this long since the last one, while no question
	// is being answered (60 s).
	FirstTimeout, IdleTimeout time.Duration
	// WriteTimeout bounds writing one event (30 s); a client that reads
	// nothing for that long is gone and its question is cancelled.
	WriteTimeout time.Duration
	Logger       *slog.Logger
}

// The project's home, the attribution of the program.
const projectURL = "https://github.com/geisten/geist"

// Server is a Wyoming conversation service. Create it with New and run
// it with Serve.
type Server struct {
	cfg  Config
	core Core
	log  *slog.Logger

	mu          sync.Mutex
	conns       map[*tracked]struct{} // the open connections
	lastRefusal time.Time             // of the last "too many connections" warning
	refused     int                   // connections refused since
}

// New returns a Server that asks core.
func New(cfg Config, core Core) (*Server, error) {
	if core == nil {
		return nil, errors.New("wyoming: no core")
	}
	cfg.Limits.defaults()
	if cfg.Name == "" {
		cfg.Name = "geist"
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 32
	}
	if cfg.MaxPerClient <= 0 {
		cfg.MaxPerClient = 8
	}
	if cfg.FirstTimeout <= 0 {
		cfg.FirstTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 60 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	for _, l := range cfg.Languages {
		if l == "" || len(l) > 35 || strings.ContainsAny(l, " \t\r\n") {
			return nil, fmt.Errorf("wyoming: language %q: want a language tag such as en or de-DE", l)
		}
	}
	return &Server{cfg: cfg, core: core, log: cfg.Logger, conns: map[*tracked]struct{}{}}, nil
}

// Info returns the info event's data: one installed handle program with
// one model.
func (s *Server) Info() Info {
	c := &s.cfg
	attr := Attribution{Name: "geist", URL: projectURL}
	desc := c.Description
	if desc == "" {
		desc = "geist, an offline LLM assistant"
		if c.Model != "" {
			desc += " (" + c.Model + ")"
		}
	}
	model := c.Model
	if model == "" {
		model = "geist"
	}
	langs := c.Languages
	if langs == nil {
		langs = []string{}
	}
	return Info{
		ASR: []struct{}{}, TTS: []struct{}{}, Intent: []struct{}{}, Wake: []struct{}{}, Mic: []struct{}{}, Snd: []struct{}{},
		Handle: []HandleProgram{{
			Artifact: Artifact{Name: c.Name, Attribution: attr, Installed: true, Description: &desc, Version: strp(c.Version)},
			Models: []HandleModel{{
				Artifact:  Artifact{Name: model, Attribution: attr, Installed: true, Description: strp("a GGUF model run locally by geist"), Version: strp(c.Version)},
				Languages: langs,
			}},
			SupportsHandledStreaming: true,
		}},
	}
}

// Serve accepts connections on ln until ctx ends. Then it closes ln and
// every connection that waits for a question; a connection whose question
// is being answered gets its answer (the core ends every request at its
// shutdown) and is closed after it. Serve returns when all are closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var delay time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				wg.Wait()
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) || isTemporary(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("wyoming: accept failed; retrying", "err", err, "in", delay)
				time.Sleep(delay)
				continue
			}
			wg.Wait()
			return fmt.Errorf("wyoming: accept: %w", err)
		}
		delay = 0
		t, why := s.admit(conn)
		if t == nil {
			s.refuse(conn, why)
			continue
		}
		wg.Go(func() {
			defer s.release(t)
			s.serveConn(ctx, conn, t)
		})
	}
}

// isTemporary reports accept errors worth retrying (out of file
// descriptors, a connection reset before it was accepted).
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// tracked is an open connection: its client's address, and since when it
// has been idle (0 while a question is answered).
type tracked struct {
	nc        net.Conn
	addr      string
	idleSince atomic.Int64 // unix nanoseconds; 0: answering
	spoke     atomic.Bool  // a whole event has arrived
}

// evictable returns the connection to close for a new one among those
// match accepts: of the idle ones, the one idle longest that never sent
// a whole event, else the one idle longest; nil when all are answering.
func (s *Server) evictable(match func(*tracked) bool) *tracked {
	var best *tracked
	var bestSince int64
	bestSpoke := true
	for o := range s.conns {
		since := o.idleSince.Load()
		if since == 0 || !match(o) {
			continue
		}
		spoke := o.spoke.Load()
		if best == nil || (bestSpoke && !spoke) || (spoke == bestSpoke && since < bestSince) {
			best, bestSince, bestSpoke = o, since, spoke
		}
	}
	return best
}

// evict closes o for a new connection.
func (s *Server) evict(o *tracked, why string) {
	delete(s.conns, o)
	o.nc.Close()
	s.log.Info("wyoming: "+why+"; closed the one idle longest (of those that never sent an event, if any) for a new one", "closed", o.nc.RemoteAddr().String(),
		"idle", time.Since(time.Unix(0, o.idleSince.Load())).Round(time.Millisecond), "had_spoken", o.spoke.Load())
}

func clientAddr(c net.Conn) string {
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	return c.RemoteAddr().String()
}

// admit registers a new connection, closing the longest idle one when
// all MaxConns are open; nil (and why) refuses it.
func (s *Server) admit(nc net.Conn) (*tracked, string) {
	t := &tracked{nc: nc, addr: clientAddr(nc)}
	t.idleSince.Store(time.Now().UnixNano())
	s.mu.Lock()
	defer s.mu.Unlock()
	same := 0
	for o := range s.conns {
		if o.addr == t.addr {
			same++
		}
	}
	if same >= s.cfg.MaxPerClient {
		o := s.evictable(func(o *tracked) bool { return o.addr == t.addr })
		if o == nil {
			return nil, fmt.Sprintf("too many connections from %s (%d), all answering", t.addr, s.cfg.MaxPerClient)
		}
		s.evict(o, fmt.Sprintf("%d connections from %s open", same, t.addr))
	} else if len(s.conns) >= s.cfg.MaxConns {
		o := s.evictable(func(*tracked) bool { return true })
		if o == nil {
			return nil, fmt.Sprintf("too many connections (%d), all answering", s.cfg.MaxConns)
		}
		s.evict(o, "all connections open")
	}
	s.conns[t] = struct{}{}
	return t, ""
}

func (s *Server) release(t *tracked) {
	s.mu.Lock()
	delete(s.conns, t)
	s.mu.Unlock()
}

// refuse closes a connection it cannot take, warning at most once a
// minute.
func (s *Server) refuse(conn net.Conn, why string) {
	conn.Close()
	s.mu.Lock()
	s.refused++
	n, warn := s.refused, time.Since(s.lastRefusal) >= time.Minute
	if warn {
		s.lastRefusal, s.refused = time.Now(), 0
	}
	s.mu.Unlock()
	if warn {
		s.log.Warn("wyoming: "+why+"; closing new ones", "max", s.cfg.MaxConns, "per_client", s.cfg.MaxPerClient, "refused", n, "remote", conn.RemoteAddr().String())
	}
}

// conn is one client connection.
type conn struct {
	s      *Server
	nc     net.Conn
	log    *slog.Logger
	convID string // the connection's own conversation, made up when first needed
	buf    []byte // the event being written
	// gone is closed when the client's stream ended, readErr saying how.
	gone    chan struct{}
	readErr error
}

func (s *Server) serveConn(ctx context.Context, nc net.Conn, t *tracked) {
	defer nc.Close()
	c := &conn{s: s, nc: nc, log: s.log.With("remote", nc.RemoteAddr().String()), gone: make(chan struct{})}
	c.log.Debug("wyoming: connection opened")

	// The reader hands over one event at a time and reports how the
	// stream ended on gone, so that a client that goes away while its
	// question is answered cancels it.
	events := make(chan Event)
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(c.gone)
		r := NewReader(nc, s.cfg.Limits)
		for {
			ev, err := r.Read()
			if err != nil {
				c.readErr = err
				return
			}
			select {
			case events <- ev:
			case <-done:
				return
			}
		}
	}()

	nc.SetReadDeadline(time.Now().Add(s.cfg.FirstTimeout))
	for {
		select {
		case ev := <-events:
			t.spoke.Store(true)
			t.idleSince.Store(0)
			ok := c.handle(ev)
			t.idleSince.Store(time.Now().UnixNano())
			if !ok {
				return
			}
			if ctx.Err() != nil {
				return // shutting down: the answer is out; close
			}
			nc.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		case <-c.gone:
			c.ended()
			return
		case <-ctx.Done():
			c.log.Debug("wyoming: shutting down: connection closed")
			return
		}
	}
}

// ended logs how the client's stream ended; a malformed or oversized
// event is a refused request.
func (c *conn) ended() {
	err := c.readErr
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
		c.log.Debug("wyoming: connection closed by the client")
	case errors.As(err, &ne) && ne.Timeout():
		c.log.Info("wyoming: idle connection closed", "idle", c.s.cfg.IdleTimeout, "first_event", c.s.cfg.FirstTimeout)
	case errors.Is(err, ErrTooLarge):
		c.s.core.Reject(appliance.SourceWyoming, appliance.CodeTooLong)
		c.log.Warn("wyoming: closing the connection: " + strings.TrimPrefix(err.Error(), "wyoming: "))
	case errors.Is(err, ErrMalformed):
		c.s.core.Reject(appliance.SourceWyoming, appliance.CodeBadRequest)
		c.log.Warn("wyoming: closing the connection: " + strings.TrimPrefix(err.Error(), "wyoming: "))
	default:
		c.log.Info("wyoming: connection lost", "err", err)
	}
}

// handle answers one event; false closes the connection.
func (c *conn) handle(ev Event) bool {
	switch ev.Type {
	case "describe":
		return c.write("info", c.s.Info())
	case "transcript":
		return c.transcript(ev)
	case "ping":
		var p ping
		if err := ev.Decode(&p); err != nil {
			return c.malformed(err)
		}
		return c.write("pong", p)
	case "intent":
		c.s.core.Reject(appliance.SourceWyoming, appliance.CodeBadRequest)
		return c.write("not-handled", handled{Text: "geist answers text (transcript events), not recognized intents"})
	default:
		// Unknown events are ignored, as Wyoming services do (audio
		// or satellite events sent to every service of a pipeline).
		c.log.Debug("wyoming: event ignored", "type", truncate(ev.Type, 64))
		return true
	}
}

// malformed closes the connection over an event whose data does not
// decode.
func (c *conn) malformed(err error) bool {
	c.s.core.Reject(appliance.SourceWyoming, appliance.CodeBadRequest)
	c.log.Warn("wyoming: closing the connection: malformed event: " + err.Error())
	return false
}

// write sends one event; false when the client cannot be written to.
func (c *conn) write(typ string, data any) bool {
	var err error
	if c.buf, err = AppendEvent(c.buf[:0], typ, data, nil); err != nil {
		c.log.Error("wyoming: encoding an event", "type", typ, "err", err)
		return false
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.s.cfg.WriteTimeout))
	if _, err := c.nc.Write(c.buf); err != nil {
		c.log.Info("wyoming: writing to the client failed", "type", typ, "err", err)
		return false
	}
	if cap(c.buf) > 64<<10 {
		c.buf = nil // keep no large buffer for an idle connection
	}
	return true
}

// stream gathers the answer's pieces from the core's worker (which must
// not wait for the network) for the connection's goroutine to send.
type stream struct {
	mu      sync.Mutex
	pending []byte
	more    chan struct{}
}

// sink takes the answer's content (spoken: never its thinking).
func (st *stream) sink(p appliance.Piece) {
	if p.Content == "" {
		return
	}
	st.mu.Lock()
	st.pending = append(st.pending, p.Content...)
	st.mu.Unlock()
	select {
	case st.more <- struct{}{}:
	default:
	}
}

// take returns the pending text up to the last whole UTF-8 character
// (all of it when final).
func (st *stream) take(final bool) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := len(st.pending)
	if !final {
		n = sentence.WholeRunes(st.pending)
	}
	s := string(st.pending[:n])
	st.pending = append(st.pending[:0], st.pending[n:]...)
	return s
}

// transcript asks the core and answers: handled-start, handled-chunk…,
// handled, handled-stop; or not-handled with the reason (after
// handled-start and before handled-stop when the stream had begun).
func (c *conn) transcript(ev Event) bool {
	var t transcript
	if err := ev.Decode(&t); err != nil {
		return c.malformed(err)
	}
	reply := c.replyContext(t.Context)
	session := sessionName(reply["conversation_id"].(string))
	if t.Text == nil {
		c.s.core.Reject(appliance.SourceWyoming, appliance.CodeBadRequest)
		return c.write("not-handled", handled{Text: "transcript has no text", Context: reply})
	}
	model := c.s.cfg.AnswerModel
	if m, ok := t.Context["model"]; ok {
		name, _ := m.(string)
		if err := appliance.CheckModelName("context.model", name); err != nil {
			c.s.core.Reject(appliance.SourceWyoming, appliance.CodeBadRequest)
			return c.write("not-handled", handled{Text: err.(*appliance.Error).Message, Context: reply})
		}
		model = name
	}
	c.nc.SetReadDeadline(time.Time{}) // no idle timeout while answering
	// The question's context ends when the client goes away or cannot
	// be written to, never with the server's shutdown: the core ends
	// every request then, with an outcome to send.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := &stream{more: make(chan struct{}, 1)}
	ticket, err := c.s.core.Submit(ctx, appliance.Request{Source: appliance.SourceWyoming, Text: *t.Text, Session: session, Model: model}, st.sink)
	if err != nil {
		msg := err.Error()
		if e, ok := errors.AsType[*appliance.Error](err); ok {
			msg = e.Message
			if e.Code == appliance.CodeBusy {
				msg = "geist is busy: " + msg
			}
		}
		c.log.Info("wyoming: question refused", "reason", msg)
		return c.write("not-handled", handled{Text: msg, Context: reply})
	}
	log := c.log.With("id", ticket.ID, "session", session)
	log.Debug("wyoming: question queued", "language", t.Language)
	started := false
	send := func(text string) bool {
		if text == "" {
			return true
		}
		if !started {
			started = true
			if !c.write("handled-start", handledStart{Context: reply}) {
				return false
			}
		}
		return c.write("handled-chunk", handledChunk{Text: text})
	}
	abandon := func() bool {
		cancel()
		ticket.Outcome()
		return false
	}
wait:
	for {
		select {
		case <-st.more:
			if !send(st.take(false)) {
				return abandon()
			}
		case <-c.gone:
			c.ended()
			log.Info("wyoming: the client went away; question cancelled")
			return abandon()
		case <-ticket.Done():
			break wait
		}
	}
	o := ticket.Outcome()
	if !send(st.take(true)) {
		return false
	}
	switch {
	case o.Err != nil:
		msg := o.Err.Message
		if o.Err.Code == appliance.CodeTimeout || o.Err.Code == appliance.CodeCancelled {
			msg = "no answer: " + msg
		}
		if !c.write("not-handled", handled{Text: msg, Context: reply}) {
			return false
		}
	case !started && !c.write("handled-start", handledStart{Context: reply}):
		return false
	default:
		started = true
		if o.Warning != nil {
			log.Info("wyoming: answered with a warning", "warning", o.Warning.Message)
		}
		if !c.write("handled", handled{Text: strings.TrimSpace(o.Text), Context: reply}) {
			return false
		}
	}
	if started {
		return c.write("handled-stop", nil)
	}
	return true
}

// context returns the context of the answer: the client's, with the
// conversation id it gave, or the connection's own.
func (c *conn) replyContext(in map[string]any) map[string]any {
	out := make(map[string]any, len(in)+1)
	for k, v := range in {
		out[k] = v
	}
	switch id := in["conversation_id"].(type) {
	case string:
		if id != "" {
			return out
		}
	case float64:
		out["conversation_id"] = fmt.Sprint(id)
		return out
	}
	if c.convID == "" {
		c.convID = appliance.NewID()
	}
	out["conversation_id"] = c.convID
	return out
}

// sessionName is the core's session of a conversation id: "wyoming-"
// and the id, or a hash of it where the id has characters or a length
// that session names do not allow.
func sessionName(conv string) string {
	s := "wyoming-" + conv
	if appliance.CheckID("session", s) == nil {
		return s
	}
	sum := sha256.Sum256([]byte(conv))
	return "wyoming-h" + hex.EncodeToString(sum[:12])
}

// truncate shortens s for a log line, on a rune boundary.
func truncate(s string, n int) string {
	if c := sentence.Cut(s, n); c != s {
		return c + "…"
	}
	return s
}
