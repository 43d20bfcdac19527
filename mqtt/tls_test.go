package mqtt

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/appliancetest"
	"github.com/geisten/geist/mqtt/mqtttest"
)

// writeCert makes a certificate signed by parent (self-signed when nil)
// and writes name.pem and name.key into dir.
func writeCert(t *testing.T, dir, name string, isCA bool, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "geist test " + name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
		IsCA:         isCA, BasicConstraintsValid: true,
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	kb, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(filepath.Join(dir, name+".pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return cert, key
}

// TestServiceTLSClientCert connects over ssl:// to a Mosquitto that
// requires a client certificate from a private CA.
func TestServiceTLSClientCert(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := writeCert(t, dir, "ca", true, nil, nil)
	writeCert(t, dir, "server", false, ca, caKey)
	writeCert(t, dir, "client", false, ca, caKey)
	port := mqtttest.FreePort(t)
	b := mqtttest.StartMosquitto(t, fmt.Sprintf("listener %d 127.0.0.1\ncafile %s\ncertfile %s\nkeyfile %s\nrequire_certificate true",
		port, filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")))
	url := fmt.Sprintf("ssl://127.0.0.1:%d", port)
	startService(t, Config{Broker: url, Device: "tls", CAFile: filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client.key")}, &appliancetest.Engine{}, nil)
	c := mqtttest.NewClient(t, b.URL) // plain tcp listener of the same broker
	c.Subscribe(t, "geist/tls/answer/#")
	c.Publish(t, "geist/tls/ask", []byte(`{"id":"t1","text":"hi"}`))
	if msgs, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(m) > 0 }); !ok || !strings.Contains(string(msgs[0].Payload), `"done":true`) {
		t.Fatalf("no answer over TLS: %v", msgs)
	}
	// Without the client certificate the broker refuses the connection.
	core, err := appliance.New(appliance.Config{Engine: &appliancetest.Engine{}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Broker: url, Device: "nocert", CAFile: filepath.Join(dir, "ca.pem"), Logger: testLogger(t)}, core)
	if err != nil {
		t.Fatal(err)
	}
	if tok := s.client.Connect(); tok.WaitTimeout(time.Second) && tok.Error() == nil && s.client.IsConnectionOpen() {
		t.Error("connected without a client certificate")
	}
	s.client.Disconnect(0)
}

// TestServiceWebSocket connects over ws://.
func TestServiceWebSocket(t *testing.T) {
	port := mqtttest.FreePort(t)
	b := mqtttest.StartMosquitto(t, fmt.Sprintf("listener %d 127.0.0.1\nprotocol websockets", port))
	startService(t, Config{Broker: fmt.Sprintf("ws://127.0.0.1:%d", port), Device: "ws"}, &appliancetest.Engine{}, nil)
	c := mqtttest.NewClient(t, b.URL)
	c.Subscribe(t, "geist/ws/answer/#")
	c.Publish(t, "geist/ws/ask", []byte(`{"id":"w1","text":"hi"}`))
	if msgs, ok := c.Wait(5*time.Second, func(m []mqtttest.Msg) bool { return len(m) > 0 }); !ok || !strings.Contains(string(msgs[0].Payload), `"done":true`) {
		t.Fatalf("no answer over WebSocket: %v", msgs)
	}
}

// TestServiceBrokerDown: geist starts with the broker unreachable, keeps
// retrying, and stops promptly.
func TestServiceBrokerDown(t *testing.T) {
	port := mqtttest.FreePort(t)
	core, err := appliance.New(appliance.Config{Engine: &appliancetest.Engine{}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Broker: fmt.Sprintf("tcp://127.0.0.1:%d", port), Device: "down", Logger: testLogger(t)}, core)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := contextWithTimeout(300 * time.Millisecond)
	defer cancel()
	start := time.Now()
	s.Run(ctx)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stopping took %v", d)
	}
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
