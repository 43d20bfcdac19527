package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/geisten/geist/quant"
)

// The KV-state blob: a header describing the layout, then for every
// attention layer and key/value head the keys of positions [0, n), then
// their values, as little-endian F16 (or Q8_0 rows); a model with
// short-convolution layers (version 2) appends their recurrent state at
// position n. A model with sliding-window layers (version 3, 4 with
// convolutions too) keeps of those layers only the positions a
// continuation reads, [n-Window+1, n): what their rings hold.
const (
	snapMagic   = "GKV1"
	snapHeader  = 4 + 7*4
	kvTypeF16   = 0
	kvTypeQ8_0  = 1
	snapVersion = 1
	// snapVersionConv is the version of blobs with a convolution state.
	snapVersionConv = 2
	// snapVersionSWA is added for blobs whose local layers hold a window.
	snapVersionSWA = 2
	// snapVersionRec is the version of blobs with a recurrent state
	// (recurrent.go: per recurrent layer its state and conv rows).
	snapVersionRec = 5
)

// ErrSnapshot is returned for a KV-state blob that does not fit the state.
var ErrSnapshot = errors.New("model: KV snapshot does not match")

// SnapshotSize is the size of a snapshot of n positions.
func (s *State) SnapshotSize(n int) int {
	c := &s.m.Config
	size := snapHeader + s.convSnapshotSize() + s.recSnapshotSize()
	for l := range c.NLayer {
		if !c.OwnKV(l) {
			continue
		}
		p := n - s.snapFrom(l, n)
		if s.kvType == quant.Q8_0 {
			size += c.KVHeadsOf(l) * p * (s.kRow[l] + s.vRow[l])
		} else {
			size += c.KVHeadsOf(l) * p * (c.HeadDimOf(l) + c.HeadDimVOf(l)) * 2
		}
	}
	return size
}

func (s *State) snapVersion() int {
	v := snapVersion
	if s.hasConv() {
		v = snapVersionConv
	}
	if s.hasRec() {
		v = snapVersionRec
	}
	if s.m.SWA != nil {
		v += snapVersionSWA
	}
	return v
}

func (s *State) kvTypeID() int {
	if s.kvType == quant.Q8_0 {
		return kvTypeQ8_0
	}
	return kvTypeF16
}

// Snapshot appends the state of the first n positions to dst[:0]: the
// keys and values, and for a model with recurrent layers their state at n,
// which must be a prefix the state returns to exactly (ExactPrefix(n) == n).
func (s *State) Snapshot(n int, dst []byte) ([]byte, error) {
	if n < 0 || n > s.n {
		return dst, fmt.Errorf("model: snapshot of %d positions, the cache holds %d", n, s.n)
	}
	if e := s.ExactPrefix(n); e != n {
		return dst, fmt.Errorf("model: snapshot of %d positions: the recurrent state is kept only up to %d there", n, e)
	}
	c := &s.m.Config
	if size := s.SnapshotSize(n); cap(dst) < size {
		// A fresh buffer for tens of megabytes: its pages mapped at
		// once, not faulted one by one by the copy (see populate).
		dst = newKV[byte](size)[:0]
		populate(dst[:size])
	}
	dst = append(dst[:0], snapMagic...)
	for _, v := range []int{s.snapVersion(), c.NLayer, c.NHeadKV, c.HeadDim, c.HeadDimV, s.kvTypeID(), n} {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(v))
	}
	for l := 0; l < c.NLayer; l++ {
		if !c.OwnKV(l) {
			continue
		}
		from, cp := s.snapFrom(l, n), s.kvCap[l]
		for h := 0; h < c.KVHeadsOf(l); h++ {
			if s.kvType == quant.Q8_0 {
				a, b := rowsOf(s.kq[l], h, cp, from, n, s.kRow[l])
				dst = append(append(dst, a...), b...)
				a, b = rowsOf(s.vq[l], h, cp, from, n, s.vRow[l])
				dst = append(append(dst, a...), b...)
				continue
			}
			a, b := rowsOf(s.kc[l], h, cp, from, n, c.HeadDimOf(l))
			dst = appendF16(appendF16(dst, a), b)
			a, b = rowsOf(s.vc[l], h, cp, from, n, c.HeadDimVOf(l))
			dst = appendF16(appendF16(dst, a), b)
		}
	}
	dst = s.appendConv(dst, n)
	if s.hasRec() {
		dst = s.appendRec(dst, n)
	}
	return dst, nil
}

// Restore replaces the KV state with a snapshot of the positions of
// tokens, which become the state's Tokens. A blob of another layout or
// type, or of another number of positions than len(tokens), is an error
// and leaves the state empty.
func (s *State) Restore(tokens []int32, blob []byte) error {
	return s.RestoreChunks(tokens, [][]byte{blob})
}

