//go:build !unix

package voice

import (
	"os"
	"os/exec"
)

func ownGroup(*exec.Cmd) {}

func interrupt(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		return cmd.Process.Kill()
	}
	return nil
}
