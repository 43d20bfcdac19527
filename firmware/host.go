package firmware

import (
	"log/slog"
	"sort"

	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpioreg"
	"periph.io/x/conn/v3/pin"
	"periph.io/x/host/v3"
)

// Open initializes the host's GPIO drivers (periph host.Init: the Linux
// GPIO character device on every board, plus the Raspberry Pi drivers on
// arm) and opens the configured pins by line name. When GPIO is missing,
// the error is an *UnavailableError (errors.Is(err, ErrUnavailable)) and
// the returned Device still runs with the pins that were found, so the
// daemon logs the error and carries on. Only an invalid configuration
// returns a nil Device.
func Open(cfg Config, log *slog.Logger) (*Device, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	_, initErr := host.Init()
	lines := len(gpioreg.All())
	d, err := OpenWith(cfg, gpioreg.ByName, lines, log)
	if initErr != nil {
		ue := &UnavailableError{Init: initErr, Board: lines}
		if e, ok := asUnavailable(err); ok {
			ue.Missing = e.Missing
		} else if len(cfg.Buttons) == 0 && cfg.LEDs.pinNames() == [3]string{} {
			// Nothing configured: an init failure is of no consequence.
			return d, nil
		}
		return d, ue
	}
	return d, err
}

// PinInfo describes one GPIO line the board offers.
type PinInfo struct {
	Name     string `json:"name"`               // line name, as configured ("GPIO17")
	Number   int    `json:"number"`             // line offset or pin number
	Function string `json:"function,omitempty"` // current function ("In/High", "Out/Low", …)
	Alias    string `json:"alias,omitempty"`    // for aliases, the pin it stands for
}

// ListPins initializes the host's GPIO drivers and lists the lines that
// can be named in the configuration, sorted by name. On a machine without
// GPIO it returns no pins and an *UnavailableError.
func ListPins() ([]PinInfo, error) {
	_, initErr := host.Init()
	all := gpioreg.All()
	var out []PinInfo
	for _, p := range all {
		info := PinInfo{Name: p.Name(), Number: p.Number()}
		if f, ok := p.(pin.PinFunc); ok { // the drivers' Function (deprecated) is string(Func())
			info.Function = string(f.Func())
		}
		out = append(out, info)
	}
	for _, p := range gpioreg.Aliases() {
		info := PinInfo{Name: p.Name(), Number: p.Number()}
		if r, ok := p.(gpio.RealPin); ok {
			info.Alias = r.Real().Name()
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(all) == 0 {
		return out, &UnavailableError{Init: initErr}
	}
	return out, nil
}
