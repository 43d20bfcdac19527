// Package guard bounds what geist's MQTT clients take in from a broker
// that may carry anything: a connection for paho that caps the payload of
// every incoming PUBLISH by its topic before paho reads it, and a rate
// limit for the refusals a front end answers.
//
// paho.mqtt.golang reads every packet whole (packets.ReadPacket allocates
// the remaining length, and PublishPacket.Unpack copies the payload once
// more), so a 100 MiB publication on a subscribed topic costs 200 MiB
// before any handler runs, and paho has no option to refuse it. The
// connection returned by Open sits between paho and the socket: it reads
// each packet's fixed header and topic itself, hands paho a PUBLISH within
// its topic's limit unchanged and, for one over it, a stand-in PUBLISH
// with the same topic, flags and packet id whose payload only records the
// size and the first HeadBytes bytes (see Oversized), then drops the rest
// of the payload from the socket as it arrives. paho acknowledges the
// stand-in like any message, so the broker's QoS flow completes and the
// connection stays up. Other packets a broker sends a client are tiny;
// one larger than 64 KiB ends the connection.
//
// Brokers should still refuse what nobody may send: see Mosquitto's
// message_size_limit and max_packet_size (scripts/README-serve.md).
package guard

import (
	"bufio"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// HeadBytes is how much of an oversized payload its stand-in keeps: room
// for a request's id and reply_to when they come first.
const HeadBytes = 4 << 10

// maxControl bounds the packets other than PUBLISH a broker sends a
// client (CONNACK, SUBACK, PUBACK...: a few bytes each).
const maxControl = 64 << 10

// Limit returns the largest payload, in bytes, accepted on topic.
type Limit func(topic string) int

// ErrControlTooLarge ends a connection whose broker sent a packet other
// than PUBLISH larger than any broker sends.
var ErrControlTooLarge = errors.New("guard: control packet from the broker too large")

// Open returns a paho connection function (ClientOptions.
// SetCustomOpenConnectionFn) that connects as paho does, for tcp://,
// mqtt://, ssl://, tls://, mqtts://, tcps://, ws://, wss:// and unix://
// brokers (the options' Dialer, TLSConfig, HTTPHeaders and
// WebsocketOptions apply; proxy variables from the environment do not),
// and bounds every incoming PUBLISH by limit(topic).
func Open(limit Limit) paho.OpenConnectionFunc {
	return func(uri *url.URL, o paho.ClientOptions) (net.Conn, error) {
		c, err := dial(uri, &o)
		if err != nil {
			return nil, err
		}
		return Wrap(c, limit), nil
	}
}

func dial(uri *url.URL, o *paho.ClientOptions) (net.Conn, error) {
	d := o.Dialer
	if d == nil {
		d = &net.Dialer{Timeout: o.ConnectTimeout}
	}
	switch uri.Scheme {
	case "tcp", "mqtt":
		return d.Dial("tcp", uri.Host)
	case "ssl", "tls", "mqtts", "mqtt+ssl", "tcps":
		return tls.DialWithDialer(d, "tcp", uri.Host, o.TLSConfig)
	case "ws", "wss":
		u := *uri
		u.User = nil
		tc := o.TLSConfig
		if uri.Scheme == "ws" {
			tc = nil
		}
		return paho.NewWebsocket(u.String(), tc, o.ConnectTimeout, o.HTTPHeaders, o.WebsocketOptions)
	case "unix":
		if uri.Host != "" {
			return d.Dial("unix", uri.Host)
		}
		return d.Dial("unix", uri.Path)
	}
	return nil, fmt.Errorf("guard: broker URL scheme %q is not supported", uri.Scheme)
}

// Wrap bounds the PUBLISH packets read from c (a connection to a broker)
// by limit(topic), as Open's connections do.
func Wrap(c net.Conn, limit Limit) net.Conn {
	return &conn{Conn: c, r: bufio.NewReaderSize(c, 16<<10), limit: limit}
}

// conn rewrites the byte stream a broker sends: see the package comment.
// paho reads it from one goroutine.
type conn struct {
	net.Conn
	r     *bufio.Reader
	limit Limit

	pending []byte // bytes for paho before anything else (a header, a stand-in)
	pass    int    // bytes to hand through unchanged
	skip    int    // bytes to drop (the rest of an oversized payload)
	buf     []byte // reused for pending
}

func (c *conn) Read(p []byte) (int, error) {
	for {
		switch {
		case len(c.pending) > 0:
			n := copy(p, c.pending)
			c.pending = c.pending[n:]
			return n, nil
		case c.pass > 0:
			if len(p) > c.pass {
				p = p[:c.pass]
			}
			n, err := c.r.Read(p)
			c.pass -= n
			return n, err
		case c.skip > 0:
			n, err := c.r.Discard(c.skip)
			c.skip -= n
			if err != nil {
				return 0, err
			}
		default:
			if err := c.next(); err != nil {
				return 0, err
			}
		}
	}
}

// next reads the next packet's fixed header (and a PUBLISH's topic) and
// decides what paho gets of it: the bytes as they came, or a stand-in.
func (c *conn) next() error {
	first, err := c.r.ReadByte()
	if err != nil {
		return err
	}
	var lenBytes [4]byte
	rem, n, err := readLength(c.r, &lenBytes)
	if err != nil {
		return err
	}
	b := append(append(c.buf[:0], first), lenBytes[:n]...)
	if first>>4 != 3 { // not a PUBLISH
		if rem > maxControl {
			return fmt.Errorf("%w: type %d, %d bytes", ErrControlTooLarge, first>>4, rem)
		}
		c.buf, c.pending, c.pass = b, b, rem
		return nil
	}
	if rem < 2 {
		return fmt.Errorf("guard: malformed PUBLISH from the broker (%d bytes)", rem)
	}
	var tl [2]byte
	if _, err := io.ReadFull(c.r, tl[:]); err != nil {
		return err
	}
	topicLen := int(binary.BigEndian.Uint16(tl[:]))
	idLen := 0
	if first&0x06 != 0 { // QoS 1 or 2: a packet id follows the topic
		idLen = 2
	}
	payload := rem - 2 - topicLen - idLen
	if payload < 0 {
		return fmt.Errorf("guard: malformed PUBLISH from the broker (topic of %d bytes in %d)", topicLen, rem)
	}
	b = append(b, tl[:]...)
	b = append(b, make([]byte, topicLen)...)
	topic := b[len(b)-topicLen:]
	if _, err := io.ReadFull(c.r, topic); err != nil {
		return err
	}
	if lim := c.limit(string(topic)); payload <= max(lim, 0) {
		c.buf, c.pending, c.pass = b, b, idLen+payload
		return nil
	}
	// The stand-in: the same first byte, a new length, the topic, the
	// packet id, then the marker, the size and the payload's head.
	head := min(payload, HeadBytes)
	body := 2 + topicLen + idLen + len(marker) + 8 + head
	s := appendLength(append(make([]byte, 0, 5+body), first), body)
	s = append(s, b[1+n:]...) // topic length and topic
	s = append(s, make([]byte, idLen)...)
	if _, err := io.ReadFull(c.r, s[len(s)-idLen:]); err != nil {
		return err
	}
	s = append(s, marker[:]...)
	s = binary.BigEndian.AppendUint64(s, uint64(payload))
	s = append(s, make([]byte, head)...)
	if _, err := io.ReadFull(c.r, s[len(s)-head:]); err != nil {
		return err
	}
	c.buf, c.pending, c.skip = s[:0], s, payload-head
	return nil
}

// readLength decodes MQTT's remaining length (1 to 4 bytes), keeping the
// bytes read in raw.
func readLength(r io.ByteReader, raw *[4]byte) (value, n int, err error) {
	shift := 0
	for n < 4 {
		b, err := r.ReadByte()
		if err != nil {
			return 0, 0, err
		}
		raw[n] = b
		n++
		value |= int(b&0x7f) << shift
		if b&0x80 == 0 {
			return value, n, nil
		}
		shift += 7
	}
	return 0, 0, errors.New("guard: malformed remaining length from the broker")
}

func appendLength(b []byte, n int) []byte {
	for {
		d := byte(n & 0x7f)
		n >>= 7
		if n > 0 {
			d |= 0x80
		}
		b = append(b, d)
		if n == 0 {
			return b
		}
	}
}

// marker starts every stand-in payload: two bytes that never start valid
// UTF-8 and a random value of this process, so no publisher can forge one.
var marker = func() (m [10]byte) {
	m[0], m[1] = 0xff, 0xfe
	rand.Read(m[2:])
	return m
}()

// Oversized reports whether payload is the stand-in of a payload over its
// topic's limit, and then the payload's size and its first bytes (at
// most HeadBytes).
func Oversized(payload []byte) (size int64, head []byte, ok bool) {
	if len(payload) < len(marker)+8 || string(payload[:len(marker)]) != string(marker[:]) {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(payload[len(marker):])), payload[len(marker)+8:], true
}
