package mqtt

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// ClientID derives a stable MQTT client id for device dev from the
// machine id (/etc/machine-id, then /var/lib/dbus/machine-id, then the
// host name): two devices on one machine, or one device name on two
// machines, get different ids, and a restart keeps the same one.
func ClientID(dev string) string {
	seed := ""
	for _, p := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if b, err := os.ReadFile(p); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			seed = strings.TrimSpace(string(b))
			break
		}
	}
	if seed == "" {
		seed, _ = os.Hostname()
	}
	h := sha256.Sum256([]byte("geist\x00" + seed + "\x00" + dev))
	id := "geist-" + dev + "-" + hex.EncodeToString(h[:6])
	if len(id) > 64 {
		id = "geist-" + hex.EncodeToString(h[:12])
	}
	return id
}

// tlsConfig builds the TLS configuration for ssl:// brokers: caFile (PEM)
// replaces the system roots when given, certFile and keyFile are the
// client certificate.
func tlsConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("mqtt: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("mqtt: CA file %s holds no PEM certificate", caFile)
		}
		tc.RootCAs = pool
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("mqtt: client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// TLSConfig is the TLS configuration the Service uses for ssl:// brokers,
// for other clients of the same broker (such as a Hermes bridge).
func TLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	return tlsConfig(caFile, certFile, keyFile)
}
