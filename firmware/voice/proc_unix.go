//go:build unix

package voice

import (
	"os/exec"
	"syscall"
)

// ownGroup runs cmd in its own process group, so that signals reach the
// programs it starts too (a wrapper script's children).
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return signalGroup(cmd, syscall.SIGKILL) }
}

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	if cmd.Process == nil {
		return nil
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		return cmd.Process.Signal(sig)
	}
	return nil
}

func interrupt(cmd *exec.Cmd) error { return signalGroup(cmd, syscall.SIGINT) }
