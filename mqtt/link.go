package mqtt

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/geisten/geist/mqtt/guard"
)

// Default ports filled in when a broker URL names none.
const (
	PortMQTT  = "1883" // mqtt://, tcp://
	PortMQTTS = "8883" // mqtts://, ssl://, tls://
)

// NormalizeBroker checks a broker URL and fills in the default port:
// mqtt:// and tcp:// (1883), mqtts://, ssl:// and tls:// (8883, TLS),
// ws:// and wss:// (WebSocket; the URL's own port, 80 or 443 by
// default). A URL without a scheme is refused with a suggestion rather
// than guessed: a plain connection to a TLS port would fail in an
// obscure way.
func NormalizeBroker(raw string) (string, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return "", errors.New("mqtt: no broker URL")
	}
	if !strings.Contains(s, "://") {
		host := s
		if h, p, err := net.SplitHostPort(s); err == nil {
			host = h
			if p == PortMQTTS {
				return "", fmt.Errorf("mqtt: broker %q has no scheme: write mqtts://%s (TLS on port %s)", raw, s, p)
			}
			return "", fmt.Errorf("mqtt: broker %q has no scheme: write mqtt://%s (or mqtts://%s:%s for TLS)", raw, s, host, PortMQTTS)
		}
		return "", fmt.Errorf("mqtt: broker %q has no scheme: write mqtt://%s:%s (or mqtts://%s:%s for TLS)", raw, host, PortMQTT, host, PortMQTTS)
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("mqtt: broker URL %q: %v", raw, err)
	}
	var port string
	switch u.Scheme {
	case "mqtt", "tcp":
		port = PortMQTT
	case "mqtts", "ssl", "tls":
		port = PortMQTTS
	case "ws", "wss":
	default:
		return "", fmt.Errorf("mqtt: broker URL %q: scheme %q: want mqtt:// (or tcp://), mqtts:// (or ssl://, tls://), ws:// or wss://", raw, u.Scheme)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("mqtt: broker URL %q names no host", raw)
	}
	if u.User != nil {
		return "", fmt.Errorf("mqtt: broker URL %q: give the user name and password as settings (username, password_file), not in the URL", raw)
	}
	if port != "" {
		if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
			return "", fmt.Errorf("mqtt: broker URL %q: an %s:// URL has no path or query", raw, u.Scheme)
		}
		u.Path = ""
		if u.Port() == "" {
			u.Host = net.JoinHostPort(u.Hostname(), port)
		}
	}
	return u.String(), nil
}

// LinkState is the state of the connection to the broker.
type LinkState struct {
	Broker    string
	Connected bool
	Since     time.Time // when it came up or went down
	// While down: why (Reason, in a few words: "not authorised",
	// "bad user name or password", "refused", "unreachable",
	// "TLS verification failed", "connection lost", "connecting"), the
	// error as the broker or the network gave it, the failed attempts so
	// far and when the next one starts.
	Reason    string
	Err       string
	Attempts  int
	NextRetry time.Time
}

// Reasons a broker link is down.
const (
	ReasonNotAuthorised = "not authorised"            // the broker refused the credentials (or their rights)
	ReasonBadLogin      = "bad user name or password" // the broker said so
	ReasonRefused       = "refused"                   // nothing listens there, or the broker refused the client
	ReasonUnreachable   = "unreachable"               // no route, no such host, timed out
	ReasonTLS           = "TLS verification failed"   // the certificate chain or name did not verify
	ReasonTLSHandshake  = "TLS handshake failed"      // other TLS trouble (a plain port, a bad client certificate)
	ReasonLost          = "connection lost"
	ReasonConnecting    = "connecting"
	ReasonStopped       = "stopped" // the service stopped
	ReasonOther         = "error"
)

// Classify names why a connection attempt failed, in a few words.
func Classify(err error) string {
	var (
		dnsErr  *net.DNSError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		verify  *tls.CertificateVerificationError
		recErr  tls.RecordHeaderError
		alert   tls.AlertError
		netErr  net.Error
	)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, packets.ErrorRefusedNotAuthorised):
		return ReasonNotAuthorised
	case errors.Is(err, packets.ErrorRefusedBadUsernameOrPassword):
		return ReasonBadLogin
	case errors.Is(err, packets.ErrorRefusedIDRejected), errors.Is(err, packets.ErrorRefusedServerUnavailable),
		errors.Is(err, packets.ErrorRefusedBadProtocolVersion), errors.Is(err, syscall.ECONNREFUSED):
		return ReasonRefused
	case errors.As(err, &unknown), errors.As(err, &host), errors.As(err, &invalid), errors.As(err, &verify):
		return ReasonTLS
	case errors.As(err, &recErr), errors.As(err, &alert):
		return ReasonTLSHandshake
	case errors.As(err, &dnsErr), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return ReasonUnreachable
	case strings.Contains(err.Error(), "tls:"):
		return ReasonTLSHandshake
	case strings.Contains(err.Error(), "timeout") || strings.Contains(err.Error(), "timed out"):
		return ReasonUnreachable
	}
	return ReasonOther
}

