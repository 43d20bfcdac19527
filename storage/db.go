// Package storage keeps geist's persistent state in two bbolt files: a
// durable sessions database (conversations, turns, settings) and a
// disposable prompt cache (KV-state blobs keyed by model identity and token
// prefix, plus per-model drafting statistics).
//
// The package knows nothing of the engine: blobs and model identities are
// opaque bytes, token ids are plain int32s. Both types are safe for
// concurrent use by several goroutines. Byte slices returned by any method
// are copies and stay valid after the call.
//
// The two files fail differently on purpose. A damaged sessions database is
// an error the user must see (ErrCorrupt); a damaged prompt cache is a cache
// miss and a log line, and a cache file that cannot be trusted is moved aside
// and recreated.
package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// DefaultTimeout is how long Open waits for another process to release a
// database file before giving up with ErrLocked.
const DefaultTimeout = 2 * time.Second

var (
	// ErrLocked reports that another process holds the database file.
	ErrLocked = errors.New("storage: database locked by another geist process")
	// ErrCorrupt reports a sessions database whose structure is damaged.
	ErrCorrupt = errors.New("storage: database corrupt")
	// ErrReadOnly reports a database on a read-only file system.
	ErrReadOnly = errors.New("storage: read-only file system")
	// ErrClosed reports use of a closed database.
	ErrClosed = errors.New("storage: database closed")
	// ErrNotFound reports a missing conversation.
	ErrNotFound = errors.New("storage: conversation not found")
	// ErrExists reports creating a conversation whose id is taken.
	ErrExists = errors.New("storage: conversation already exists")
	// ErrSchemaTooNew reports a sessions database written by a newer geist.
	ErrSchemaTooNew = errors.New("storage: sessions database schema is newer than this geist")
	// ErrTooLarge reports a blob that cannot fit in the cache budget.
	ErrTooLarge = errors.New("storage: blob larger than the cache budget")
)

// discardLogger is used when the caller injects none.
var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// openBolt opens path with a lock timeout, turning bbolt's timeout into
// ErrLocked. A panic inside bbolt (it panics on some damaged files) or a
// memory fault on a truncated file comes back as an error wrapping
// errDamaged.
func openBolt(path string, timeout time.Duration, freelist bolt.FreelistType, readOnly bool) (db *bolt.DB, err error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if !readOnly {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("storage: %w", err)
		}
	}
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, os.ErrNotExist) && !readOnly
	panicked := false
	defer func() {
		// Runs last, when bbolt's frames are gone (not in the recovering
		// call, which runs on top of them).
		if panicked {
			awaitRelease(path)
		}
		// Name truncation, the commonest damage, rather than its symptom.
		// (Only now: before bbolt holds the lock, another process may be
		// writing the file.)
		if errors.Is(err, errDamaged) {
			if lerr := checkLength(path); lerr != nil {
				err = lerr
			}
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%w: open %s: %s", errDamaged, path, describePanic(r))
			panicked = true
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, FreelistType: freelist, ReadOnly: readOnly})
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("%w (%s, waited %v)", ErrLocked, path, timeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch):
		return nil, fmt.Errorf("%w: open %s: %v", errDamaged, path, err)
	case errors.Is(err, os.ErrPermission), errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("storage: %w", err)
	case errors.Is(err, syscall.EROFS):
		// Not damage: the file may well be sound (issue 22).
		return nil, fmt.Errorf("%w: open %s: %v", ErrReadOnly, path, err)
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		// Not damage either: a file that exists opened without writing;
		// one this call created is half written and goes, so that it is
		// initialised afresh once there is room (it was moved aside as
		// damaged, and the disk reported as a damaged database).
		if created {
			os.Remove(path)
		}
		return nil, fmt.Errorf("%w: open %s: %v", ErrDiskFull, path, err)
	default:
		// bbolt reports other structural problems (file size too small,
		// unreadable freelist) as plain errors.
		return nil, fmt.Errorf("%w: open %s: %v", errDamaged, path, err)
	}
}

// awaitRelease waits (up to DefaultTimeout) until the file lock that a
// bbolt.Open which panicked left behind is gone. The panic unwound past
// bbolt's own cleanup: its memory map of the file stays, and its
// descriptor, unreachable, is closed by its finalizer once the collector
// finds it. The map keeps the open file (and with it the lock) alive in
// the kernel even then, so it is unmapped first (found by the file's
// inode in /proc/self/maps: nothing reachable points into it). Without
// this the process could not salvage the file it just found damaged.
func awaitRelease(path string) {
	unmapLeaked(path)
	for deadline := time.Now().Add(DefaultTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		runtime.GC()
		f, err := os.Open(path)
		if err != nil {
			return
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		f.Close() // releases the lock just taken
		if err == nil {
			return
		}
	}
}

// unmapLeaked unmaps this process's memory maps of the file at path.
func unmapLeaked(path string) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return
	}
	st, err := os.Stat(abs)
	if err != nil {
		return
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return // not Linux
	}
	// start-end perms offset dev inode path
	for _, line := range strings.Split(string(maps), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[5] != abs || f[4] != strconv.FormatUint(sys.Ino, 10) {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			continue
		}
		syscall.Syscall(syscall.SYS_MUNMAP, uintptr(start), uintptr(end-start), 0)
	}
}

