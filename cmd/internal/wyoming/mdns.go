package wyoming

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/mdns"
	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// ServiceType is the DNS-SD service type Home Assistant's Wyoming
// integration browses for.
const ServiceType = "_wyoming._tcp"

// AdvertiseConfig configures an Advertiser.
type AdvertiseConfig struct {
	// Instance is the service instance name ("geist-kitchen"); Home
	// Assistant keys the discovered service by it. Dots become dashes.
	Instance string
	Port     int
	// Host is the host name announced for the addresses ("<host>.local.");
	// default: the machine's.
	Host string
	// IPs lists the addresses to announce, asked at each query; default:
	// the IPv4 and global IPv6 addresses of the interfaces that are up
	// (none while the network is down: queries go unanswered).
	IPs func() []net.IP
	// TXT records (key=value), each at most 255 bytes.
	TXT []string
	// Interface to listen and announce on; nil: the system's default
	// multicast interface.
	Interface *net.Interface
	Logger    *slog.Logger
}

// Advertiser answers mDNS queries for the service and announces it
// (RFC 6762 section 8.3: twice, a second apart, when it starts; a
// goodbye with TTL 0 when it stops), so that Home Assistant discovers a
// box that starts after it at once instead of at its next periodic query.
//
// The responder is github.com/hashicorp/mdns (Consul's and Nomad's); it
// only answers queries, so the announcements are sent here with the
// records it serves.
type Advertiser struct {
	cfg  AdvertiseConfig
	log  *slog.Logger
	zone *zone
}

// NewAdvertiser checks cfg and returns an Advertiser; Run starts it.
func NewAdvertiser(cfg AdvertiseConfig) (*Advertiser, error) {
	if cfg.Port <= 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("wyoming: mdns: port %d", cfg.Port)
	}
	cfg.Instance = strings.ReplaceAll(strings.TrimSpace(cfg.Instance), ".", "-")
	if cfg.Instance == "" {
		cfg.Instance = "geist"
	}
	if len(cfg.Instance) > 63 {
		cfg.Instance = cfg.Instance[:63]
	}
	if cfg.Host == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = "geist"
		}
		h, _, _ = strings.Cut(h, ".")
		cfg.Host = h
	}
	cfg.Host = strings.TrimSuffix(strings.TrimSuffix(cfg.Host, "."), ".local") + ".local."
	for _, t := range cfg.TXT {
		if len(t) > 255 {
			return nil, fmt.Errorf("wyoming: mdns: TXT record %.20q… longer than 255 bytes", t)
		}
	}
	if cfg.IPs == nil {
		cfg.IPs = InterfaceIPs
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Advertiser{cfg: cfg, log: cfg.Logger}
	a.zone = &zone{cfg: &a.cfg}
	return a, nil
}

// Name is the advertised service's full name.
func (a *Advertiser) Name() string {
	return a.cfg.Instance + "." + ServiceType + ".local."
}

// Run answers and announces until ctx ends, then says goodbye. While no
// multicast listener can be opened (no network yet at boot), it retries
// every retry interval, saying so once.
func (a *Advertiser) Run(ctx context.Context) {
	const retry = 30 * time.Second
	// The library logs bad packets from the network through the log
	// package: those go to the debug level.
	logger := log.New(io.Discard, "", 0)
	if a.log.Enabled(ctx, slog.LevelDebug) {
		logger = slog.NewLogLogger(a.log.Handler(), slog.LevelDebug)
	}
	var srv *mdns.Server
	for warned := false; ; {
		var err error
		srv, err = mdns.NewServer(&mdns.Config{Zone: a.zone, Iface: a.cfg.Interface, Logger: logger})
		if err == nil {
			break
		}
		if !warned {
			a.log.Warn("wyoming: mDNS responder not started; retrying every 30s", "err", err)
			warned = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
	a.log.Info("wyoming: advertised over mDNS", "name", a.Name(), "port", a.cfg.Port, "addresses", fmt.Sprint(a.cfg.IPs()))
	for i := 0; i < 2 && ctx.Err() == nil; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				continue
			case <-time.After(time.Second):
			}
		}
		if err := a.announce(120); err != nil {
			a.log.Info("wyoming: mDNS announcement not sent; the service is still found by queries", "err", err)
			break
		}
	}
	<-ctx.Done()
	if err := a.announce(0); err != nil {
		a.log.Debug("wyoming: mDNS goodbye not sent", "err", err)
	}
	srv.Shutdown()
}

// announce sends the service's records (PTR, SRV, TXT, addresses) with
// ttl seconds to the mDNS group, from port 5353 as RFC 6762 wants of
// responses (sharing it with the responder's socket and any other).
func (a *Advertiser) announce(ttl uint32) error {
	recs := a.zone.Records(dns.Question{Name: a.zone.serviceAddr(), Qtype: dns.TypePTR, Qclass: dns.ClassINET})
	if len(recs) == 0 {
		return errors.New("no address to announce")
	}
	for _, rr := range recs {
		rr.Header().Ttl = ttl
	}
	msg := &dns.Msg{MsgHdr: dns.MsgHdr{Response: true, Authoritative: true}, Compress: true, Answer: recs}
	b, err := msg.Pack()
	if err != nil {
		return err
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
			if serr == nil {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}
		})
		return errors.Join(err, serr)
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp4", "0.0.0.0:5353")
	if err != nil {
		// Port 5353 held without address reuse: send from any port (RFC
		// 6762 receivers may then ignore it; queries still find us).
		if pc, err = net.ListenPacket("udp4", "0.0.0.0:0"); err != nil {
			return err
		}
	}
	defer pc.Close()
	p := ipv4.NewPacketConn(pc)
	p.SetMulticastTTL(255)
	p.SetMulticastLoopback(true)
	if a.cfg.Interface != nil {
		if err := p.SetMulticastInterface(a.cfg.Interface); err != nil {
			return err
		}
	}
	_, err = pc.WriteTo(b, &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353})
	return err
}

// zone serves the records of the service, with the addresses of the
// moment (refreshed at most every 5 s).
type zone struct {
	cfg *AdvertiseConfig

	mu   sync.Mutex
	svc  *mdns.MDNSService
	when time.Time
}

func (z *zone) serviceAddr() string { return ServiceType + ".local." }

// Records implements mdns.Zone.
func (z *zone) Records(q dns.Question) []dns.RR {
	z.mu.Lock()
	if z.svc == nil || time.Since(z.when) > 5*time.Second {
		z.svc, z.when = nil, time.Now()
		if ips := z.cfg.IPs(); len(ips) > 0 {
			txt := z.cfg.TXT
			if len(txt) == 0 {
				txt = []string{""} // a TXT record holds at least one string (RFC 6763 section 6.1)
			}
			z.svc, _ = mdns.NewMDNSService(z.cfg.Instance, ServiceType, "local.", z.cfg.Host, z.cfg.Port, ips, txt)
		}
	}
	svc := z.svc
	z.mu.Unlock()
	if svc == nil {
		return nil
	}
	return svc.Records(q)
}

// InterfaceIPs returns the addresses to announce: IPv4 and global
// unicast IPv6 addresses of the interfaces that are up and not loopback.
func InterfaceIPs() []net.IP {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil
	}
	var ips []net.IP
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			if ip4 := n.IP.To4(); ip4 != nil {
				if !ip4.IsLinkLocalUnicast() {
					ips = append(ips, ip4)
				}
			} else if n.IP.IsGlobalUnicast() {
				ips = append(ips, n.IP)
			}
		}
	}
	return ips
}
