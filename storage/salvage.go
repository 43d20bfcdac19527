package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrNoDatabase reports a sessions database that does not exist where a
// command only reads one.
var ErrNoDatabase = errors.New("storage: no sessions database")

// CheckSessions examines the sessions database at path without changing
// it: nil when it is sound, an error wrapping ErrCorrupt that says what is
// damaged, ErrNoDatabase when there is no file, ErrLocked when a running
// geist holds it.
func CheckSessions(path string) error {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w at %s", ErrNoDatabase, path)
	}
	s, err := OpenSessions(path, &Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer s.Close()
	// Every record must decode, not just every page be reachable.
	return s.view(func(tx *bolt.Tx) error {
		convs := tx.Bucket(bktConvs)
		if convs == nil || tx.Bucket(bktSettings) == nil {
			return fmt.Errorf("%w: buckets missing", errDamaged)
		}
		return convs.ForEachBucket(func(k []byte) error {
			b := convs.Bucket(k)
			if _, err := readConvInfo(b, string(k)); err != nil {
				return err
			}
			tb := b.Bucket(bktTurns)
			if tb == nil {
				return fmt.Errorf("%w: conversation %q has no turns bucket", errDamaged, k)
			}
			return tb.ForEach(func(tk, tv []byte) error {
				if _, err := decodeTurn(tk, tv); err != nil {
					return fmt.Errorf("%w: conversation %q turn %x: %v", errDamaged, k, tk, err)
				}
				return nil
			})
		})
	})
}

// SalvageReport says what SalvageSessions kept.
type SalvageReport struct {
	// Aside is the damaged file, copied aside before anything was written.
	Aside string
	// Conversations, Turns and Settings count what the new file holds.
	Conversations, Turns, Settings int
	// Problems lists what could not be read (pages, records), at most
	// maxProblems of them.
	Problems []string
}

const maxProblems = 50

// SalvageSessions copies the sessions database at path aside (to
// path.damaged-<UTC time>) and replaces it with a new file holding every
// conversation, turn and setting that can still be read from it. It reads
// the copy with its own page walker, which checks every page and record it
// follows and skips what fails, rather than with bbolt, which panics or
// faults on some damage: first down the tree from the newest valid meta
// page, then, for conversations that the damage cut off from the tree,
// every page of the file that is not on the free list. The file must not be
// open elsewhere (a running geist holds it: ErrLocked).
func SalvageSessions(path string, opts *Options) (SalvageReport, error) {
	var rep SalvageReport
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return rep, fmt.Errorf("%w at %s", ErrNoDatabase, path)
	}
	// Take bbolt's lock (an exclusive flock on the file, as a writer
	// does; no parsing, so no fault), so that a running geist is not
	// salvaged under its feet.
	lock, err := os.Open(path)
	if err != nil {
		return rep, fmt.Errorf("storage: %w", err)
	}
	defer lock.Close()
	for deadline := time.Now().Add(DefaultTimeout); ; {
		err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return rep, fmt.Errorf("%w (%s): %v", ErrLocked, path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rep.Aside = fmt.Sprintf("%s.damaged-%s", path, time.Now().UTC().Format("20060102T150405Z"))
	if err := copyFile(path, rep.Aside); err != nil {
		return rep, fmt.Errorf("storage: copy the damaged file aside: %w", err)
	}
	raw, err := os.ReadFile(rep.Aside)
	if err != nil {
		return rep, fmt.Errorf("storage: %w", err)
	}
	found := readAll(raw, &rep)
	tmp := path + ".salvage"
	_ = os.Remove(tmp)
	if err := writeSalvaged(tmp, found, opts, &rep); err != nil {
		_ = os.Remove(tmp)
		return rep, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return rep, fmt.Errorf("storage: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return rep, fmt.Errorf("storage: %w", err)
	}
	return rep, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dst))
}

// salvaged is what the walker recovered.
type salvaged struct {
	convs    map[string]*salvConv
	settings map[string][]byte
}

