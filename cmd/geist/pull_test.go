package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
	"github.com/geisten/geist/cmd/internal/models"
	"github.com/geisten/geist/cmd/internal/models/hftest"
	"github.com/geisten/geist/engine/zoo"
)

// TestPullFromHuggingFace pulls a zoo model from a local imitation of the
// Hugging Face Hub (a resolver redirecting to a CDN on another port, with
// X-Linked-Etag, X-Linked-Size and byte ranges) through the command line:
// a connection cut at 40% is resumed, a wrong checksum stores nothing, a
// full disk fails before the download, two pulls at once leave one good
// file; geist models list shows it and geist run -m NAME uses it.
func TestPullFromHuggingFace(t *testing.T) {
	if testing.Short() {
		t.Skip("native only (-short): cmd/internal/models tests the same paths on a small synthetic model")
	}
	model := zoo.Path(t, "models", "stories260K-F32.gguf")
	data, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	srv := hftest.New(t)
	srv.Put("geist/stories-GGUF/main/stories260K-F32.gguf", hftest.File{Data: data})
	t.Setenv("HF_ENDPOINT", srv.Endpoint())
	t.Setenv("HF_TOKEN", "")
	dir := filepath.Join(t.TempDir(), "models")
	const src = "hf:geist/stories-GGUF/stories260K-F32.gguf"
	cut := len(data) * 4 / 10

	// A connection cut at 40% is retried with a range request.
	srv.CutNext(int64(cut))
	code, out, errs := geist(t, "", "pull", "--models-dir", dir, src)
	if code != 0 {
		t.Fatalf("pull: exit %d: %s", code, errs)
	}
	t.Logf("geist pull %s:\n%s%s", src, errs, out)
	cdn := srv.CDNRequests()
	if len(cdn) != 2 || cdn[1].Range != "bytes="+itoa(cut)+"-" || cdn[1].Status != 206 {
		t.Errorf("CDN requests %+v: want the second to resume at %d", cdn, cut)
	}
	for _, want := range []string{"download broke off", "retrying in", "resuming at", "verifying sha256 digest"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	if !strings.Contains(out, "pulled stories260K-F32") || !strings.Contains(out, "verified against the server's digest") {
		t.Errorf("stdout %q", out)
	}
	checkFile(t, filepath.Join(dir, "stories260K-F32.gguf"), data)

	// Cut again without retries: the next pull resumes the partial file.
	srv.CutNext(int64(cut))
	code, _, errs = geist(t, "", "pull", "--models-dir", dir, "--name", "story2", "--retries", "0", src)
	if code != 1 || !strings.Contains(errs, "the same pull resumes it") {
		t.Fatalf("cut pull: exit %d: %s", code, errs)
	}
	if st, err := os.Stat(filepath.Join(dir, "story2.gguf.partial")); err != nil || st.Size() != int64(cut) {
		t.Fatalf("partial download: %v", err)
	}
	code, _, errs = geist(t, "", "pull", "--models-dir", dir, "--name", "story2", src)
	if code != 0 || !strings.Contains(errs, "resuming at") {
		t.Fatalf("resumed pull: exit %d: %s", code, errs)
	}
	checkFile(t, filepath.Join(dir, "story2.gguf"), data)

	// Pulled again, it is up to date: nothing is downloaded.
	n := len(srv.CDNRequests())
	if code, out, _ := geist(t, "", "pull", "--models-dir", dir, src); code != 0 || !strings.Contains(out, "up to date") || len(srv.CDNRequests()) != n {
		t.Errorf("second pull: exit %d, %q", code, out)
	}

	// Wrong checksums leave nothing in the store and say so.
	code, _, errs = geist(t, "", "pull", "--models-dir", dir, "--name", "bad", "--sha256", strings.Repeat("0", 64), src)
	if code != 1 || !strings.Contains(errs, "sha256 mismatch") || !strings.Contains(errs, "nothing was downloaded") {
		t.Errorf("wrong --sha256: exit %d: %s", code, errs)
	}
	srv.Put("geist/stories-GGUF/main/corrupt.gguf", hftest.File{Data: data, Digest: strings.Repeat("ab", 32)})
	code, _, errs = geist(t, "", "pull", "--models-dir", dir, "hf:geist/stories-GGUF/corrupt.gguf")
	if code != 1 || !strings.Contains(errs, "sha256 mismatch") || !strings.Contains(errs, "nothing was stored") {
		t.Errorf("corrupt download: exit %d: %s", code, errs)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 4 {
		t.Errorf("store holds %v, want the two models and their records", m)
	}

	// Errors are one line naming the URL, or HF_TOKEN for a gated model.
	code, _, errs = geist(t, "", "pull", "--models-dir", dir, "hf:geist/stories-GGUF/none.gguf")
	if code != 1 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "404") || !strings.Contains(errs, srv.Endpoint()+"/geist/stories-GGUF/resolve/main/none.gguf") {
		t.Errorf("missing file: exit %d: %q", code, errs)
	}
	srv.Put("geist/gated-GGUF/main/m.gguf", hftest.File{Data: data, Token: "hf_x"})
	code, _, errs = geist(t, "", "pull", "--models-dir", dir, "hf:geist/gated-GGUF/m.gguf")
	if code != 1 || !strings.Contains(errs, "set HF_TOKEN") {
		t.Errorf("gated model: exit %d: %q", code, errs)
	}

	// models list shows them; -m NAME runs one.
	code, out, _ = geist(t, "", "models", "list", "--models-dir", dir)
	if code != 0 || !strings.Contains(out, "stories260K-F32") || !strings.Contains(out, "story2") || !strings.Contains(out, "llama") || !strings.Contains(out, "F32") {
		t.Errorf("models list: exit %d:\n%s", code, out)
	}
	t.Logf("geist models list:\n%s", out)
	var ms []models.Model
	code, out, _ = geist(t, "", "models", "list", "--json", "--models-dir", dir)
	if err := json.Unmarshal([]byte(out), &ms); code != 0 || err != nil || len(ms) != 2 || ms[0].Digest == "" || ms[0].Path == "" {
		t.Errorf("models list --json: %v %s", err, out)
	}
	_, want, _ := geist(t, "", "run", "-m", model, "--temp", "0", "-n", "24", "Once upon a time")
	code, got, errs := geist(t, "", "run", "-m", "stories260K-F32", "--models-dir", dir, "--temp", "0", "-n", "24", "Once upon a time")
	if code != 0 || got != want || len(want) < 20 {
		t.Errorf("run -m NAME: exit %d %s\n%q\nwant %q", code, errs, got, want)
	}
	if code, out, _ := geist(t, "", "inspect", "story2", "--models-dir", dir); code != 0 || !strings.Contains(out, "llama") {
		t.Errorf("inspect NAME: exit %d %q", code, out)
	}
	if code, _, errs := geist(t, "", "run", "-m", "nonesuch", "--models-dir", dir, "x"); code == 0 || !strings.Contains(errs, "no model of that name in "+dir) {
		t.Errorf("run -m unknown: exit %d %q", code, errs)
	}

	// models rm removes by name, or by a path inside the store only.
	if code, _, errs := geist(t, "", "models", "rm", "--models-dir", dir, model); code != 1 || !strings.Contains(errs, "not in the model store") {
		t.Errorf("rm of a path outside: exit %d %q", code, errs)
	}
	if code, out, _ := geist(t, "", "models", "rm", "--models-dir", dir, filepath.Join(dir, "story2.gguf")); code != 0 || out != "removed story2\n" {
		t.Errorf("rm: exit %d %q", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "story2.gguf.json")); !os.IsNotExist(err) {
		t.Error("rm left the record")
	}

	t.Run("concurrent", func(t *testing.T) {
		srv.Put("geist/stories-GGUF/main/twice.gguf", hftest.File{Data: data})
		held, release := srv.HoldNext(int64(len(data) / 2))
		defer release()
		var outs, errss [2]daemontest.SyncBuffer
		var codes [2]int
		var wg sync.WaitGroup
		pull := func(i int) {
			defer wg.Done()
			codes[i] = Main(context.Background(), []string{"pull", "--models-dir", dir, "hf:geist/stories-GGUF/twice.gguf"},
				&cli.Env{Stdin: strings.NewReader(""), Stdout: &outs[i], Stderr: &errss[i]})
		}
		wg.Add(1)
		go pull(0)
		<-held
		wg.Add(1)
		go pull(1)
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(errss[1].String(), "another pull of twice is running"); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the second pull did not wait: %q", errss[1].String())
			}
		}
		release()
		wg.Wait()
		if codes != [2]int{0, 0} || !strings.Contains(outs[0].String(), "pulled twice") || !strings.Contains(outs[1].String(), "twice is up to date") {
			t.Fatalf("exits %v\n%s%s\n%s%s", codes, errss[0].String(), outs[0].String(), errss[1].String(), outs[1].String())
		}
		t.Logf("two pulls at once:\n%s%s---\n%s%s", errss[0].String(), outs[0].String(), errss[1].String(), outs[1].String())
		checkFile(t, filepath.Join(dir, "twice.gguf"), data)
		if m, _ := filepath.Glob(filepath.Join(dir, "twice.gguf*")); len(m) != 2 {
			t.Errorf("files %v, want the model and its record", m)
		}
	})

	t.Run("full disk", func(t *testing.T) {
		small := mountTmpfs(t, "1m")
		code, _, errs := geist(t, "", "pull", "--models-dir", small, src)
		if code != 1 || !strings.Contains(errs, "not enough free disk space") {
			t.Fatalf("pull onto a full disk: exit %d %q", code, errs)
		}
		t.Logf("geist pull onto a 1 MiB tmpfs: %s", errs)
		if m, _ := filepath.Glob(filepath.Join(small, "*")); len(m) != 0 {
			t.Errorf("left %v", m)
		}
	})
}