// classifyFor is Classify for an attempt on broker: a TLS URL whose
// connection is reset or cut during the handshake most likely points at
// a plain port.
func classifyFor(broker string, err error) string {
	r := Classify(err)
	tlsURL := strings.HasPrefix(broker, "mqtts://") || strings.HasPrefix(broker, "ssl://") ||
		strings.HasPrefix(broker, "tls://") || strings.HasPrefix(broker, "wss://")
	cut := errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	switch {
	case r == ReasonOther && cut && tlsURL:
		return ReasonTLSHandshake
	case r == ReasonOther && cut:
		return ReasonRefused
	}
	return r
}

// hint is what to do about a reason, for the log.
func hint(reason string) string {
	switch reason {
	case ReasonNotAuthorised, ReasonBadLogin:
		return "check username and password (password_file) against the broker's users"
	case ReasonRefused:
		return "is the broker running and listening on that host and port?"
	case ReasonUnreachable:
		return "check the host name and the network"
	case ReasonTLS:
		return "check ca_file (the CA that signed the broker's certificate) and the host name in the URL"
	case ReasonTLSHandshake:
		return "is that port TLS (mqtts://, 8883) or plain (mqtt://, 1883)? check cert_file and key_file"
	}
	return ""
}

// backoff is the wait before attempt n+1 after n failed ones: 1 s,
// doubling, at most max.
func backoff(n int, max time.Duration) time.Duration {
	d := time.Second
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// Check connects to the broker as the Service would (cfg's URL,
// credentials and TLS settings), subscribes to the device's ask topic,
// unsubscribes and disconnects, all within timeout. Its client id is
// cfg's with "-check" appended, so that a geist serve already connected
// keeps its connection. It returns what it did, or an error that starts
// with the reason (Classify) and ends with a hint.
func Check(cfg Config, timeout time.Duration) (string, error) {
	if err := cfg.defaults(); err != nil {
		return "", err
	}
	id := cfg.ClientID
	if len(id) > 58 {
		id = id[:58]
	}
	id += "-check"
	o := paho.NewClientOptions().AddBroker(cfg.Broker).SetClientID(id).
		SetUsername(cfg.Username).SetPassword(cfg.Password).
		SetCleanSession(true).SetAutoReconnect(false).SetConnectRetry(false).
		SetConnectTimeout(timeout).SetWriteTimeout(timeout).
		SetCustomOpenConnectionFn(guard.Open(func(string) int { return maxCancel })) // retained messages are not read
	if cfg.CAFile != "" || cfg.CertFile != "" {
		tc, err := tlsConfig(cfg.CAFile, cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return "", err
		}
		o.SetTLSConfig(tc)
	}
	fail := func(step string, err error) (string, error) {
		reason := classifyFor(cfg.Broker, err)
		msg := fmt.Sprintf("%s: %s: %v", reason, step, err)
		if h := hint(reason); h != "" {
			msg += " (" + h + ")"
		}
		return "", errors.New(msg)
	}
	c := paho.NewClient(o)
	deadline := time.Now().Add(timeout)
	tok := c.Connect()
	if !tok.WaitTimeout(timeout) {
		c.Disconnect(0)
		return fail("connect", fmt.Errorf("no answer within %v: %w", timeout, context.DeadlineExceeded))
	}
	if err := tok.Error(); err != nil {
		return fail("connect", err)
	}
	defer c.Disconnect(100)
	topic := TopicsFor(cfg.Device, cfg.DiscoveryPrefix).Ask
	st := c.Subscribe(topic, 1, func(paho.Client, paho.Message) {})
	if !st.WaitTimeout(time.Until(deadline)) {
		return fail("subscribe", fmt.Errorf("no answer to subscribing %s: %w", topic, context.DeadlineExceeded))
	}
	if err := st.Error(); err != nil {
		return fail("subscribe", err)
	}
	if q, ok := st.(*paho.SubscribeToken).Result()[topic]; ok && q == 0x80 {
		return fail("subscribe", fmt.Errorf("the broker refused the subscription to %s: %w", topic, packets.ErrorRefusedNotAuthorised))
	}
	ut := c.Unsubscribe(topic)
	if !ut.WaitTimeout(time.Until(deadline)) || ut.Error() != nil {
		return fail("unsubscribe", fmt.Errorf("unsubscribing %s: %v", topic, ut.Error()))
	}
	return fmt.Sprintf("connected as %q, subscribed to and unsubscribed from %s", id, topic), nil
}
