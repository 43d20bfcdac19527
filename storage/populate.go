package storage

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// populate maps the cache file's pages under b (a value read in place)
// with one system call instead of a fault per page: a restore reads tens
// of megabytes of a file the process has just mapped.
func populate(b []byte) {
	const ps = 4096
	if len(b) < ps {
		return
	}
	start := uintptr(unsafe.Pointer(&b[0]))
	lo := start / ps * ps
	hi := (start + uintptr(len(b)) + ps - 1) / ps * ps
	// The whole pages around b lie inside the mapping: bbolt maps whole
	// pages of the file. (The raw call: the rounded range is not a Go
	// slice.)
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_POPULATE_READ)
}
