package model

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// newKV allocates n zeroed elements of KV cache. (Not in transparent
// huge pages: on the VMs here MADV_HUGEPAGE made a fresh process's first
// answer 4x slower, 1.3-1.8 s against 0.2-0.4 s, the kernel zeroing and
// compacting 2 MiB pages the answer never reads.)
func newKV[E uint16 | byte](n int) []E { return make([]E, n) }

// populate maps the pages of b before they are written: one system call
// instead of a fault per 4 KiB page. A restore from the prompt cache
// writes tens of megabytes of fresh KV cache at once, and the faults cost
// far more than the copy (on a VM here 2.4 s for 44 MB touched page by
// page against 11 ms populated).
func populate[E uint16 | byte](b []E) { advise(b, unix.MADV_POPULATE_WRITE) }

// advise gives the kernel advice on the whole pages inside b; errors (an
// older kernel, huge pages off) leave the memory as it was.
func advise[E uint16 | byte](b []E, advice int) {
	if len(b) == 0 {
		return
	}
	size := len(b) * int(unsafe.Sizeof(b[0]))
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), size)
	const ps = 4096
	start := uintptr(unsafe.Pointer(&raw[0]))
	lo := int((start+ps-1)/ps*ps - start)
	hi := int((start+uintptr(size))/ps*ps - start)
	if hi-lo < ps {
		return
	}
	_ = unix.Madvise(raw[lo:hi], advice)
}
