package mqtt

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
	"github.com/geisten/geist/mqtt/mqtttest"
)

func TestNormalizeBroker(t *testing.T) {
	for in, want := range map[string]string{
		"mqtt://ha.local":           "mqtt://ha.local:1883",
		"mqtts://ha.local":          "mqtts://ha.local:8883",
		"tcp://10.0.0.2":            "tcp://10.0.0.2:1883",
		"ssl://ha.local":            "ssl://ha.local:8883",
		"tls://[::1]":               "tls://[::1]:8883",
		"tcp://ha.local:1884":       "tcp://ha.local:1884",
		" mqtt://ha.local:1883 ":    "mqtt://ha.local:1883",
		"ws://ha.local:9001/mqtt":   "ws://ha.local:9001/mqtt",
		"wss://ha.local/mqtt":       "wss://ha.local/mqtt",
		"mqtts://broker.lan:443":    "mqtts://broker.lan:443",
		"mqtt://ha.local:1883/":     "mqtt://ha.local:1883",
		"mqtt://127.0.0.1:1883":     "mqtt://127.0.0.1:1883",
		"mqtt://homeassistant:1883": "mqtt://homeassistant:1883",
	} {
		if got, err := NormalizeBroker(in); err != nil || got != want {
			t.Errorf("NormalizeBroker(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"homeassistant.local":      "write mqtt://homeassistant.local:1883 (or mqtts://homeassistant.local:8883 for TLS)",
		"homeassistant.local:1883": "write mqtt://homeassistant.local:1883",
		"homeassistant.local:8883": "write mqtts://homeassistant.local:8883",
		"http://ha.local":          `scheme "http"`,
		"mqtt://":                  "names no host",
		"mqtt://u:p@ha.local":      "not in the URL",
		"mqtt://ha.local/x":        "no path",
		"":                         "no broker",
	} {
		if got, err := NormalizeBroker(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NormalizeBroker(%q) = %q, %v; want an error saying %q", in, got, err, want)
		}
	}
}

// TestServiceWrongPassword: with a password the broker refuses, the
// service logs the broker's reason at WARN within 5 s of starting, with
// the next attempt's time, backs off (1 s, 2 s, ...), and the core's
// State and Link() say that the link is down and why. The right password
// connects.
func TestServiceWrongPassword(t *testing.T) {
	b := mqtttest.StartMosquittoWithPassword(t, "geist", "right")
	logs := &mqtttest.Log{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	core, err := appliance.New(appliance.Config{Engine: &appliancetest.Engine{}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Broker: b.URL, Device: "pw", Username: "geist", Password: "wrong", Logger: log, MaxReconnectInterval: 4 * time.Second}, core)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	start := time.Now()
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	line := regexp.MustCompile(`level=WARN msg="mqtt broker connection failed" device=pw broker=tcp://127\.0\.0\.1:\d+ reason="(not authorised|bad user name or password)" err="[^"]+" attempt=(\d) retry_in=(\d+)s next_retry=\d\d:\d\d:\d\d`)
	for !(len(line.FindAllString(logs.String(), -1)) >= 3) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no three failed attempts logged in 10 s; log:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	first := strings.Index(logs.String(), "mqtt broker connection failed")
	m := line.FindAllStringSubmatch(logs.String(), -1)
	if m[0][2] != "1" || m[0][3] != "1" || m[1][3] != "2" || m[2][3] != "4" {
		t.Errorf("attempts and back-off: %q", m)
	}
	if first < 0 {
		t.Fatal("no warning")
	}
	t.Logf("broker says %q; logged:\n%s", m[0][1], m[0][0])
	l := s.Link()
	if l.Connected || l.Reason != m[0][1] || l.Attempts < 3 || l.NextRetry.Before(time.Now().Add(-time.Second)) || l.Broker != b.URL {
		t.Errorf("link %+v", l)
	}
	st := core.Snapshot()
	if ml, ok := st.Links["mqtt"]; !ok || ml.Up || ml.Reason != m[0][1] || !strings.Contains(ml.Detail, m[0][1]) || ml.Target != b.URL {
		t.Errorf("core state links %+v", st.Links)
	}
	if d := st.Degraded[appliance.PartBroker]; d != "not connected: "+m[0][1] {
		t.Errorf("degraded %+v", st.Degraded)
	}
	// serve --check's probe says the same, at once.
	if _, err := Check(Config{Broker: b.URL, Device: "pw", Username: "geist", Password: "wrong"}, 5*time.Second); err == nil || !strings.HasPrefix(err.Error(), m[0][1]) {
		t.Errorf("Check with the wrong password: %v", err)
	}
	detail, err := Check(Config{Broker: b.URL, Device: "pw", Username: "geist", Password: "right"}, 5*time.Second)
	if err != nil || !strings.Contains(detail, "geist/pw/ask") {
		t.Errorf("Check with the right password: %q %v", detail, err)
	}
	// The right password connects, and the link says so.
	s2, core2 := startService(t, Config{Broker: b.URL, Device: "pw2", Username: "geist", Password: "right"}, &appliancetest.Engine{}, nil)
	if l := s2.Link(); !l.Connected || l.Reason != "" || l.Attempts != 0 {
		t.Errorf("connected link %+v", l)
	}
	if st := core2.Snapshot(); !st.Links["mqtt"].Up || st.Degraded[appliance.PartBroker] != "" {
		t.Errorf("connected core link %+v, degraded %+v", st.Links, st.Degraded)
	}
}

// TestClassify: the reasons of refused, unreachable and TLS failures.
func TestClassify(t *testing.T) {
	port := mqtttest.FreePort(t)
	dir := t.TempDir()
	ca, caKey := writeCert(t, dir, "ca", true, nil, nil)
	writeCert(t, dir, "server", false, ca, caKey)
	writeCert(t, dir, "other", true, nil, nil) // a CA that signed nothing here
	tlsPort := mqtttest.FreePort(t)
	b := mqtttest.StartMosquitto(t, fmt.Sprintf("listener %d 127.0.0.1\ncafile %s\ncertfile %s\nkeyfile %s",
		tlsPort, filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")))
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Broker: fmt.Sprintf("mqtt://127.0.0.1:%d", port)}, ReasonRefused},
		{Config{Broker: "mqtt://geist-test.invalid"}, ReasonUnreachable},
		{Config{Broker: fmt.Sprintf("mqtts://127.0.0.1:%d", tlsPort), CAFile: filepath.Join(dir, "other.pem")}, ReasonTLS},
		{Config{Broker: fmt.Sprintf("mqtts://127.0.0.1:%d", b.Port)}, ReasonTLSHandshake}, // TLS to a plain port
		{Config{Broker: fmt.Sprintf("mqtts://127.0.0.1:%d", tlsPort), CAFile: filepath.Join(dir, "ca.pem")}, ""},
	} {
		c.cfg.Device = "cl"
		_, err := Check(c.cfg, 3*time.Second)
		got := ""
		if err != nil {
			got, _, _ = strings.Cut(err.Error(), ":")
		}
		if got != c.want {
			t.Errorf("%s: %v; want reason %q", c.cfg.Broker, err, c.want)
		} else {
			t.Logf("%s: %v", c.cfg.Broker, err)
		}
	}
}

// TestServiceSlowBroker: a broker that accepts TCP but never answers
// CONNECT is reported within SlowConnect.
func TestServiceSlowBroker(t *testing.T) {
	ln := mqtttest.Silent(t)
	logs := &mqtttest.Log{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	core, _ := appliance.New(appliance.Config{Engine: &appliancetest.Engine{}})
	s, err := New(Config{Broker: "mqtt://" + ln, Device: "slow", Logger: log, SlowConnect: 300 * time.Millisecond, ConnectTimeout: 5 * time.Second}, core)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.Run(ctx)
	if !strings.Contains(logs.String(), "mqtt broker not answering yet") {
		t.Errorf("log:\n%s", logs.String())
	}
}
