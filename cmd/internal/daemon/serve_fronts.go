package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/geisten/geist/engine"
	"github.com/geisten/geist/engine/appliance"
	"github.com/geisten/geist/firmware"
	"github.com/geisten/geist/mqtt"
)

// A frontEnd is one front end of geist serve, started (listening,
// connected, opened) by its starter before anything serves, so that a
// taken port or a bad configuration fails at once.
type frontEnd interface {
	// run starts its goroutines on wg. stop ends when serve is asked to
	// stop; drain ends once the core has stopped, for the front ends that
	// still deliver its last answers.
	run(stop, drain context.Context, wg *sync.WaitGroup)
	// wait waits for what outlives run's goroutines (speech, asks in
	// flight); serve calls it after they all returned.
	wait()
	// close releases what the front end holds; serve calls it when it
	// returns, whether the front end ran or not.
	close()
}

// frontEnds are the started front ends, in the order they started.
type frontEnds []frontEnd

func (fs frontEnds) wait() {
	for _, f := range fs {
		f.wait()
	}
}

// close closes them in the reverse order, as defers would.
func (fs frontEnds) close() {
	for _, f := range slices.Backward(fs) {
		f.close()
	}
}

// startFronts starts every configured front end on core: Wyoming, the
// HTTP API, the device (buttons, LEDs, speech, push-to-talk), MQTT and
// the Hermes bridge. On an error it returns those started so far, to be
// closed.
func startFronts(c *Config, core *appliance.Core, ms serveModels, load time.Duration, hooks Hooks, log *slog.Logger) (frontEnds, error) {
	var fronts frontEnds
	wy, err := startWyoming(c, core, log)
	if err != nil {
		return fronts, err
	}
	if wy != nil {
		fronts = append(fronts, wy)
	}
	web, err := startHTTP(c, core, ms, load, hooks.MountHTTP, log)
	if err != nil {
		return fronts, err
	}
	if web != nil {
		fronts = append(fronts, web)
	}
	var mq *mqttFront // the device's presses go out over MQTT once it is there
	dev, err := startDevice(c, core, hooks.OpenGPIO, func(button string, kind firmware.Press) { mq.publishPress(button, kind) }, log)
	if err != nil {
		return fronts, err
	}
	fronts = append(fronts, dev)
	if mq, err = startMQTT(c, ms.reporting(core), mqttButtons(c.GPIO, dev.dev), dev.stopOutputs, wy != nil || web != nil, log); err != nil {
		return fronts, err
	}
	fronts = append(fronts, mq)
	hm, err := startHermes(c, core, mq.broker, dev, log)
	if err != nil {
		return fronts, err
	}
	if hm != nil {
		fronts = append(fronts, hm)
	}
	dev.warn(c, log)
	return fronts, nil
}

// reporting is what reports on every model (MQTT's state, the status
// page): the pool's group of cores, or core alone without a pool.
func (ms serveModels) reporting(core *appliance.Core) *appliance.Group {
	if ms.pool != nil && ms.pool.group != nil {
		return ms.pool.group
	}
	return appliance.NewGroup(core)
}

// serveModels are the models serve answers with: the first (its engine as
// loaded at the start, which describes it, and its keep_alive) and the
// pool of the other stored ones.
type serveModels struct {
	first  *engine.Engine
	unload *firstModel
	pool   *modelPool
}

// earlyListeners are what serve binds before it loads the model (the
// HTTP and Wyoming listeners, the embedded broker), so that a taken port
// fails at once, not after a load of seconds; the front ends take them
// over when they start.
type earlyListeners struct {
	http, wyoming net.Listener
	emb           *mqtt.Embedded
}

// bindEarly binds the configuration's listeners.
func bindEarly(c *Config, log *slog.Logger) (*earlyListeners, error) {
	l := &earlyListeners{}
	var err error
	if c.HTTP.Addr != "" {
		if l.http, err = net.Listen("tcp", c.HTTP.Addr); err != nil {
			return nil, fmt.Errorf("http: %w (--http ADDR or [http] addr; \"\" turns the HTTP API off)", listenErr(err))
		}
	}
	if c.Wyoming.Addr != "" {
		if l.wyoming, err = net.Listen("tcp", c.Wyoming.Addr); err != nil {
			l.close()
			return nil, fmt.Errorf("wyoming: %w (--wyoming ADDR or [wyoming] addr; \"\" turns Wyoming off)", listenErr(err))
		}
	}
	if c.MQTT.Embedded {
		if l.emb, err = mqtt.StartEmbedded(c.MQTT.EmbeddedAddr, c.MQTT.Username, c.MQTT.Password, log); err != nil {
			l.close()
			return nil, err
		}
		log.Info("embedded MQTT broker listening", "addr", l.emb.Addr())
	}
	return l, nil
}

// listenErr says "address in use" in words.
func listenErr(err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w (is another geist serve or Ollama running?)", err)
	}
	return err
}

// take hands a listener over (nil afterwards: the taker closes it).
func take[T any](p *T) T {
	v := *p
	var zero T
	*p = zero
	return v
}

// close closes what no front end took.
func (l *earlyListeners) close() {
	if l == nil {
		return
	}
	if l.http != nil {
		l.http.Close()
	}
	if l.wyoming != nil {
		l.wyoming.Close()
	}
	if l.emb != nil {
		l.emb.Close()
	}
}