type salvConv struct {
	info     []byte
	turns    map[uint64][]byte
	sequence uint64
}

// pager reads bbolt's on-disk format (native byte order; the layout of
// bbolt's internal/common: a 16-byte page header of id u64, flags u16,
// count u16, overflow u32; 16-byte branch elements pos, ksize u32, pgid
// u64; 16-byte leaf elements flags, pos, ksize, vsize u32, positions
// relative to the element; a bucket value starts with root pgid and
// sequence u64, and holds an inline page after them when root is 0).
type pager struct {
	b        []byte
	pageSize int
	free     map[uint64]bool
	seen     map[uint64]bool
	rep      *SalvageReport
	// leaf is the page of the element being visited; visit, when set, is
	// called with each page the walk enters (tests map pages to owners).
	leaf  uint64
	visit func(id uint64)
}

const (
	pageBranch   = 0x01
	pageLeaf     = 0x02
	pageMeta     = 0x04
	pageFreelist = 0x10
	leafBucket   = 0x01
	boltMagic    = 0xED0CDAED
)

var ne = binary.NativeEndian

func (p *pager) problem(format string, args ...any) {
	if len(p.rep.Problems) < maxProblems {
		p.rep.Problems = append(p.rep.Problems, fmt.Sprintf(format, args...))
	}
}

// page returns the bytes of page id (with its overflow) when its header
// is sound, else nil.
func (p *pager) page(id uint64) []byte {
	n := uint64(len(p.b) / p.pageSize)
	if id < 2 || id >= n {
		p.problem("page %d is outside the file (%d pages)", id, n)
		return nil
	}
	off := id * uint64(p.pageSize)
	h := p.b[off:]
	if ne.Uint64(h) != id {
		p.problem("page %d: header names page %d", id, ne.Uint64(h))
		return nil
	}
	span := (uint64(ne.Uint32(h[12:])) + 1) * uint64(p.pageSize)
	if off+span > uint64(len(p.b)) {
		p.problem("page %d: overflow runs past the end of the file", id)
		return nil
	}
	return h[:span]
}

// elements calls fn for each element of the branch or leaf page pg
// (its bytes), checking every offset; it reports whether the page was
// sound.
func (p *pager) elements(pg []byte, what string, fn func(flags uint32, key, val []byte, child uint64)) bool {
	if len(pg) < 16 {
		p.problem("%s: short page", what)
		return false
	}
	flags, count := ne.Uint16(pg[8:]), int(ne.Uint16(pg[10:]))
	if flags != pageBranch && flags != pageLeaf || 16+16*count > len(pg) {
		p.problem("%s: not a branch or leaf page (flags %#x, %d elements)", what, flags, count)
		return false
	}
	type el struct {
		flags    uint32
		key, val []byte
		child    uint64
	}
	els := make([]el, 0, count)
	for i := range count {
		at := 16 + 16*i
		e := pg[at:]
		pos := uint64(ne.Uint32(e[4:]))
		if flags == pageBranch {
			pos = uint64(ne.Uint32(e))
		}
		ksize := uint64(ne.Uint32(e[8:]))
		if flags == pageBranch {
			ksize = uint64(ne.Uint32(e[4:]))
		}
		vsize := uint64(0)
		if flags == pageLeaf {
			vsize = uint64(ne.Uint32(e[12:]))
		}
		start := uint64(at) + pos
		if start+ksize+vsize > uint64(len(pg)) || ksize > maxKeySize {
			p.problem("%s: element %d runs past its page", what, i)
			return false
		}
		x := el{key: pg[start : start+ksize]}
		if flags == pageBranch {
			x.child = ne.Uint64(e[8:])
		} else {
			x.flags = ne.Uint32(e)
			x.val = pg[start+ksize : start+ksize+vsize]
		}
		els = append(els, x)
	}
	for _, x := range els {
		fn(x.flags, x.key, x.val, x.child)
	}
	return true
}

const maxKeySize = 32768

