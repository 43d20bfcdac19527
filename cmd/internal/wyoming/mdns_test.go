package wyoming

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/mdns"
	"github.com/miekg/dns"
)

// The mDNS tests browse for the advertisement on this machine's default
// multicast interface, as Home Assistant would on the network: with the
// library's own resolver and, when Debian's python3-zeroconf is installed,
// with python-zeroconf (the library Home Assistant discovers services
// with). Multicast is looped back to the sender, so no second host is
// needed; a machine with no multicast interface up skips, saying so.

// multicastUp skips the test when no interface can carry multicast, and
// under -short: the qemu-user runs, where binding a second multicast
// socket to the mDNS port fails (the tests pass natively).
func multicastUp(t *testing.T) {
	if testing.Short() {
		t.Skip("mDNS browse: native runs only (-short: under qemu-user a second socket on port 5353 fails to bind)")
	}
	ifs, _ := net.Interfaces()
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp != 0 && ifc.Flags&net.FlagMulticast != 0 && ifc.Flags&net.FlagLoopback == 0 {
			return
		}
	}
	t.Skip("no multicast interface up: mDNS cannot be shown on this machine")
}

func advertise(t *testing.T, instance string, port int) *Advertiser {
	t.Helper()
	multicastUp(t)
	a, err := NewAdvertiser(AdvertiseConfig{Instance: instance, Port: port, Host: "geist-test",
		TXT: []string{"version=v-test", "model=stories260K-Q4_0"}, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return a
}

// browse looks the service type up with the library's resolver until it
// finds instance or d passes.
func browse(t *testing.T, instance string, d time.Duration) *mdns.ServiceEntry {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		entries := make(chan *mdns.ServiceEntry, 16)
		var found *mdns.ServiceEntry
		var wg sync.WaitGroup
		wg.Go(func() {
			for e := range entries {
				if strings.HasPrefix(e.Name, instance+".") && found == nil {
					found = e
				}
			}
		})
		p := mdns.DefaultParams(ServiceType)
		p.Entries, p.Timeout, p.DisableIPv6 = entries, time.Second, true
		p.Logger = discardLog()
		err := mdns.Query(p)
		close(entries)
		wg.Wait()
		if err != nil {
			t.Fatalf("mdns query: %v", err)
		}
		if found != nil {
			return found
		}
	}
	return nil
}

func TestAdvertise(t *testing.T) {
	instance := fmt.Sprintf("geist-test-%d", os.Getpid())
	a := advertise(t, instance, 10599)
	e := browse(t, instance, 10*time.Second)
	if e == nil {
		t.Fatalf("browsing %s did not find %s", ServiceType, a.Name())
	}
	if e.Port != 10599 || e.Host != "geist-test.local." || e.AddrV4 == nil || !strings.Contains(e.Info, "model=stories260K-Q4_0") {
		t.Errorf("entry %+v", e)
	}
	t.Logf("library resolver found %s at %s:%d (host %s, TXT %q)", e.Name, e.AddrV4, e.Port, e.Host, e.InfoFields)
}

// Home Assistant's library sees the announcement.
func TestAdvertiseZeroconf(t *testing.T) {
	py := ""
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import zeroconf").Run() == nil {
			py = p
			break
		}
	}
	if py == "" {
		t.Skip("python-zeroconf not installed (Debian: python3-zeroconf): Home Assistant's discovery library cannot be shown")
	}
	instance := fmt.Sprintf("geist-zc-%d", os.Getpid())
	advertise(t, instance, 10598)
	script := `
import sys, json, time
from zeroconf import Zeroconf, ServiceBrowser, IPVersion
want = sys.argv[1] + "._wyoming._tcp.local."
zc = Zeroconf(ip_version=IPVersion.V4Only)
found = []
class L:
    def add_service(self, zc, type_, name):
        if name == want:
            found.append(name)
    def update_service(self, zc, type_, name):
        self.add_service(zc, type_, name)
    def remove_service(self, zc, type_, name):
        pass
ServiceBrowser(zc, "_wyoming._tcp.local.", L())
deadline = time.time() + 15
while not found and time.time() < deadline:
    time.sleep(0.1)
if not found:
    print(json.dumps({"error": "not found"}))
    sys.exit(1)
info = zc.get_service_info("_wyoming._tcp.local.", want, timeout=5000)
print(json.dumps({"name": info.name, "port": info.port, "addresses": info.parsed_addresses(), "server": info.server,
                  "properties": {k.decode(): (v or b"").decode() for k, v in info.properties.items()}}))
zc.close()
`
	out, err := exec.Command(py, "-c", script, instance).Output()
	if err != nil {
		t.Fatalf("python-zeroconf browse: %v: %s", err, out)
	}
	var got struct {
		Name       string            `json:"name"`
		Port       int               `json:"port"`
		Addresses  []string          `json:"addresses"`
		Server     string            `json:"server"`
		Properties map[string]string `json:"properties"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if got.Port != 10598 || len(got.Addresses) == 0 || got.Properties["model"] != "stories260K-Q4_0" {
		t.Errorf("python-zeroconf found %+v", got)
	}
	t.Logf("python-zeroconf found %s", out)
}

// The advertiser announces itself unasked when it starts (twice) and
// says goodbye (TTL 0) when it stops.
func TestAnnouncements(t *testing.T) {
	multicastUp(t)
	l, err := net.ListenMulticastUDP("udp4", nil, &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353})
	if err != nil {
		t.Skipf("cannot listen to the mDNS group: %v", err)
	}
	defer l.Close()
	instance := fmt.Sprintf("geist-ann-%d", os.Getpid())
	a, err := NewAdvertiser(AdvertiseConfig{Instance: instance, Port: 10597, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	// ttls returns the TTLs of the PTR records to our instance in the
	// responses read until n arrived or d passed.
	ttls := func(n int, d time.Duration) []uint32 {
		var got []uint32
		buf := make([]byte, 9000)
		for deadline := time.Now().Add(d); len(got) < n && time.Now().Before(deadline); {
			l.SetReadDeadline(deadline)
			k, from, err := l.ReadFrom(buf)
			if err != nil {
				break
			}
			var m dns.Msg
			if m.Unpack(buf[:k]) != nil || !m.Response {
				continue
			}
			for _, rr := range m.Answer {
				if p, ok := rr.(*dns.PTR); ok && p.Ptr == a.Name() {
					got = append(got, p.Hdr.Ttl)
					if from.(*net.UDPAddr).Port != 5353 {
						t.Errorf("announcement from %v: RFC 6762 responses come from port 5353", from)
					}
				}
			}
		}
		return got
	}
	if got := ttls(2, 5*time.Second); len(got) != 2 || got[0] != 120 || got[1] != 120 {
		t.Errorf("announcements: PTR TTLs %v, want two of 120", got)
	}
	cancel()
	<-done
	if got := ttls(1, 3*time.Second); len(got) != 1 || got[0] != 0 {
		t.Errorf("goodbye: PTR TTLs %v, want one of 0", got)
	}
}

func discardLog() *log.Logger { return log.New(io.Discard, "", 0) }
