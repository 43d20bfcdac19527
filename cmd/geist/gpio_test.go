package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/geisten/geist/cmd/internal/cli"
	"github.com/geisten/geist/firmware"
)

// gpioCmd runs cmdGPIO like the dispatcher would (the command is
// registered in main.go's table by the lead).
func gpioCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := cmdGPIO(context.Background(), &cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb}, args)
	return out.String(), errb.String(), err
}

func TestGPIOList(t *testing.T) {
	pins, listErr := firmware.ListPins()
	out, _, err := gpioCmd(t, "list", "--json")
	if len(pins) == 0 {
		// No GPIO here (CI): a clear error, not an empty success.
		if err == nil || !strings.Contains(err.Error(), "GPIO unavailable") {
			t.Fatalf("gpio list without GPIO: err = %v (ListPins: %v)", err, listErr)
		}
		t.Logf("gpio list: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	var got []firmware.PinInfo
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got) != len(pins) {
		t.Fatalf("gpio list --json: %v, %d pins, want %d", err, len(got), len(pins))
	}
	if out, _, err = gpioCmd(t, "list"); err != nil || !strings.HasPrefix(out, "NAME") {
		t.Fatalf("gpio list: %v\n%s", err, out)
	}
}

func TestGPIOUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"watch"}, {"list", "extra"}, {"watch", "--pull", "sideways", "GPIO17"}} {
		_, _, err := gpioCmd(t, args...)
		var ue cli.UsageError
		if err == nil || !errors.As(err, &ue) {
			t.Errorf("gpio %q: err = %v, want a usage error", args, err)
		}
	}
}

func TestGPIOWatchWithoutPins(t *testing.T) {
	if pins, _ := firmware.ListPins(); len(pins) > 0 {
		t.Skip("this machine has GPIO")
	}
	_, _, err := gpioCmd(t, "watch", "GPIO17")
	if err == nil || !strings.Contains(err.Error(), "GPIO unavailable") {
		t.Errorf("gpio watch without GPIO: %v", err)
	}
}