// checkLength reads bbolt's two meta pages and reports a file shorter than
// the data its newest valid meta page describes (bbolt would fault or panic
// on it). Layout (bbolt's on-disk format, native byte order): a 16-byte page
// header, then magic, version, page size, flags (u32 each), the root bucket
// (16 bytes), the freelist page id, the high-water page id and the
// transaction id (u64 each), and an FNV-64a checksum of the meta fields.
func checkLength(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return nil // bbolt initialises an empty file
	}
	var (
		best   uint64
		end    int64
		anyOK  bool
		header [80]byte
	)
	for i := range 2 {
		var pageSize int64 = 4096
		if i == 1 {
			// The second meta page sits one page after the first; read the
			// first's page size to find it.
			if _, err := f.ReadAt(header[:], 0); err != nil {
				break
			}
			pageSize = int64(binary.NativeEndian.Uint32(header[24:]))
			if pageSize < 512 || pageSize > 1<<16 {
				break
			}
		}
		if _, err := f.ReadAt(header[:], int64(i)*pageSize); err != nil {
			continue
		}
		if binary.NativeEndian.Uint32(header[16:]) != 0xED0CDAED {
			continue
		}
		sum := fnv.New64a()
		sum.Write(header[16:72])
		if sum.Sum64() != binary.NativeEndian.Uint64(header[72:]) {
			continue // bbolt falls back to the other meta page
		}
		ps := int64(binary.NativeEndian.Uint32(header[24:]))
		hw := int64(binary.NativeEndian.Uint64(header[56:]))
		txid := binary.NativeEndian.Uint64(header[64:])
		if !anyOK || txid > best {
			best, end, anyOK = txid, hw*ps, true
		}
	}
	if anyOK && end > st.Size() {
		return fmt.Errorf("%w: %s: file truncated: %d bytes, data ends at %d", errDamaged, path, st.Size(), end)
	}
	return nil
}

// errDamaged marks an error caused by a damaged file (as opposed to a
// locked one or a full disk).
var errDamaged = errors.New("storage: damaged database file")

// guarded runs fn with memory faults turned into panics and every panic
// turned into an error wrapping errDamaged. bbolt panics on some forms of
// corruption, and a file truncated under its memory map faults.
func guarded(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s", errDamaged, describePanic(r))
		}
	}()
	return fn()
}

// describePanic names what a recovered panic most likely means.
func describePanic(r any) string {
	if e, ok := r.(runtime.Error); ok && strings.Contains(e.Error(), "invalid memory address") {
		return fmt.Sprintf("memory fault reading the mapped file (truncated or unreadable): %v", e)
	}
	return fmt.Sprintf("bbolt panicked: %v", r)
}

// verify checks a freshly opened file: its data must lie inside the file
// (a truncated file would fault later), every bucket and key must be
// readable (walked in this goroutine, so a panic is recovered), and bbolt's
// own consistency check must pass.
func verify(db *bolt.DB) error {
	st, err := os.Stat(db.Path())
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if err := guarded(func() error { return checkMapped(db.Path()) }); err != nil {
		return err
	}
	return guarded(func() error {
		return db.View(func(tx *bolt.Tx) error {
			if tx.Size() > st.Size() {
				return fmt.Errorf("%w: file truncated: %d bytes, data ends at %d", errDamaged, st.Size(), tx.Size())
			}
			if err := tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return walk(b, 0) }); err != nil {
				return err
			}
			var first error
			for err := range tx.Check() { // drain: Check's goroutine must finish
				if first == nil {
					first = fmt.Errorf("%w: %v", errDamaged, err)
				}
			}
			return first
		})
	})
}

// checkMapped maps the file at path read-only and checks its page
// structure (checkStructure) in this goroutine, where a memory fault is a
// recoverable panic.
func checkMapped(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	if st.Size() == 0 {
		return nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("storage: map %s: %w", path, err)
	}
	defer syscall.Munmap(b)
	return checkStructure(b)
}

// walk reads every key of b and its sub-buckets; values are not touched
// beyond their slice headers.
func walk(b *bolt.Bucket, depth int) error {
	if depth > 8 {
		return fmt.Errorf("%w: buckets nested too deep", errDamaged)
	}
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if sub := b.Bucket(k); sub != nil {
				return walk(sub, depth+1)
			}
		}
		return nil
	})
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
