package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/cmd/internal/wyoming"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/engine/appliance/sentence"
)

// wyomingFront is the Wyoming conversation service of geist serve and
// its mDNS advertisement.
type wyomingFront struct {
	srv *wyoming.Server
	ln  net.Listener
	adv *wyoming.Advertiser // nil: not advertised
	log *slog.Logger
}

// startWyoming listens on [wyoming] addr; nil when it is empty.
func startWyoming(c *Config, core *appliance.Core, log *slog.Logger) (*wyomingFront, error) {
	w := c.Wyoming
	if w.Addr == "" {
		return nil, nil
	}
	lim := c.Limits.MaxPayload
	model := ModelName(c.Model)
	if w.Model != "" {
		model = w.Model
	}
	srv, err := wyoming.New(wyoming.Config{
		Model: model, AnswerModel: w.Model, Version: cli.VersionString(), Languages: w.Languages,
		Description: "geist on " + c.Device + ": " + model + ", offline",
		Limits:      wyoming.Limits{MaxLine: lim, MaxData: lim, MaxPayload: lim},
		Logger:      log.With("component", "wyoming"),
	}, core)
	if err != nil {
		return nil, err
	}
	var ln net.Listener
	if c.early != nil {
		ln = take(&c.early.wyoming)
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", w.Addr); err != nil {
			return nil, fmt.Errorf("wyoming: %w", listenErr(err))
		}
	}
	f := &wyomingFront{srv: srv, ln: ln, log: log}
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok { // a "tcp" listener's address is a TCPAddr
		ln.Close()
		return nil, fmt.Errorf("wyoming: listening on %s, not a TCP address", ln.Addr())
	}
	log.Info("Wyoming conversation service listening", "addr", addr.String())
	if !w.MDNS {
		return f, nil
	}
	if addr.IP.IsLoopback() {
		log.Info("Wyoming service on a loopback address: not announced over mDNS")
		return f, nil
	}
	ips := wyoming.InterfaceIPs
	if !addr.IP.IsUnspecified() {
		ips = func() []net.IP { return []net.IP{addr.IP} }
	}
	f.adv, err = wyoming.NewAdvertiser(wyoming.AdvertiseConfig{
		Instance: "geist-" + c.Device, Port: addr.Port, IPs: ips,
		TXT:    []string{"version=" + cli.VersionString(), "model=" + sentence.Cut(model, 200)},
		Logger: log.With("component", "mdns"),
	})
	if err != nil {
		ln.Close()
		return nil, err
	}
	return f, nil
}

// run serves until drain ends (after the core stopped, so that the last
// answers go out) and advertises until stop ends (the goodbye goes out at
// once on shutdown).
func (f *wyomingFront) run(stop, drain context.Context, wg *sync.WaitGroup) {
	wg.Go(func() {
		if err := f.srv.Serve(drain, f.ln); err != nil {
			f.log.Error(err.Error())
		}
	})
	if f.adv != nil {
		wg.Go(func() { f.adv.Run(stop) })
	}
}

func (f *wyomingFront) wait() {}

// close closes the listener (if serve returns before serving).
func (f *wyomingFront) close() { f.ln.Close() }
