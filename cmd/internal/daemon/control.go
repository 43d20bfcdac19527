package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/storage"
)

// The control socket: geist serve holds sessions.db (bbolt locks the file
// for one process), so the sessions commands ask the daemon through
// <data dir>/geist.sock, a unix socket only the daemon's user can open
// (mode 0600), with a small HTTP and JSON API:
//
//	GET    /v1/sessions        the conversations, as sessions list --json
//	GET    /v1/sessions/NAME   one conversation, as sessions export
//	DELETE /v1/sessions/NAME   delete it
//	GET    /v1/status          the loaded model, as geist ps --json
//	POST   /v1/cache/lookup    a prefix of the prompt cache (cacheshare.go)
//	POST   /v1/cache/put       store one
//
// It runs whether or not an HTTP front end is configured, needs no port
// or password, and works with curl --unix-socket. Without a running
// daemon the commands read the file themselves.

// SocketName is the control socket's file name in the data directory.
const SocketName = "geist.sock"

// SessionRow is one line of sessions list --json.
type SessionRow struct {
	storage.Conversation
	Turns int `json:"turns"`
}

// SessionDoc is a conversation as sessions export writes it.
type SessionDoc = storage.ExportDoc

// SessionSource is where the sessions commands read: the daemon or the
// file.
type SessionSource interface {
	List() ([]SessionRow, error)
	Export(w io.Writer, id string) error
	Delete(id string) error
}

// FileSessions reads sessions.db directly.
type FileSessions struct{ DB *storage.Sessions }

func (f FileSessions) List() ([]SessionRow, error) {
	list, err := f.DB.List()
	if err != nil {
		return nil, err
	}
	rows := make([]SessionRow, len(list))
	for i, c := range list {
		rows[i] = SessionRow{c, c.Turns}
	}
	return rows, nil
}

func (f FileSessions) Export(w io.Writer, id string) error { return f.DB.Export(w, id) }
func (f FileSessions) Delete(id string) error              { return f.DB.Delete(id) }

// controlServer serves the control socket for a running daemon.
type controlServer struct {
	srv  *http.Server
	path string
	done chan struct{}
	core atomic.Pointer[appliance.Core] // deletes go through it once it exists
	st   atomic.Pointer[Status]         // what GET /v1/status answers
	// share is the prompt cache run and chat use beside the daemon
	// (cacheshare.go), once the model is loaded.
	share   atomic.Pointer[cacheShare]
	storing sync.WaitGroup // the puts being stored
	log     *slog.Logger
}

// Status is what a running geist serve has loaded: GET /v1/status,
// geist ps.
type Status struct {
	Model  string    `json:"model"` // "" while loading
	Path   string    `json:"path"`
	Size   int64     `json:"size"`
	Ctx    int       `json:"ctx"`     // context positions allocated now
	MaxCtx int       `json:"max_ctx"` // what a request's num_ctx may grow it to
	Since  time.Time `json:"since"`
	PID    int       `json:"pid"`
}

// setStatus records the loaded model for GET /v1/status.
func (s *controlServer) setStatus(st Status) {
	st.PID = os.Getpid()
	s.st.Store(&st)
}

// startControl listens on dir/geist.sock and serves db's conversations
// until Close. A socket left by a daemon that died is replaced; one a
// live daemon answers on is left alone (an error).
func startControl(dir string, db *storage.Sessions, log *slog.Logger) (*controlServer, error) {
	path := filepath.Join(dir, SocketName)
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("%s: another geist serve answers there (one daemon per data directory)", path)
	}
	os.Remove(path) // a stale socket
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	src := FileSessions{db}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/sessions", func(w http.ResponseWriter, r *http.Request) {
		rows, err := src.List()
		if err != nil {
			controlError(w, err)
			return
		}
		if rows == nil {
			rows = []SessionRow{}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(rows)
	})
	mux.HandleFunc("GET /v1/sessions/{name}", func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		if err := src.Export(&b, r.PathValue("name")); err != nil {
			controlError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b.Bytes())
	})
	s := &controlServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 30 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)},
		path: path, done: make(chan struct{}), log: log}
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, r *http.Request) {
		st := Status{PID: os.Getpid()}
		if p := s.st.Load(); p != nil {
			st = *p
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("DELETE /v1/sessions/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		var err error
		if core := s.core.Load(); core != nil {
			// Through the core: after the requests queued before, and
			// with the conversation's prompt-cache entries.
			if _, err = db.Info(name); err == nil {
				err = core.DeleteSession(r.Context(), name)
			}
		} else {
			err = src.Delete(name)
		}
		if err != nil {
			controlError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	s.registerCache(mux)
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("control socket", "err", err)
		}
	}()
	return s, nil
}

// Close stops serving and removes the socket.
func (s *controlServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	<-s.done
	s.storing.Wait() // before the store closes
	os.Remove(s.path)
	return err
}

// controlError answers err as JSON with a status: 404 for a conversation
// that does not exist.
func controlError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	if errors.Is(err, storage.ErrNotFound) {
		code = http.StatusNotFound
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

// daemonSessions asks a running geist serve through its control socket.
type daemonSessions struct{ c *http.Client }

// Dial returns the daemon serving dir, or nil when none answers on
// its socket (no socket, or one a dead daemon left).
func Dial(dir string) *daemonSessions {
	path := filepath.Join(dir, SocketName)
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	conn, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return nil
	}
	conn.Close()
	return &daemonSessions{c: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}}}
}

func (d *daemonSessions) do(method, path string) (*http.Response, error) {
	req, err := http.NewRequest(method, "http://geist"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := d.c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking the running geist serve: %w", err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var e struct{ Error string }
		json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		if resp.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("%w (the running geist serve says: %s)", storage.ErrNotFound, e.Error)
		}
		return nil, fmt.Errorf("the running geist serve says: %s (%s)", e.Error, resp.Status)
	}
	return resp, nil
}

func (d *daemonSessions) List() ([]SessionRow, error) {
	resp, err := d.do(http.MethodGet, "/v1/sessions")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var rows []SessionRow
	if err := json.NewDecoder(resp.Body).Decode(&rows); err != nil {
		return nil, fmt.Errorf("the running geist serve's list: %w", err)
	}
	// Conversation.Turns is not in its JSON: copy the count back.
	for i := range rows {
		rows[i].Conversation.Turns = rows[i].Turns
	}
	return rows, nil
}

func (d *daemonSessions) Export(w io.Writer, id string) error {
	resp, err := d.do(http.MethodGet, "/v1/sessions/"+url.PathEscape(id))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

func (d *daemonSessions) Delete(id string) error {
	resp, err := d.do(http.MethodDelete, "/v1/sessions/"+url.PathEscape(id))
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Status asks the daemon what it has loaded.
func (d *daemonSessions) Status() (Status, error) {
	var st Status
	resp, err := d.do(http.MethodGet, "/v1/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&st); err != nil {
		return st, fmt.Errorf("the running geist serve's status: %w", err)
	}
	return st, nil
}