// mountTmpfs mounts a tmpfs of the size (mount's size= option) for the
// test, or skips it when that is not allowed (not root, no CAP_SYS_ADMIN).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root; cmd/internal/models tests the free-space check with an injected statfs")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s); cmd/internal/models tests the free-space check with an injected statfs", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

func checkFile(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the served file", path)
	}
	if _, err := os.Stat(path + ".partial"); !os.IsNotExist(err) {
		t.Errorf("%s.partial left behind", path)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// After a resume the progress counts the whole file from the resumed
// offset, not the rest from 0.
func TestPullProgressFromTheResumedOffset(t *testing.T) {
	var buf bytes.Buffer
	r := newPullReporter(&buf)
	r.report(models.Progress{Status: "pulling 0123456789ab", Total: 100 << 20, Completed: 40 << 20, Start: 40 << 20, Detail: "resuming at 40.00 MiB"})
	r.report(models.Progress{Status: "pulling 0123456789ab", Total: 100 << 20, Completed: 100 << 20, Start: 40 << 20})
	out := buf.String()
	if !strings.Contains(out, "(40%)") || !strings.Contains(out, "(100%)") || strings.Contains(out, "(0%)") {
		t.Errorf("progress %q: want 40%% then 100%%", out)
	}
}

// TestPullBarOnePercentage: on a terminal the bar shows one percentage,
// its own, and every frame it draws has the bytes and the bar of the same
// moment (issue 37: "pulling … (41%)" beside a bar at 40%).
func TestPullBarOnePercentage(t *testing.T) {
	var buf bytes.Buffer
	r := newPullReporter(&buf)
	r.tty = true
	var frames []string
	for _, done := range []int64{0, 10, 41, 77, 100} {
		r.report(models.Progress{Status: "pulling 0123456789ab", Total: 100 << 20, Completed: done << 20})
		// What the terminal shows after the update: the last frame.
		fs := strings.Split(strings.TrimRight(buf.String(), "\n"), "\r")
		frames = append(frames, fs[len(fs)-1])
		time.Sleep(120 * time.Millisecond) // past the throttle
	}
	r.close()
	for _, frame := range strings.Split(buf.String(), "\r") {
		if strings.Count(frame, "%") > 1 || strings.Contains(frame, "%)") {
			t.Errorf("a frame with two percentages: %q", frame)
		}
	}
	re := regexp.MustCompile(`(\d+)\.00 MiB of 100\.00 MiB.*\s(\d+)% \|`)
	for i, frame := range frames[1:] {
		// The bar's percentage is the bytes': "41.00 MiB of 100.00 MiB" beside " 41%".
		want := []string{"10", "41", "77", "100"}[i]
		if m := re.FindStringSubmatch(frame); m == nil || m[1] != want || m[2] != want {
			t.Errorf("frame %q, want %s MiB beside %s%%", frame, want, want)
		}
	}
}

// TestPullCatalogDrafter: a catalog model with a published drafter is
// pulled with it beside it (NAME.draft.gguf, which serve drafts with); a
// drafter that cannot be pulled is a warning, not a failed pull.
func TestPullCatalogDrafter(t *testing.T) {
	if testing.Short() {
		t.Skip("native only (-short)")
	}
	data, err := os.ReadFile(zoo.Path(t, "models", "stories260K-F32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := models.LookupCatalog("gemma4:e2b")
	if !ok || c.Draft == "" {
		t.Fatalf("gemma4:e2b has no drafter in the catalog: %+v", c)
	}
	srv := hftest.New(t)
	hfPath := func(src string) string { // hf:OWNER/REPO/FILE → OWNER/REPO/main/FILE
		p := strings.Split(strings.TrimPrefix(src, "hf:"), "/")
		return p[0] + "/" + p[1] + "/main/" + strings.Join(p[2:], "/")
	}
	srv.Put(hfPath(c.Source), hftest.File{Data: data})
	t.Setenv("HF_ENDPOINT", srv.Endpoint())
	t.Setenv("HF_TOKEN", "")
	dir := filepath.Join(t.TempDir(), "models")
	code, out, errs := geist(t, "", "pull", "--models-dir", dir, "gemma4:e2b")
	if code != 0 || !strings.Contains(errs, "warning: the drafter of gemma4:e2b") {
		t.Fatalf("pull without the drafter on the Hub: exit %d: %s%s", code, out, errs)
	}
	srv.Put(hfPath(c.Draft), hftest.File{Data: data})
	code, out, errs = geist(t, "", "pull", "--models-dir", dir, "gemma4:e2b")
	if code != 0 || !strings.Contains(out, "drafter gemma4:e2b.draft") {
		t.Fatalf("pull: exit %d: %s%s", code, out, errs)
	}
	checkFile(t, filepath.Join(dir, "gemma4:e2b.draft.gguf"), data)
	sc := daemon.Config{Model: filepath.Join(dir, "gemma4:e2b.gguf")}
	if d := sc.DraftFile(); d != filepath.Join(dir, "gemma4:e2b.draft.gguf") {
		t.Errorf("serve's draft model %q", d)
	}
}
