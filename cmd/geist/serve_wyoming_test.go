package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/mdns"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/daemon"
	"github.com/geisten/geist/cmd/internal/daemon/daemontest"
	"github.com/geisten/geist/cmd/internal/wyoming/wyomingtest"
	"github.com/geisten/geist/engine/zoo"
)

// geist serve --wyoming with the zoo's model: the reference client's
// describe shows the handle program; ask answers what geist run answers
// at temperature 0; two clients at once both get answers; the service is
// announced over mDNS.
func TestServeWyoming(t *testing.T) {
	model := zoo.Path(t, "models", serveModel)
	const prompt = "Once upon a time"
	code, want, errs := geist(t, "", "run", "-m", model, "--chat", "--temp", "0", "-n", "40", "--ctx", "256", prompt)
	if code != 0 {
		t.Fatalf("geist run: %d %s", code, errs)
	}
	want = strings.TrimSpace(want)
	device := fmt.Sprintf("wy%d", os.Getpid())
	args := []string{"-m", model, "--device", device, "--ctx", "256", "--temp", "0", "--max-tokens", "40",
		"--data-dir", filepath.Join(t.TempDir(), "state"), "--wyoming", "0.0.0.0:0", "--wyoming-lang", "en"}
	if daemontest.Emulated() {
		args = append(args, "--wyoming-mdns=false")
	}
	stop, logs := runServe(t, args...)
	re := regexp.MustCompile(`Wyoming conversation service listening.*addr=\S*:(\d+)`)
	var port string
	waitFor(t, 30*time.Second, "the Wyoming listener", func() bool {
		m := re.FindStringSubmatch(logs.String())
		if m != nil {
			port = m[1]
		}
		return m != nil
	})
	addr := "127.0.0.1:" + port

	typ, data := wyomingtest.Ask(t, addr, "describe")
	h, _ := data["handle"].([]any)
	if typ != "info" || len(h) != 1 {
		t.Fatalf("describe: %s %v", typ, data)
	}
	prog := h[0].(map[string]any)
	m := prog["models"].([]any)[0].(map[string]any)
	if prog["name"] != "geist" || prog["installed"] != true || m["name"] != "stories260K-Q4_0" || fmt.Sprint(m["languages"]) != "[en]" {
		t.Errorf("handle program %v", prog)
	}

	typ, data = wyomingtest.Ask(t, addr, "ask", prompt)
	if typ != "handled" || data["text"] != want {
		t.Errorf("Wyoming answered %s %q; geist run --chat --temp 0 -n 40: %q", typ, data["text"], want)
	}
	t.Logf("handled: %q", data["text"])

	// Two clients at once: both get the same answer (one waits in the
	// core's queue).
	var wg sync.WaitGroup
	got := make([]string, 2)
	for i := range got {
		wg.Go(func() {
			typ, data := wyomingtest.Ask(t, addr, "ask", prompt, fmt.Sprintf("parallel-%d", i))
			got[i] = typ + ": " + fmt.Sprint(data["text"])
		})
	}
	wg.Wait()
	for i, g := range got {
		if g != "handled: "+want {
			t.Errorf("parallel client %d: %s", i, g)
		}
	}

	if !daemontest.Emulated() {
		instance := "geist-" + device + "."
		var found *mdns.ServiceEntry
		for deadline := time.Now().Add(15 * time.Second); found == nil && time.Now().Before(deadline); {
			entries := make(chan *mdns.ServiceEntry, 16)
			p := mdns.DefaultParams("_wyoming._tcp")
			p.Entries, p.Timeout, p.DisableIPv6, p.Logger = entries, time.Second, true, log.New(io.Discard, "", 0)
			go func() { mdns.Query(p); close(entries) }()
			for e := range entries {
				if strings.HasPrefix(e.Name, instance) {
					found = e
				}
			}
		}
		if found == nil || fmt.Sprint(found.Port) != port {
			t.Errorf("mDNS browse for _wyoming._tcp: %+v; want %s on port %s", found, instance, port)
		} else {
			t.Logf("mDNS: %s at %s:%d", found.Name, found.AddrV4, found.Port)
		}
	}
	if rc := stop(); rc != 0 {
		t.Errorf("exit %d; log:\n%s", rc, logs.String())
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("the Wyoming port is still open after geist serve stopped")
	}
}

func TestServeWyomingConfig(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "geist.toml")
	os.WriteFile(conf, []byte("model = \"a.gguf\"\n[wyoming]\naddr = \"0.0.0.0:10500\"\nlanguages = [\"en\", \"de\"]\n"), 0o600)
	e := &cli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard}
	c, err := daemon.ParseConfig(e, []string{"--config", conf, "--wyoming-mdns=false"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Wyoming.Addr != "0.0.0.0:10500" || c.Wyoming.MDNS || strings.Join(c.Wyoming.Languages, ",") != "en,de" {
		t.Errorf("[wyoming] and flags merged into %+v", c.Wyoming)
	}
	if c, _ := daemon.ParseConfig(e, []string{"-m", "a.gguf"}); c.Wyoming.Addr != "" || !c.Wyoming.MDNS {
		t.Errorf("defaults: %+v (want off, mDNS on once enabled)", c.Wyoming)
	}
	if c, err := daemon.ParseConfig(e, []string{"-m", "a.gguf", "--wyoming-model", "tiny-llama:latest"}); err != nil || c.Wyoming.Model != "tiny-llama:latest" {
		t.Errorf("--wyoming-model: %q, %v", c.Wyoming.Model, err)
	}
	if code, _, errs := geist(t, "", "serve", "-m", "a.gguf", "--wyoming-model", "two words"); code != 2 || !strings.Contains(errs, "wyoming: model") {
		t.Errorf("a bad --wyoming-model: status %d, %q", code, errs)
	}
	code, _, errs := geist(t, "", "serve", "-m", "a.gguf", "--wyoming", "10500")
	if code != 2 || !strings.Contains(errs, `wyoming: addr "10500": want host:port`) {
		t.Errorf("bad addr: status %d, %q", code, errs)
	}
	sample, err := daemon.ParseConfig(e, []string{"--config", filepath.Join("..", "..", "scripts", "geist.toml"), "--mqtt-password-file", ""})
	// The sample keeps Wyoming (no authentication) on loopback, unannounced,
	// and sizes the context itself.
	if err != nil || sample.Wyoming.Addr != "127.0.0.1:10500" || sample.Wyoming.MDNS || sample.Ctx != 0 {
		t.Errorf("scripts/geist.toml: %+v ctx %v %v", sample.Wyoming, sample.Ctx, err)
	}
}