// RestoreChunks is Restore of a blob held in pieces (the prompt cache's
// stored pages, read in place): the pieces are copied straight into the
// cache, with no copy of the whole blob first.
func (s *State) RestoreChunks(tokens []int32, blob [][]byte) error {
	n, err := s.restore(newChunkReader(blob))
	if err == nil && n != len(tokens) {
		n, err = 0, fmt.Errorf("%w: %d positions for %d tokens", ErrSnapshot, n, len(tokens))
	}
	if err != nil {
		n = 0
	}
	s.n = n
	s.toks = append(s.toks[:0], tokens[:n]...)
	s.rows = 0
	s.kvLo = s.ringNeeds(n) // the local layers hold the snapshot's window
	if err != nil && s.hasConv() {
		s.conv.lo = 0
		clear(s.conv.ckOK)
	}
	if err != nil && s.hasRec() {
		s.recReset()
	}
	return err
}

// chunkReader reads a blob held in pieces (its own copy of the list: the
// caller's slices are left as they were).
type chunkReader struct {
	rest [][]byte
}

func newChunkReader(blob [][]byte) *chunkReader {
	return &chunkReader{rest: append([][]byte(nil), blob...)}
}

// populated is b with its pages mapped for writing (see populate).
func populated[E uint16 | byte](b []E) []E {
	populate(b)
	return b
}

func (r *chunkReader) len() int {
	n := 0
	for _, c := range r.rest {
		n += len(c)
	}
	return n
}

// read fills dst from the blob; the caller has checked the length.
func (r *chunkReader) read(dst []byte) {
	for len(dst) > 0 {
		for len(r.rest[0]) == 0 {
			r.rest = r.rest[1:]
		}
		k := copy(dst, r.rest[0])
		dst, r.rest[0] = dst[k:], r.rest[0][k:]
	}
}

// bytes is the rest of the blob in one slice.
func (r *chunkReader) bytes() []byte {
	b := make([]byte, r.len())
	r.read(b)
	return b
}

// snapHead checks a snapshot's header (of head, the blob's first
// snapHeader bytes, size bytes in all) against the state's layout and
// returns its number of positions. It reads only the model's
// configuration: it may run beside the state's own work.
func (s *State) snapHead(head []byte, size int) (int, error) {
	c := &s.m.Config
	if size < snapHeader || len(head) < snapHeader || string(head[:4]) != snapMagic {
		return 0, fmt.Errorf("%w: bad header", ErrSnapshot)
	}
	var h [7]int
	for i := range h {
		h[i] = int(binary.LittleEndian.Uint32(head[4+4*i:]))
	}
	want := [6]int{s.snapVersion(), c.NLayer, c.NHeadKV, c.HeadDim, c.HeadDimV, s.kvTypeID()}
	if [6]int(h[:6]) != want {
		return 0, fmt.Errorf("%w: layout %v, this model has %v", ErrSnapshot, h[:6], want)
	}
	n := h[6]
	if n > s.limit {
		return 0, fmt.Errorf("%w: %d positions exceed the context of %d", ErrSnapshot, n, s.limit)
	}
	if size != s.SnapshotSize(n) {
		return 0, fmt.Errorf("%w: %d bytes, %d positions need %d", ErrSnapshot, size, n, s.SnapshotSize(n))
	}
	return n, nil
}

// MaxSnapshotValue bounds the keys and values CheckSnapshot accepts:
// 2^14, a quarter of F16's range (the largest KV values of the zoo's
// models are in the hundreds; F16 keys near its limit would overflow the
// attention's products anyway).
const MaxSnapshotValue = 1 << 14

// CheckSnapshot checks that blob is a snapshot this state could restore
// (its header, layout and size, as Restore checks them) and that its
// keys, values and convolution state are plausible: finite, the keys and
// values within ±MaxSnapshotValue. It is for snapshots from elsewhere (a
// put through the control socket), not for a restore's hot path: it
// reads every value once. It reads only the model's configuration and
// may run beside the state's own work. It returns the snapshot's
// positions.
func (s *State) CheckSnapshot(blob []byte) (int, error) {
	n, err := s.snapHead(blob, len(blob))
	if err != nil {
		return 0, err
	}
	c := &s.m.Config
	p := blob[snapHeader:]
	for l := 0; l < c.NLayer; l++ {
		if !c.OwnKV(l) {
			continue
		}
		rows := n - s.snapFrom(l, n)
		for range c.KVHeadsOf(l) {
			for kv := range 2 {
				if s.kvType == quant.Q8_0 {
					row := s.kRow[l]
					if kv == 1 {
						row = s.vRow[l]
					}
					if err := checkQ8(p[:rows*row]); err != nil {
						return 0, fmt.Errorf("%w: layer %d: %v", ErrSnapshot, l, err)
					}
					p = p[rows*row:]
					continue
				}
				d := c.HeadDimOf(l)
				if kv == 1 {
					d = c.HeadDimVOf(l)
				}
				if err := checkF16(p[:2*rows*d]); err != nil {
					return 0, fmt.Errorf("%w: layer %d: %v", ErrSnapshot, l, err)
				}
				p = p[2*rows*d:]
			}
		}
	}
	for len(p) >= 4 { // the convolution state, float32
		if math.Float32frombits(le32(p))-math.Float32frombits(le32(p)) != 0 {
			return 0, fmt.Errorf("%w: a convolution state value is not finite", ErrSnapshot)
		}
		p = p[4:]
	}
	return n, nil
}