// bucket visits the key/values of the bucket whose value is hdr (root
// pgid, sequence, inline page): fn gets each leaf element; it returns the
// bucket's sequence.
func (p *pager) bucket(hdr []byte, what string, depth int, fn func(flags uint32, key, val []byte)) uint64 {
	if len(hdr) < 16 {
		p.problem("%s: short bucket header", what)
		return 0
	}
	root, seq := ne.Uint64(hdr), ne.Uint64(hdr[8:])
	if root == 0 {
		p.elements(hdr[16:], what+" (inline)", func(flags uint32, key, val []byte, _ uint64) { fn(flags, key, val) })
		return seq
	}
	p.tree(root, what, depth, fn)
	return seq
}

func (p *pager) tree(id uint64, what string, depth int, fn func(flags uint32, key, val []byte)) {
	if depth > 64 || p.seen[id] {
		p.problem("%s: page %d is reached twice or too deep", what, id)
		return
	}
	p.seen[id] = true
	if p.visit != nil {
		p.visit(id)
	}
	pg := p.page(id)
	if pg == nil {
		return
	}
	where := fmt.Sprintf("%s page %d", what, id)
	if ne.Uint16(pg[8:]) == pageBranch {
		var kids []uint64
		p.elements(pg, where, func(_ uint32, _, _ []byte, child uint64) { kids = append(kids, child) })
		for _, k := range kids {
			p.tree(k, what, depth+1, fn)
		}
		return
	}
	p.elements(pg, where, func(flags uint32, key, val []byte, _ uint64) {
		p.leaf = id
		fn(flags, key, val)
	})
}

// meta returns the root bucket header and page size of the newest meta
// page whose checksum holds.
func metaOf(b []byte) (root []byte, pageSize int, freelist uint64, ok bool) {
	var best uint64
	for i := range 2 {
		ps := 4096
		if i == 1 {
			if len(b) < 80 {
				break
			}
			ps = int(ne.Uint32(b[24:]))
			if ps < 512 || ps > 1<<16 {
				ps = 4096
			}
		}
		off := i * ps
		if off+80 > len(b) {
			continue
		}
		m := b[off:]
		if ne.Uint32(m[16:]) != boltMagic {
			continue
		}
		h := fnv.New64a()
		h.Write(m[16:72])
		if h.Sum64() != ne.Uint64(m[72:]) {
			continue
		}
		txid := ne.Uint64(m[64:])
		if !ok || txid > best {
			best, ok = txid, true
			root, pageSize, freelist = m[32:48], int(ne.Uint32(m[24:])), ne.Uint64(m[48:])
		}
	}
	return root, pageSize, freelist, ok
}

