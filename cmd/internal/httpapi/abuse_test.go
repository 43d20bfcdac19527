package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
)

// rssKiB is the process's resident set (VmRSS), or -1 off Linux.
func rssKiB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return -1
}

// zeros is an endless body of 'a's that allocates nothing.
type zeros struct{ left int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), z.left))
	for i := range p[:n] {
		p[i] = 'a'
	}
	z.left -= int64(n)
	return n, nil
}

// TestHugeBodies: bodies of 1 MiB and 100 MiB, announced or chunked, get
// 413 without the server reading them into memory.
func TestHugeBodies(t *testing.T) {
	ts := newTestServer(t, nil, nil)
	runtime.GC()
	before := rssKiB()
	for _, size := range []int64{1 << 20, 100 << 20} {
		for _, chunked := range []bool{false, true} {
			const prefix = `{"model":"tiny","messages":[{"role":"user","content":"`
			req, _ := http.NewRequest("POST", ts.url+"/api/chat", io.MultiReader(strings.NewReader(prefix), &zeros{size}))
			if chunked {
				req.ContentLength = -1
			} else {
				req.ContentLength = int64(len(prefix)) + size
			}
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				// The server may close while the client still writes; the
				// status was sent first.
				t.Logf("%d bytes (chunked %v): %v", size, chunked, err)
				continue
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("%d bytes (chunked %v): %d", size, chunked, resp.StatusCode)
			}
			t.Logf("%d bytes (chunked %v): %d in %v", size, chunked, resp.StatusCode, time.Since(start))
		}
	}
	runtime.GC()
	after := rssKiB()
	t.Logf("RSS %d KiB before, %d KiB after the huge bodies (+%d KiB)", before, after, after-before)
	// Under emulation (-short) the RSS is qemu's too, whose translation
	// cache grows as new code runs: only native runs hold it to a bound.
	if before > 0 && after-before > 8<<10 && !testing.Short() {
		t.Errorf("RSS grew by %d KiB", after-before)
	}
}

// TestLoad: 200 requests at 50 per second against a core that answers
// about 30 a second: each gets an answer or 503 with Retry-After, and
// memory and goroutines end where they started.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("a 4 s load test (200 requests at 50/s): native only")
	}
	eng := &appliancetest.Engine{Delay: 10 * time.Millisecond}
	ts := newTestServer(t, eng, func(_ *Config, c *appliance.Config) { c.Limits.Queue = 4 })
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	client := &http.Client{Transport: tr}
	runtime.GC()
	g0, rss0 := runtime.NumGoroutine(), rssKiB()
	var answered, busy, other atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(20 * time.Millisecond)
	start := time.Now()
	for i := range 200 {
		<-tick.C
		wg.Go(func() {
			body := `{"model":"tiny","stream":` + strconv.FormatBool(i%2 == 0) + `,"messages":[{"role":"user","content":"hello"}]}`
			resp, err := client.Post(ts.url+"/api/chat", "application/json", strings.NewReader(body))
			if err != nil {
				other.Add(1)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode == 200 && strings.Contains(string(b), `"done":true`):
				answered.Add(1)
			case resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "":
				busy.Add(1)
			default:
				other.Add(1)
				t.Errorf("status %d: %s", resp.StatusCode, b)
			}
		})
	}
	tick.Stop()
	wg.Wait()
	took := time.Since(start)
	tr.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond)
	runtime.GC()
	g1, rss1 := runtime.NumGoroutine(), rssKiB()
	st := ts.core.Snapshot()
	t.Logf("200 requests in %v: %d answered, %d busy (503), %d other; goroutines %d -> %d; RSS %d -> %d KiB; core: served %d refused %d, queue %d",
		took, answered.Load(), busy.Load(), other.Load(), g0, g1, rss0, rss1, st.Served, st.Refused, st.Queue)
	if answered.Load()+busy.Load() != 200 || answered.Load() == 0 || busy.Load() == 0 {
		t.Errorf("answered %d, busy %d of 200", answered.Load(), busy.Load())
	}
	if g1 > g0+4 {
		t.Errorf("goroutines %d -> %d", g0, g1)
	}
	if rss0 > 0 && rss1-rss0 > 16<<10 {
		t.Errorf("RSS grew by %d KiB", rss1-rss0)
	}
	if st.Requests[appliance.SourceHTTP]["answered"] != answered.Load() || st.Requests[appliance.SourceHTTP]["busy"] != busy.Load() {
		t.Errorf("the core counted %v", st.Requests)
	}
}

// TestManySlowClients: clients that open connections and send nothing
// are dropped after ReadHeaderTimeout while others are served.
func TestManySlowClients(t *testing.T) {
	ts := newTestServer(t, nil, func(c *Config, _ *appliance.Config) { c.ReadHeaderTimeout = 300 * time.Millisecond })
	addr := strings.TrimPrefix(ts.url, "http://")
	var conns []net.Conn
	for range 100 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("POST /api/chat HTTP/1.1\r\n"))
		conns = append(conns, c)
	}
	resp, body := ts.do(t, "GET", "/api/tags", "")
	if resp.StatusCode != 200 {
		t.Errorf("with 100 slow clients: %d %s", resp.StatusCode, body)
	}
	deadline := time.Now().Add(3 * time.Second)
	for _, c := range conns {
		c.SetReadDeadline(deadline)
		_, err := bufio.NewReader(c).ReadByte()
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Errorf("a slow client was not dropped within 3 s")
			break
		}
		c.Close()
	}
}
