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
func (f *File) Release(b []byte) { f.advise(b, false, unix.MADV_DONTNEED) }

// AdviseRandom tells the kernel that the pages b (a slice of f's data)
// touches are read in no order: a fault there reads that page, not the
// file around it. For the experts left in the file, so that a fault in
// one expert does not read ahead through its neighbours, which the
// router may never choose. Advice only: it does nothing for a file that
// is not mapped, and errors leave the mapping as it was.
func (f *File) AdviseRandom(b []byte) { f.advise(b, true, unix.MADV_RANDOM) }

// WillNeed asks the kernel to start reading the pages b (a slice of f's
// data) touches into the page cache now, without waiting for them: for
// the experts a layer's router has chosen, so that their page-ins overlap
// each other and the products on the experts already resident. Advice
// only, as AdviseRandom; it allocates nothing.
func (f *File) WillNeed(b []byte) { f.advise(b, true, unix.MADV_WILLNEED) }

// advise gives advice for the pages of f's mapping b touches (out) or
// lies wholly inside (!out).
func (f *File) advise(b []byte, out bool, advice int) {
	if f.unmap == nil || len(b) == 0 || len(f.data) == 0 {
		return
	}
	base := uintptr(unsafe.Pointer(&f.data[0]))
	lo, hi, ok := pageSpan(base, uintptr(len(f.data)), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(os.Getpagesize()), out)
	if !ok {
		return
	}
	_ = unix.Madvise(f.data[lo:hi], advice)
}

// pageSpan returns the offsets [lo, hi) into a mapping of size bytes at
// the page-aligned address base of the pages of size ps that the n bytes
// at start touch (out: rounded outward to whole pages, the end clipped to
// the mapping, whose last page the kernel rounds up itself) or lie wholly
// inside (!out: rounded inward). ok is false when the bytes are not all
// inside the mapping or the span holds no page.
func pageSpan(base, size, start, n, ps uintptr, out bool) (lo, hi uintptr, ok bool) {
	if n == 0 || start < base || start-base > size || n > size-(start-base) {
		return 0, 0, false
	}
	lo, hi = start-base, start-base+n
	if out {
		lo, hi = lo/ps*ps, min((hi+ps-1)/ps*ps, size)
	} else {
		lo, hi = (lo+ps-1)/ps*ps, hi/ps*ps
	}
	return lo, hi, hi > lo
}

// freeAnon unmaps the memory from Anon.
func (f *File) freeAnon() {
	for _, b := range f.anon {
		unix.Munmap(b)
	}
	f.anon = nil
}