// readAll recovers what it can from the bytes of a damaged file.
func readAll(b []byte, rep *SalvageReport) *salvaged {
	out := &salvaged{convs: map[string]*salvConv{}, settings: map[string][]byte{}}
	defer func() {
		if r := recover(); r != nil { // a bug in the walker must not lose the salvage
			rep.Problems = append(rep.Problems, fmt.Sprintf("walker stopped: %v", r))
		}
	}()
	root, ps, freeID, ok := metaOf(b)
	p := &pager{b: b, pageSize: ps, free: map[uint64]bool{}, seen: map[uint64]bool{}, rep: rep}
	if !ok {
		p.pageSize = 4096
		p.problem("no valid meta page: scanning every page")
	} else {
		if fl := p.page(freeID); fl != nil && ne.Uint16(fl[8:]) == pageFreelist {
			n, ids := int(ne.Uint16(fl[10:])), fl[16:]
			if n == 0xFFFF && len(ids) >= 8 {
				n, ids = int(ne.Uint64(ids)), ids[8:]
			}
			for i := 0; i < n && 8*i+8 <= len(ids); i++ {
				p.free[ne.Uint64(ids[8*i:])] = true
			}
		}
		// The tree: meta, conversations, settings.
		p.bucket(root, "root", 0, func(flags uint32, key, val []byte) {
			if flags&leafBucket == 0 {
				return
			}
			switch string(key) {
			case string(bktConvs):
				p.bucket(val, "conversations", 1, func(flags uint32, id, cv []byte) {
					if flags&leafBucket != 0 {
						p.conversation(out, string(id), cv)
					}
				})
			case string(bktSettings):
				p.bucket(val, "settings", 1, func(flags uint32, k, v []byte) {
					if flags&leafBucket == 0 {
						out.settings[string(k)] = append([]byte(nil), v...)
					}
				})
			}
		})
	}
	// Conversations the damage cut off from the tree: every leaf page not
	// free and not yet visited that holds a conversation's info and turns
	// (the info names its conversation), or conversation elements.
	outside := 0
	for id := uint64(2); id < uint64(len(b)/p.pageSize); id++ {
		off := id * uint64(p.pageSize)
		if p.seen[id] || p.free[id] || ne.Uint64(b[off:]) != id || ne.Uint16(b[off+8:]) != pageLeaf {
			continue
		}
		pg := p.page(id)
		if pg == nil {
			continue
		}
		quiet := &pager{b: b, pageSize: p.pageSize, free: p.free, seen: p.seen, rep: &SalvageReport{}}
		var info []byte
		hasTurns := false
		quiet.elements(pg, "", func(flags uint32, key, val []byte, _ uint64) {
			switch {
			case flags&leafBucket == 0 && string(key) == string(keyInfo):
				info = val
			case flags&leafBucket != 0 && string(key) == string(bktTurns):
				hasTurns = true
			case flags&leafBucket != 0 && out.convs[string(key)] == nil && checkID(string(key)) == nil:
				if c := quiet.conversationOf(val); c.info != nil && json.Valid(c.info) {
					out.convs[string(key)] = c
					outside++
				}
			}
		})
		var ci convInfo
		if info == nil || !hasTurns || json.Unmarshal(info, &ci) != nil || checkID(ci.ID) != nil || out.convs[ci.ID] != nil {
			continue
		}
		delete(quiet.seen, id)
		c := &salvConv{turns: map[uint64][]byte{}}
		quiet.tree(id, "conversation", 2, c.add(quiet))
		out.convs[ci.ID] = c
		outside++
	}
	if outside > 0 {
		p.problem("%d conversations were found by scanning the pages (damage cut them off from the tree)", outside)
	}
	return out
}

// conversation records the conversation id whose bucket value is cv.
func (p *pager) conversation(out *salvaged, id string, cv []byte) {
	if c := p.conversationOf(cv); c != nil {
		out.convs[id] = c
	}
}

func (p *pager) conversationOf(cv []byte) *salvConv {
	c := &salvConv{turns: map[uint64][]byte{}}
	p.bucket(cv, "conversation", 2, c.add(p))
	return c
}

// add returns the visitor of a conversation bucket's elements.
func (c *salvConv) add(p *pager) func(flags uint32, k, v []byte) {
	return func(flags uint32, k, v []byte) {
		switch {
		case flags&leafBucket == 0 && string(k) == string(keyInfo):
			c.info = append([]byte(nil), v...)
		case flags&leafBucket != 0 && string(k) == string(bktTurns):
			c.sequence = p.bucket(v, "turns", 3, func(flags uint32, tk, tv []byte) {
				if flags&leafBucket == 0 && len(tk) == 8 {
					c.turns[binary.BigEndian.Uint64(tk)] = append([]byte(nil), tv...)
				}
			})
		}
	}
}

