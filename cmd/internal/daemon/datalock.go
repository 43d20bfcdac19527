package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// serveLockName is the lock file geist serve holds in its data directory
// for its whole life (issue 22): a second serve on the same directory
// fell back to sessions in memory and fought the first over the MQTT
// client id (44 reconnects in 20 s).
const serveLockName = "serve.lock"

// ErrRunning is a data directory whose lock another serve holds.
var ErrRunning = errors.New("geist serve is already running")

// LockDataDir takes DIR/serve.lock (flock, released when the process
// ends however it ends) and writes the process id into it.
func LockDataDir(dir string) (release func(), err error) {
	path := filepath.Join(dir, serveLockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, dataDirError(dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w on the data directory %s%s: stop it first, or start this one with another --data-dir", ErrRunning, dir, lockHolder(path))
		}
		return nil, fmt.Errorf("data directory %s: locking %s: %v", dir, path, err)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { f.Close() }, nil
}

// Running reports a serve holding dir's lock (without taking it).
func Running(dir string) (string, bool) {
	path := filepath.Join(dir, serveLockName)
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return lockHolder(path), errors.Is(err, unix.EWOULDBLOCK)
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return "", false
}

func lockHolder(path string) string {
	b, err := os.ReadFile(path)
	if pid := strings.TrimSpace(string(b)); err == nil && pid != "" && len(pid) < 12 {
		return " (pid " + pid + ")"
	}
	return ""
}

// dataDirError words a data directory geist cannot use: the directory,
// why, and the flag and key that name another.
func dataDirError(dir string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("data directory %s: %v (--data-dir, or data_dir in the config, names another; the service's is /var/lib/geist)", dir, err)
}
