package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/firmware"
)

const gpioUsage = "gpio list [--json] | gpio watch [--pull up|down|none] PIN..."

// cmdGPIO shows the GPIO lines the board offers (gpio list) and prints the
// presses seen on pins (gpio watch), to find the line names for the
// configuration and to check the wiring.
func cmdGPIO(ctx context.Context, e *cli.Env, args []string) error {
	if len(args) == 0 {
		return cli.Usagef("usage: geist %s", gpioUsage)
	}
	switch args[0] {
	case "list":
		return gpioList(e, args[1:])
	case "watch":
		return gpioWatch(ctx, e, args[1:])
	case "-h", "--help", "help":
		fmt.Fprintf(e.Stdout, "usage: geist %s\n", gpioUsage)
		fmt.Fprint(e.Stdout, `  list               the board's GPIO lines (the names [gpio] takes)
      --json         print JSON
  watch PIN...       print each press, long press and double press on the pins
      --pull string  pull resistor: up (button to ground), down (button to 3.3 V) or none (default "up")
geist gpio list --help and geist gpio watch --help describe each.
`)
		return nil
	}
	return cli.Usagef("unknown gpio command %q (want list or watch)", args[0])
}

func gpioList(e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "gpio list", "gpio list [--json]")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return cli.Usagef("gpio list takes no arguments")
	}
	pins, err := firmware.ListPins()
	if err != nil && len(pins) == 0 {
		return err
	}
	if *asJSON {
		if pins == nil {
			pins = []firmware.PinInfo{}
		}
		b, _ := json.MarshalIndent(pins, "", "  ")
		fmt.Fprintf(e.Stdout, "%s\n", b)
		return nil
	}
	tw := tabwriter.NewWriter(e.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tNUMBER\tFUNCTION")
	for _, p := range pins {
		fn := p.Function
		if p.Alias != "" {
			fn = "alias of " + p.Alias
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", p.Name, p.Number, fn)
	}
	return tw.Flush()
}

// printActions prints every press; watch configures no actions.
type printActions struct{ e *cli.Env }

func (p printActions) Ask(context.Context, string, string)     {}
func (p printActions) Cancel(context.Context)                  {}
func (p printActions) NewConversation(context.Context, string) {}
func (p printActions) Event(_ context.Context, b string, k firmware.Press) {
	fmt.Fprintf(p.e.Stdout, "%s %s\n", b, k)
}

func gpioWatch(ctx context.Context, e *cli.Env, args []string) error {
	fs := cli.NewFlags(e, "gpio watch", "gpio watch [--pull up|down|none] PIN...")
	pull := fs.String("pull", firmware.PullUp, "pull resistor: up (button to ground), down (button to 3.3 V) or none")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return cli.Usagef("gpio watch needs at least one PIN (see 'geist gpio list')")
	}
	var cfg firmware.Config
	for _, pin := range fs.Args() {
		cfg.Buttons = append(cfg.Buttons, firmware.Button{
			Name: pin, Pin: pin, Pull: *pull,
			DoublePress: &firmware.Action{Do: firmware.ActionEvent},
		})
	}
	if err := cfg.Validate(); err != nil {
		return cli.UsageError{Err: err}
	}
	dev, err := firmware.Open(cfg, slog.New(slog.NewTextHandler(e.Stderr, nil)))
	if err != nil {
		if errors.Is(err, firmware.ErrUnavailable) && dev != nil && len(dev.Buttons()) > 0 {
			fmt.Fprintf(e.Stderr, "geist gpio watch: %s\n", cli.OneLine(err.Error()))
		} else {
			return err
		}
	}
	fmt.Fprintf(e.Stderr, "watching %s (press, long_press, double_press); Ctrl-C stops\n", strings.Join(dev.Buttons(), ", "))
	return dev.Run(ctx, printActions{e}, nil)
}
