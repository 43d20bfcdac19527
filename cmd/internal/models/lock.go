package models

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// fileLock is an flock(2) on a lock file beside the model. The holder
// removes the file before it lets go, so the store keeps no lock files;
// a waiter that then locks the removed file notices (its inode is no longer
// the path's) and tries again.
type fileLock struct {
	f    *os.File
	path string
}

// tryLock takes the lock at path without waiting; ErrBusy when another
// process (or goroutine) holds it.
func tryLock(path string) (*fileLock, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, ErrBusy
			}
			return nil, &os.PathError{Op: "flock", Path: path, Err: err}
		}
		var held, now unix.Stat_t
		if unix.Fstat(int(f.Fd()), &held) == nil && unix.Stat(path, &now) == nil && held.Ino == now.Ino && held.Dev == now.Dev {
			return &fileLock{f: f, path: path}, nil
		}
		f.Close() // the previous holder removed the file under us
	}
}

// waitLock takes the lock at path, waiting while another pull holds it
// (onWait is called once then) until ctx ends.
func waitLock(ctx context.Context, path string, onWait func()) (*fileLock, error) {
	waited := false
	for {
		l, err := tryLock(path)
		if !errors.Is(err, ErrBusy) {
			return l, err
		}
		if !waited && onWait != nil {
			onWait()
		}
		waited = true
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (l *fileLock) unlock() {
	os.Remove(l.path)
	l.f.Close() // releases the flock
}

// FreeSpace returns the bytes an unprivileged process may still write on
// the file system holding dir.
func FreeSpace(dir string) (int64, error) { return statfsFree(dir) }

// statfsFree returns the bytes an unprivileged process may still write on
// the file system that holds dir.
func statfsFree(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// syncDir makes a rename or removal in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return nil
}
