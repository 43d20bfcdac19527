package gguf

import (
	"fmt"
	"os"
	"unsafe"

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

// Anon returns size bytes of zeroed anonymous memory that stays mapped
// until f is closed: for weights repacked from the file. With huge the
// kernel is asked to back it with transparent huge pages (MADV_HUGEPAGE;
// the memory is aligned to 2 MiB for that), which cuts the page walks of
// reading a gigabyte of weights per token.
func (f *File) Anon(size int, huge bool) ([]byte, error) {
	if size <= 0 {
		return nil, nil
	}
	const hp = 2 << 20
	n := size
	if huge {
		n = (size+hp-1)/hp*hp + hp
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("gguf: mapping %d bytes of memory: %w", n, err)
	}
	f.anon = append(f.anon, b)
	if !huge {
		return b[:size:size], nil
	}
	off := 0
	if a := int(uintptr(unsafe.Pointer(&b[0])) % hp); a != 0 {
		off = hp - a
	}
	// Advice only: where transparent huge pages are off, the memory works
	// the same in small pages.
	_ = unix.Madvise(b[off:off+(size+hp-1)/hp*hp], unix.MADV_HUGEPAGE)
	return b[off : off+size : off+size], nil
}

// Release tells the kernel that the mapped file pages wholly inside b (a
// slice of f's data) are not needed for now: they leave the process's
// resident memory (the page cache keeps them, and reading b again maps
// them back). It does nothing for a file that is not mapped.
func (f *File) Release(b []byte) {
	if f.unmap == nil || len(b) == 0 {
		return
	}
	ps := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(&b[0]))
	lo := (start + ps - 1) / ps * ps
	hi := (start + uintptr(len(b))) / ps * ps
	if hi <= lo {
		return
	}
	_ = unix.Madvise(b[lo-start:hi-start], unix.MADV_DONTNEED)
}

// freeAnon unmaps the memory from Anon.
func (f *File) freeAnon() {
	for _, b := range f.anon {
		unix.Munmap(b)
	}
	f.anon = nil
}