// f16 exponent fields: 31 is infinite or NaN; from f16MaxExp on, the
// magnitude is at least MaxSnapshotValue (2^(e-15)).
const f16MaxExp = 14 + 15

// checkF16 checks little-endian F16 values: finite, below
// MaxSnapshotValue in magnitude.
func checkF16(b []byte) error {
	// Four values a word: the exponent fields of a word's halves in the
	// low bits of each, and a lane is refused when its exponent is 29,
	// 30 or 31 (bits 4, 3 and 2 set, and 1 or 0).
	const lanes = 0x0001000100010001
	i := 0
	for ; i+8 <= len(b); i += 8 {
		e := binary.LittleEndian.Uint64(b[i:]) >> 10 & 0x001f001f001f001f
		if (e>>4)&(e>>3)&(e>>2)&(e>>1|e)&lanes != 0 {
			break // the loop below names it
		}
	}
	for ; i+1 < len(b); i += 2 {
		if e := (b[i+1] >> 2) & 0x1f; e >= f16MaxExp {
			if e == 31 {
				return fmt.Errorf("a key or value is not finite")
			}
			return fmt.Errorf("a key or value of magnitude %g or more", float64(MaxSnapshotValue))
		}
	}
	return nil
}

// checkQ8 checks Q8_0 blocks (an F16 scale, 32 int8): finite scales
// whose values stay below MaxSnapshotValue (|scale| below 2^7: 127
// steps of it below 2^14).
func checkQ8(b []byte) error {
	const bs = 34
	if len(b)%bs != 0 {
		return fmt.Errorf("Q8_0 rows of %d bytes", len(b))
	}
	for i := 0; i < len(b); i += bs {
		if e := (b[i+1] >> 2) & 0x1f; e >= 7+15 {
			if e == 31 {
				return fmt.Errorf("a key or value scale is not finite")
			}
			return fmt.Errorf("a key or value scale of magnitude 128 or more")
		}
	}
	return nil
}

// restore copies a snapshot's keys and values into the cache and returns
// its number of positions.
func (s *State) restore(src *chunkReader) (int, error) {
	c := &s.m.Config
	size := src.len()
	var head [snapHeader]byte
	if size >= snapHeader {
		src.read(head[:])
	}
	n, err := s.snapHead(head[:], size)
	if err != nil {
		return 0, err
	}
	s.reserve(n)
	for l := 0; l < c.NLayer; l++ {
		if !c.OwnKV(l) {
			continue
		}
		from, cp := s.snapFrom(l, n), s.kvCap[l]
		for hh := 0; hh < c.KVHeadsOf(l); hh++ {
			if s.kvType == quant.Q8_0 {
				a, b := rowsOf(s.kq[l], hh, cp, from, n, s.kRow[l])
				src.read(populated(a))
				src.read(populated(b))
				a, b = rowsOf(s.vq[l], hh, cp, from, n, s.vRow[l])
				src.read(populated(a))
				src.read(populated(b))
				continue
			}
			a, b := rowsOf(s.kc[l], hh, cp, from, n, c.HeadDimOf(l))
			readF16(populated(a), src)
			readF16(populated(b), src)
			a, b = rowsOf(s.vc[l], hh, cp, from, n, c.HeadDimVOf(l))
			readF16(populated(a), src)
			readF16(populated(b), src)
		}
	}
	if s.hasConv() {
		s.readConv(src.bytes(), n)
	}
	if s.hasRec() {
		s.readRec(src.bytes(), n)
	}
	return n, nil
}

// littleEndian is true on every platform geist targets; the F16 arrays are
// then copied as bytes.
var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

func appendF16(dst []byte, src []uint16) []byte {
	if littleEndian && len(src) > 0 {
		return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(&src[0])), 2*len(src))...)
	}
	for _, v := range src {
		dst = binary.LittleEndian.AppendUint16(dst, v)
	}
	return dst
}

func readF16(dst []uint16, src *chunkReader) {
	if len(dst) == 0 {
		return
	}
	if littleEndian {
		src.read(unsafe.Slice((*byte)(unsafe.Pointer(&dst[0])), 2*len(dst)))
		return
	}
	var b [2]byte
	for i := range dst {
		src.read(b[:])
		dst[i] = binary.LittleEndian.Uint16(b[:])
	}
}
