package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/models"
)

const pullUsage = "pull [--name NAME] [--sha256 HEX] [--models-dir DIR] NAME|hf:OWNER/REPO[@REVISION]/FILE.gguf|URL (NAME from geist models catalog: qwen2.5:0.5b, qwen3:1.7b-q8_0)"

// cmdPull downloads a model into the store.
func cmdPull(ctx context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "pull", pullUsage)
	name := fs.String("name", "", "store the model under this name (default: the catalog name, or the file name without .gguf)")
	sum := fs.String("sha256", "", "expected SHA-256 of the file (default: the digest Hugging Face gives)")
	retries := fs.Int("retries", 5, "network failures retried, resuming where the download stopped")
	maxSize := fs.Int64("max-model-size", 0, "largest file in bytes a pull may write (0: the free space less 64 MiB; a download past it stops and is removed)")
	noWait := fs.Bool("no-wait", false, "fail instead of waiting while another pull of the same model runs")
	fs.String("models-dir", "", cli.ModelsDirHelp())
	fs.String("data-dir", cli.DefaultDataDir(), "data directory (models are in its models/)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return cli.Usagef("want one model: a catalog name (geist models catalog lists them), hf:OWNER/REPO/FILE.gguf or a URL; got %d arguments", fs.NArg())
	}
	if *retries < 0 {
		return cli.Usagef("--retries %d must not be negative", *retries)
	}
	store := cli.ModelStore(fs)
	pr := newPullReporter(e.Stderr)
	res, err := store.Pull(ctx, fs.Arg(0), models.PullOptions{
		Name: *name, SHA256: *sum, HF: models.HFFromEnv(), Retries: *retries, Wait: !*noWait,
		Progress: pr.report, UserAgent: "geist/" + cli.VersionString(), MaxSize: *maxSize,
	})
	pr.close()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted")
		}
		return err
	}
	m := res.Model
	if res.UpToDate {
		fmt.Fprintf(e.Stdout, "%s is up to date (%s)\n", m.Name, m.Path)
		return pullDraft(ctx, e, store, fs.Arg(0), m.Name, models.PullOptions{Retries: *retries, Wait: !*noWait, MaxSize: *maxSize})
	}
	desc := fmt.Sprintf("%s, %s %s %s model", humanBytes(m.Size), dash(m.Quantization), dash(m.Architecture), m.Type)
	fmt.Fprintf(e.Stdout, "pulled %s (%s) to %s\n", m.Name, desc, m.Path)
	if res.Verified != "" {
		fmt.Fprintf(e.Stdout, "sha256 %s, verified against %s\n", m.Digest, res.Verified)
	} else {
		fmt.Fprintf(e.Stdout, "sha256 %s (not verified: the server vouched for no digest; --sha256 checks one)\n", m.Digest)
	}
	if m.Problem != "" {
		fmt.Fprintf(e.Stderr, "warning: geist cannot run %s: %s\n", m.Name, cli.OneLine(m.Problem))
	} else {
		chat := ""
		if m.Type == "chat" {
			chat = " --chat"
		}
		fmt.Fprintf(e.Stdout, "run it: geist run -m %s%s \"Hello\"\n", m.Name, chat)
	}
	return pullDraft(ctx, e, store, fs.Arg(0), m.Name, models.PullOptions{Retries: *retries, Wait: !*noWait, MaxSize: *maxSize})
}

// pullDraft pulls the drafter the catalog publishes for the model ref
// (stored as name), beside it as the sidecar NAME.draft.gguf that serve
// drafts with. A drafter that cannot be pulled is a warning: the model
// runs without it.
func pullDraft(ctx context.Context, e *cli.Env, store *models.Store, ref, name string, o models.PullOptions) error {
	c, ok := models.LookupCatalog(ref)
	if !ok || c.Draft == "" {
		return nil
	}
	pr := newPullReporter(e.Stderr)
	o.Name, o.HF, o.Progress, o.UserAgent = name+".draft", models.HFFromEnv(), pr.report, "geist/"+cli.VersionString()
	dr, err := store.Pull(ctx, c.Draft, o)
	pr.close()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted")
		}
		fmt.Fprintf(e.Stderr, "warning: the drafter of %s (%s) was not pulled: %s; %s runs without it\n", name, c.Draft, cli.OneLine(err.Error()), name)
		return nil
	}
	fmt.Fprintf(e.Stdout, "drafter %s at %s (serve drafts with it; geist run takes it as --draft-model)\n", dr.Model.Name, dr.Model.Path)
	return nil
}