// writeSalvaged creates a new sessions file at path with what was found,
// each record checked as it goes in.
func writeSalvaged(path string, found *salvaged, opts *Options, rep *SalvageReport) error {
	o := Options{}
	if opts != nil {
		o = *opts
	}
	o.ReadOnly, o.OnEvict = false, nil
	o.Limits = SessionLimits{MaxTurns: 1 << 30, MaxConversations: 1 << 30, MaxBytes: 1 << 62}
	s, err := OpenSessions(path, &o)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(found.convs))
	for id := range found.convs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	err = s.update(func(tx *bolt.Tx) error {
		for k, v := range found.settings {
			if k == "" || len(k) > 1024 {
				rep.Problems = append(rep.Problems, fmt.Sprintf("a setting with a key of %d bytes, left out", len(k)))
				continue
			}
			if err := tx.Bucket(bktSettings).Put([]byte(k), v); err != nil {
				return err
			}
			rep.Settings++
		}
		for _, id := range ids {
			sc := found.convs[id]
			var ci convInfo
			if err := json.Unmarshal(sc.info, &ci); err != nil || checkID(id) != nil {
				rep.Problems = append(rep.Problems, fmt.Sprintf("conversation %q: unreadable metadata, left out", id))
				continue
			}
			b, err := tx.Bucket(bktConvs).CreateBucket([]byte(id))
			if err != nil {
				return err
			}
			tb, err := b.CreateBucket(bktTurns)
			if err != nil {
				return err
			}
			seqs := make([]uint64, 0, len(sc.turns))
			for seq := range sc.turns {
				seqs = append(seqs, seq)
			}
			sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
			last := sc.sequence
			bad := 0
			for _, seq := range seqs {
				v := sc.turns[seq]
				if _, err := decodeTurn(seqKey(seq), v); err != nil {
					bad++
					continue
				}
				if err := tb.Put(seqKey(seq), v); err != nil {
					return err
				}
				last = max(last, seq)
				rep.Turns++
			}
			if bad > 0 {
				rep.Problems = append(rep.Problems, fmt.Sprintf("conversation %q: %d unreadable turns left out", id, bad))
			}
			if err := tb.SetSequence(last); err != nil {
				return err
			}
			c := Conversation{ID: id, Model: ci.Model, System: ci.System, Created: ci.Created, Updated: ci.Updated}
			if _, err := writeInfo(b, c, nil); err != nil {
				return err
			}
			rep.Conversations++
		}
		return nil
	})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return nil
}

// checkStructure walks every page reachable from the newest valid meta
// page of the bbolt file held in b, and its freelist page, and returns the
// first problem found (nil when none). bbolt's own tx.Check runs in a
// goroutine of its own, where a panic or a memory fault on a damaged page
// cannot be recovered and kills the process: this walk, run first in the
// caller's goroutine, keeps Check to files whose pages are sound.
func checkStructure(b []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s", errDamaged, describePanic(r))
		}
	}()
	rep := &SalvageReport{}
	root, ps, freeID, ok := metaOf(b)
	if !ok {
		return fmt.Errorf("%w: no valid meta page", errDamaged)
	}
	if ps < 512 || ps > 1<<16 {
		return fmt.Errorf("%w: page size %d", errDamaged, ps)
	}
	p := &pager{b: b, pageSize: ps, free: map[uint64]bool{}, seen: map[uint64]bool{}, rep: rep}
	// Check reads both meta pages, whichever is current.
	for id := range 2 {
		off := id * ps
		if off+16 > len(b) || ne.Uint64(b[off:]) != uint64(id) || ne.Uint16(b[off+8:]) != pageMeta {
			p.problem("meta page %d: bad header", id)
		}
	}
	if freeID != ^uint64(0) { // bbolt's "no freelist" (NoFreelistSync)
		if fl := p.page(freeID); fl != nil && ne.Uint16(fl[8:]) != pageFreelist {
			p.problem("page %d: not a freelist page (flags %#x)", freeID, ne.Uint16(fl[8:]))
		}
	}
	var visit func(flags uint32, key, val []byte)
	depth := 0
	visit = func(flags uint32, key, val []byte) {
		if flags&leafBucket == 0 || depth > 16 {
			return
		}
		depth++
		p.bucket(val, fmt.Sprintf("bucket %q", key), depth, visit)
		depth--
	}
	p.bucket(root, "root", 0, visit)
	if len(rep.Problems) > 0 {
		return fmt.Errorf("%w: %s", errDamaged, rep.Problems[0])
	}
	return nil
}
