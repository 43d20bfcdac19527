package daemon

import (
	"log/slog"
	"net/http"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/httpapi"
)

// mountPage puts the status and chat page at / of the HTTP listener (for
// browsers; other clients keep Ollama's liveness text there) and its live
// feed at /api/geist/events, behind the listener's guard; core is the
// group of every model's cores, whose requests it shows.
func mountPage(web *httpapi.Server, c *Config, core httpapi.StatusCore, log *slog.Logger) {
	liveness := "Ollama is running (geist " + cli.VersionString() + ")"
	plain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte(liveness))
	})
	httpapi.NewStatusPage(httpapi.StatusConfig{ShowText: c.HTTP.PageTexts, Plain: plain, Logger: log.With("component", "page")}, core).Register(web)
}
