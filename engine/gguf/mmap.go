package gguf

import (
	"os"

	"golang.org/x/sys/unix"
)

// mmapFile maps size bytes of fd read-only. The mapping outlives fd.
func mmapFile(fd *os.File, size int64) ([]byte, func() error, error) {
	b, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return unix.Munmap(b) }, nil
}