// pullReporter shows a pull's progress on stderr: a progress bar with
// bytes, rate and time left on a terminal, else a plain line at each step
// and every 10 seconds while bytes flow.
type pullReporter struct {
	w        io.Writer
	tty      bool
	bar      *progressbar.ProgressBar
	status   string
	transfer bool // bytes are flowing (a bar or plain lines are shown)
	lastLine time.Time
	lastDraw time.Time
	start    time.Time
}

// plainEvery is how often a plain progress line is printed, barEvery
// how often the bar is drawn.
const (
	plainEvery = 10 * time.Second
	barEvery   = 100 * time.Millisecond
)

func newPullReporter(w io.Writer) *pullReporter {
	f, ok := w.(*os.File)
	return &pullReporter{w: w, tty: ok && term.IsTerminal(int(f.Fd()))}
}

func (r *pullReporter) report(p models.Progress) {
	if !strings.HasPrefix(p.Status, "pulling ") || p.Status == models.StatusManifest {
		// A step: connecting, waiting, retrying, verifying, done.
		r.close()
		r.transfer = false
		switch {
		case p.Detail != "":
			fmt.Fprintln(r.w, p.Detail)
		case p.Status != r.status && p.Status != models.StatusManifest && p.Status != models.StatusSuccess:
			fmt.Fprintln(r.w, p.Status)
		}
		r.status = p.Status
		return
	}
	if !r.transfer {
		// Bytes begin to flow: the first transfer, or one after a retry.
		r.transfer, r.status, r.start = true, p.Status, time.Now()
		if p.Detail != "" {
			fmt.Fprintln(r.w, p.Detail)
		}
		if !r.tty {
			r.line(p)
			return
		}
		max := int64(-1)
		if p.Total > 0 {
			max = p.Total // the whole file: a resumed download starts part-filled
		}
		// The numbers are the reporter's own (bytes of the whole file, the
		// rate of this transfer): the bar's would count the resumed part
		// as if it had arrived in the first instant.
		r.bar = progressbar.NewOptions64(max,
			progressbar.OptionSetWriter(r.w),
			progressbar.OptionSetDescription(p.Status),
			progressbar.OptionShowBytes(false),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionThrottle(0), // report throttles (barEvery)
			progressbar.OptionSetWidth(r.barWidth()),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(r.w) }),
		)
	}
	if r.bar != nil {
		// The bar shows its own percentage (the description has none),
		// and is drawn by the reporter's throttle, not its own: its own
		// would leave a frame of the new numbers beside the old bar.
		if time.Since(r.lastDraw) < barEvery && !(p.Total > 0 && p.Completed >= p.Total) {
			return
		}
		r.lastDraw = time.Now()
		r.bar.Describe(p.Status + " " + r.numbers(p, false))
		r.bar.Set64(p.Completed)
		return
	}
	if time.Since(r.lastLine) >= plainEvery || p.Total > 0 && p.Completed == p.Total {
		r.line(p)
	}
}

// line prints one plain progress line: done, rate and time left.
func (r *pullReporter) line(p models.Progress) {
	r.lastLine = time.Now()
	fmt.Fprintf(r.w, "%s: %s\n", p.Status, r.numbers(p, true))
}

// numbers are the bytes of the file there (a resumed download counts
// what it had), of how many (and the percentage: plain lines; a bar
// shows its own), the rate of this transfer and the time left.
func (r *pullReporter) numbers(p models.Progress, percent bool) string {
	done := humanBytes(p.Completed)
	if p.Total > 0 {
		done = fmt.Sprintf("%s of %s", done, humanBytes(p.Total))
		if percent {
			done += fmt.Sprintf(" (%d%%)", p.Completed*100/p.Total)
		}
	}
	rate := ""
	if el := time.Since(r.start).Seconds(); el >= 0.5 && p.Completed > p.Start {
		bps := float64(p.Completed-p.Start) / el
		rate = fmt.Sprintf(", %s/s", humanBytes(int64(bps)))
		if p.Total > 0 && p.Completed < p.Total {
			rate += fmt.Sprintf(", %v left", time.Duration(float64(p.Total-p.Completed)/bps*float64(time.Second)).Round(time.Second))
		}
	}
	return done + rate
}

// barWidth fits the bar beside its description and numbers (about 90
// columns) on the terminal.
func (r *pullReporter) barWidth() int {
	cols := 80
	if f, ok := r.w.(*os.File); ok {
		if w, _, err := term.GetSize(int(f.Fd())); err == nil && w > 0 {
			cols = w
		}
	}
	return min(max(cols-90, 10), 40)
}

func (r *pullReporter) close() {
	if r.bar != nil {
		if !r.bar.IsFinished() {
			r.bar.Exit()
		}
		r.bar = nil
	}
}
