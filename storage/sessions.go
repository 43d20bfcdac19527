package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// Sessions database layout (schema 3):
//
//	meta/schema              uint32 big-endian schema version
//	conversations/<id>/info  JSON convInfo
//	conversations/<id>/turns/<seq uint64 BE>  binary turn (encodeTurn)
//	settings/<key>           value
//
// Schema 1 stored each turn as JSON (jsonTurnV1); its token-id arrays made
// long turns about four times larger than the binary form. Schema 2 had no
// turn count and size in convInfo (counting meant walking every turn).
const sessionsSchema = 3

var (
	bktMeta     = []byte("meta")
	bktConvs    = []byte("conversations")
	bktSettings = []byte("settings")
	bktTurns    = []byte("turns")
	keySchema   = []byte("schema")
	keyInfo     = []byte("info")
)

// A migration rewrites a sessions database from version from to from+1
// inside one write transaction, so a crash leaves the old version intact.
type migration struct {
	from int
	fn   func(tx *bolt.Tx) error
}

// migrations is the read-only list of schema upgrades, in order.
var migrations = []migration{
	{from: 1, fn: migrateJSONTurns},
	{from: 2, fn: migrateCounts},
}

// Options configures OpenSessions.
type Options struct {
	// Timeout bounds the wait for a lock held by another process
	// (DefaultTimeout when zero).
	Timeout time.Duration
	// Logger receives notable events (migrations); nil discards them.
	Logger *slog.Logger
	// Now is the clock for created/updated/turn times; nil means time.Now.
	Now func() time.Time
	// Limits bound what the file holds; the zero value means
	// DefaultSessionLimits.
	Limits SessionLimits
	// ReadOnly opens an existing file for reading only: it never creates
	// or changes one (ErrNoDatabase when there is none) and shares the
	// file with other readers.
	ReadOnly bool
	// OnEvict, when set, is called after a write that evicted whole
	// conversations to stay within Limits, with their ids (so that the
	// caller can drop what it keeps for them, such as prompt-cache
	// entries). It runs on the writing goroutine, outside any transaction.
	OnEvict func(ids []string)
}

// Conversation is a conversation's metadata.
type Conversation struct {
	ID      string    `json:"id"`
	Model   string    `json:"model,omitempty"`
	System  string    `json:"system,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Turns is the number of stored turns (filled by Get and List).
	Turns int `json:"-"`
}

// Turn is one message of a conversation. Seq orders turns within a
// conversation; it is assigned by Append and never reused.
type Turn struct {
	Seq    uint64    `json:"seq"`
	Role   string    `json:"role"`
	Text   string    `json:"text"`
	Tokens []int32   `json:"tokens,omitempty"`
	Time   time.Time `json:"time"`
}

// convInfo is the stored form of Conversation (the id is the bucket name,
// and repeated in ID so that a salvage can name a conversation whose
// parent page is lost). Turns and Bytes are kept up to date by every write
// (schema 3).
type convInfo struct {
	ID      string    `json:"id"`
	Model   string    `json:"model,omitempty"`
	System  string    `json:"system,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	Turns   int       `json:"turns"`
	Bytes   int64     `json:"bytes"`
}

// Sessions is the durable conversation store. Every method that returns
// without error has committed and fsynced its change.
type Sessions struct {
	mu      sync.RWMutex // guards db against Close
	db      *bolt.DB
	log     *slog.Logger
	now     func() time.Time
	lim     SessionLimits
	onEvict func([]string)
	closed  bool

	// idx mirrors every conversation's update time and stored bytes, for
	// eviction without a scan; guarded by the write transaction (bbolt
	// runs one at a time) and read under mu.
	imu   sync.Mutex
	idx   map[string]convStat
	total int64
}

// OpenSessions opens or creates the sessions database at path, migrating an
// older schema (after copying the old file to path+".schemaN.bak"). It fails
// with ErrLocked when another process holds the file and with ErrCorrupt when
// the file is damaged; it never modifies a damaged file.
func OpenSessions(path string, opts *Options) (*Sessions, error) {
	return openSessions(path, opts, migrations, sessionsSchema)
}

func openSessions(path string, opts *Options, migs []migration, current int) (*Sessions, error) {
	if opts == nil {
		opts = &Options{}
	}
	s := &Sessions{log: opts.Logger, now: opts.Now, lim: opts.Limits.withDefaults(), onEvict: opts.OnEvict}
	if s.log == nil {
		s.log = discardLogger
	}
	if s.now == nil {
		s.now = time.Now
	}
	if opts.ReadOnly {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w at %s", ErrNoDatabase, path)
		}
	}
	db, err := openBolt(path, opts.Timeout, bolt.FreelistArrayType, opts.ReadOnly)
	if err != nil {
		return nil, sessionsErr(err)
	}
	if err := verify(db); err != nil {
		_ = guarded(db.Close)
		return nil, sessionsErr(err)
	}
	s.db = db
	if opts.ReadOnly {
		err = guarded(func() error {
			return db.View(func(tx *bolt.Tx) error {
				if v := schemaOf(tx); v != current {
					return fmt.Errorf("storage: %s has sessions schema %d, this build reads %d (a geist serve or run upgrades it)", path, v, current)
				}
				return nil
			})
		})
	} else {
		err = s.upgrade(path, migs, current)
	}
	if err != nil {
		_ = guarded(db.Close)
		return nil, sessionsErr(err)
	}
	if err := s.loadIndex(); err != nil {
		_ = guarded(db.Close)
		return nil, sessionsErr(err)
	}
	return s, nil
}

// sessionsErr maps the internal damage marker to ErrCorrupt.
func sessionsErr(err error) error {
	if errors.Is(err, errDamaged) {
		return fmt.Errorf("%w (geist sessions salvage keeps what is readable): %v", ErrCorrupt, err)
	}
	return err
}

// upgrade initialises a new file or runs the migrations from its version to
// current, all in one transaction.
func (s *Sessions) upgrade(path string, migs []migration, current int) error {
	var version int
	err := guarded(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			version = schemaOf(tx)
			return nil
		})
	})
	if err != nil {
		return err
	}
	if version > current {
		return fmt.Errorf("%w: file has schema %d, this build knows %d", ErrSchemaTooNew, version, current)
	}
	if version > 0 && version < current {
		backup := fmt.Sprintf("%s.schema%d.bak", path, version)
		if err := guarded(func() error {
			return s.db.View(func(tx *bolt.Tx) error { return tx.CopyFile(backup, 0o600) })
		}); err != nil {
			return fmt.Errorf("storage: back up before migration: %w", err)
		}
		s.log.Info("storage: migrating sessions database", "path", path, "from", version, "to", current, "backup", backup)
	}
	if version == current {
		return nil
	}
	return guarded(func() error {
		return s.db.Update(func(tx *bolt.Tx) error {
			if version == 0 {
				// A new file: create the current layout.
				for _, name := range [][]byte{bktMeta, bktConvs, bktSettings} {
					if _, err := tx.CreateBucketIfNotExists(name); err != nil {
						return fmt.Errorf("storage: %w", err)
					}
				}
			} else {
				for v := version; v < current; v++ {
					m := findMigration(migs, v)
					if m == nil {
						return fmt.Errorf("storage: no migration from sessions schema %d", v)
					}
					if err := m.fn(tx); err != nil {
						return fmt.Errorf("storage: migrate sessions schema %d to %d: %w", v, v+1, err)
					}
				}
			}
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], uint32(current))
			return tx.Bucket(bktMeta).Put(keySchema, b[:])
		})
	})
}

func findMigration(migs []migration, from int) *migration {
	for i := range migs {
		if migs[i].from == from {
			return &migs[i]
		}
	}
	return nil
}

// schemaOf reads the schema version; 0 means a new, empty file.
func schemaOf(tx *bolt.Tx) int {
	m := tx.Bucket(bktMeta)
	if m == nil {
		return 0
	}
	v := m.Get(keySchema)
	if len(v) != 4 {
		return 0
	}
	return int(binary.BigEndian.Uint32(v))
}

// Close closes the database; later calls fail with ErrClosed.
func (s *Sessions) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return sessionsErr(guarded(s.db.Close))
}

func (s *Sessions) view(fn func(tx *bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return sessionsErr(guarded(func() error { return s.db.View(fn) }))
}

func (s *Sessions) update(fn func(tx *bolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return sessionsErr(writeErr(guarded(func() error { return s.db.Update(fn) })))
}

func checkID(id string) error {
	if id == "" || len(id) > 256 || !utf8.ValidString(id) {
		return fmt.Errorf("storage: invalid conversation id %q (1 to 256 bytes of UTF-8)", id)
	}
	return nil
}

// conv returns the bucket of conversation id or ErrNotFound.
func conv(tx *bolt.Tx, id string) (*bolt.Bucket, error) {
	b := tx.Bucket(bktConvs).Bucket([]byte(id))
	if b == nil {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	return b, nil
}

func readInfo(b *bolt.Bucket, id string) (Conversation, error) {
	ci, err := readConvInfo(b, id)
	if err != nil {
		return Conversation{}, err
	}
	return Conversation{ID: id, Model: ci.Model, System: ci.System, Created: ci.Created, Updated: ci.Updated, Turns: ci.Turns}, nil
}

func readConvInfo(b *bolt.Bucket, id string) (convInfo, error) {
	var ci convInfo
	if err := json.Unmarshal(b.Get(keyInfo), &ci); err != nil {
		return convInfo{}, fmt.Errorf("%w: conversation %q: bad metadata: %v", errDamaged, id, err)
	}
	return ci, nil
}

// writeInfo stores c's metadata with the turn count and size of b's turns
// (tally gives them; nil counts them).
func writeInfo(b *bolt.Bucket, c Conversation, tally *convInfo) (convInfo, error) {
	ci := convInfo{ID: c.ID, Model: c.Model, System: c.System, Created: c.Created, Updated: c.Updated}
	if tally != nil {
		ci.Turns, ci.Bytes = tally.Turns, tally.Bytes
	} else {
		ci.Turns, ci.Bytes = countTurns(b.Bucket(bktTurns))
	}
	data, err := json.Marshal(ci)
	if err != nil {
		return convInfo{}, fmt.Errorf("storage: %w", err)
	}
	return ci, b.Put(keyInfo, data)
}

// Create stores a new conversation with c's id, model and system prompt.
// Zero Created/Updated times are set to now. It fails with ErrExists when
// the id is taken.
func (s *Sessions) Create(c Conversation) (Conversation, error) {
	if err := checkID(c.ID); err != nil {
		return Conversation{}, err
	}
	now := s.now().UTC()
	if c.Created.IsZero() {
		c.Created = now
	}
	if c.Updated.IsZero() {
		c.Updated = c.Created
	}
	c.Turns = 0
	err := s.write(func(tx *bolt.Tx, w *writeState) error {
		convs := tx.Bucket(bktConvs)
		if convs.Bucket([]byte(c.ID)) != nil {
			return fmt.Errorf("%w: %q", ErrExists, c.ID)
		}
		b, err := convs.CreateBucket([]byte(c.ID))
		if err != nil {
			return fmt.Errorf("storage: %w", err)
		}
		if _, err := b.CreateBucket(bktTurns); err != nil {
			return fmt.Errorf("storage: %w", err)
		}
		ci, err := writeInfo(b, c, &convInfo{})
		if err != nil {
			return err
		}
		w.set(c.ID, ci)
		return s.enforce(tx, w, c.ID, ci)
	})
	if err != nil {
		return Conversation{}, err
	}
	return c, nil
}

// Info returns a conversation's metadata.
func (s *Sessions) Info(id string) (Conversation, error) {
	var c Conversation
	err := s.view(func(tx *bolt.Tx) error {
		b, err := conv(tx, id)
		if err != nil {
			return err
		}
		c, err = readInfo(b, id)
		return err
	})
	return c, err
}

// Get returns a conversation's metadata and its turns in order (Recent
// reads only the newest).
func (s *Sessions) Get(id string) (Conversation, []Turn, error) {
	return s.Recent(id, 0, 0)
}

// List returns every conversation's metadata, most recently updated first.
func (s *Sessions) List() ([]Conversation, error) {
	var out []Conversation
	err := s.view(func(tx *bolt.Tx) error {
		convs := tx.Bucket(bktConvs)
		return convs.ForEachBucket(func(k []byte) error {
			c, err := readInfo(convs.Bucket(k), string(k))
			if err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Updated.Equal(out[j].Updated) {
			return out[i].Updated.After(out[j].Updated)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// Delete removes a conversation and its turns.
func (s *Sessions) Delete(id string) error {
	return s.write(func(tx *bolt.Tx, w *writeState) error {
		if _, err := conv(tx, id); err != nil {
			return err
		}
		w.remove(id)
		return tx.Bucket(bktConvs).DeleteBucket([]byte(id))
	})
}

// SetMeta changes a conversation's model and system prompt and marks it
// updated.
func (s *Sessions) SetMeta(id, model, system string) error {
	return s.write(func(tx *bolt.Tx, w *writeState) error {
		b, err := conv(tx, id)
		if err != nil {
			return err
		}
		ci, err := readConvInfo(b, id)
		if err != nil {
			return err
		}
		c := Conversation{ID: id, Model: model, System: system, Created: ci.Created, Updated: s.now().UTC()}
		if ci, err = writeInfo(b, c, &ci); err != nil {
			return err
		}
		w.set(id, ci)
		return s.enforce(tx, w, id, ci)
	})
}

// Append adds turns to a conversation in one transaction and returns their
// sequence numbers. Zero turn times are set to now. When Append returns nil
// the turns are on disk.
func (s *Sessions) Append(id string, turns ...Turn) ([]uint64, error) {
	seqs := make([]uint64, len(turns))
	err := s.write(func(tx *bolt.Tx, w *writeState) error {
		b, err := conv(tx, id)
		if err != nil {
			return err
		}
		ci, err := readConvInfo(b, id)
		if err != nil {
			return err
		}
		tb := b.Bucket(bktTurns)
		now := s.now().UTC()
		for i, t := range turns {
			seq, err := tb.NextSequence()
			if err != nil {
				return fmt.Errorf("storage: %w", err)
			}
			if t.Time.IsZero() {
				t.Time = now
			}
			v := encodeTurn(t)
			if err := tb.Put(seqKey(seq), v); err != nil {
				return fmt.Errorf("storage: %w", err)
			}
			ci.Turns++
			ci.Bytes += turnCost(v)
			seqs[i] = seq
		}
		over := func(ci *convInfo) bool { return ci.Turns > s.lim.MaxTurns }
		if err := trimTurns(b, &ci, s.lim.MaxTurns, over, w); err != nil {
			return err
		}
		c := Conversation{ID: id, Model: ci.Model, System: ci.System, Created: ci.Created, Updated: now}
		if ci, err = writeInfo(b, c, &ci); err != nil {
			return err
		}
		w.set(id, ci)
		return s.enforce(tx, w, id, ci)
	})
	if err != nil {
		return nil, err
	}
	return seqs, nil
}

// ReplaceTurns replaces all turns of a conversation, as when the oldest are
// dropped to fit the context. A turn with a non-zero Seq keeps it (they must
// increase); the others get new sequence numbers after every one used so far.
func (s *Sessions) ReplaceTurns(id string, turns []Turn) error {
	var last uint64
	for _, t := range turns {
		if t.Seq != 0 {
			if t.Seq <= last {
				return fmt.Errorf("storage: replace turns of %q: sequence numbers must increase (%d after %d)", id, t.Seq, last)
			}
			last = t.Seq
		}
	}
	return s.write(func(tx *bolt.Tx, w *writeState) error {
		b, err := conv(tx, id)
		if err != nil {
			return err
		}
		seq := b.Bucket(bktTurns).Sequence()
		if err := b.DeleteBucket(bktTurns); err != nil {
			return fmt.Errorf("storage: %w", err)
		}
		tb, err := b.CreateBucket(bktTurns)
		if err != nil {
			return fmt.Errorf("storage: %w", err)
		}
		seq = max(seq, last)
		now := s.now().UTC()
		for _, t := range turns {
			if t.Seq == 0 {
				seq++
				t.Seq = seq
			}
			if t.Time.IsZero() {
				t.Time = now
			}
			if err := tb.Put(seqKey(t.Seq), encodeTurn(t)); err != nil {
				return fmt.Errorf("storage: %w", err)
			}
		}
		if err := tb.SetSequence(seq); err != nil {
			return fmt.Errorf("storage: %w", err)
		}
		c, err := readInfo(b, id)
		if err != nil {
			return err
		}
		c.Updated = now
		ci, err := writeInfo(b, c, nil)
		if err != nil {
			return err
		}
		over := func(ci *convInfo) bool { return ci.Turns > s.lim.MaxTurns }
		if err := trimTurns(b, &ci, s.lim.MaxTurns, over, w); err != nil {
			return err
		}
		if ci, err = writeInfo(b, c, &ci); err != nil {
			return err
		}
		w.set(id, ci)
		return s.enforce(tx, w, id, ci)
	})
}

// ExportDoc is the JSON form of a conversation that Export writes (and
// that readers of it, such as geist sessions show, decode).
type ExportDoc struct {
	ID      string    `json:"id"`
	Model   string    `json:"model,omitempty"`
	System  string    `json:"system,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	Turns   []Turn    `json:"turns"`
}

// Export writes a conversation as indented JSON: id, model, system,
// created, updated and turns (seq, role, text, tokens, time).
func (s *Sessions) Export(w io.Writer, id string) error {
	c, turns, err := s.Get(id)
	if err != nil {
		return err
	}
	doc := ExportDoc{ID: c.ID, Model: c.Model, System: c.System, Created: c.Created, Updated: c.Updated, Turns: turns}
	if doc.Turns == nil {
		doc.Turns = []Turn{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("storage: export %q: %w", id, err)
	}
	return nil
}

// Recent returns a conversation's metadata and its newest turns, in order:
// at most maxTurns of them (0: no limit) and only as many as fit in
// maxBytes of text (0: no limit; the newest turn is returned whatever its
// size). It reads the turns from the newest back and stops there, so a
// conversation of 50,000 turns costs what a short one does.
func (s *Sessions) Recent(id string, maxTurns, maxBytes int) (Conversation, []Turn, error) {
	var (
		c     Conversation
		turns []Turn
	)
	err := s.view(func(tx *bolt.Tx) error {
		b, err := conv(tx, id)
		if err != nil {
			return err
		}
		if c, err = readInfo(b, id); err != nil {
			return err
		}
		size := 0
		cur := b.Bucket(bktTurns).Cursor()
		for k, v := cur.Last(); k != nil; k, v = cur.Prev() {
			if maxTurns > 0 && len(turns) == maxTurns {
				break
			}
			t, err := decodeTurn(k, v)
			if err != nil {
				return fmt.Errorf("%w: conversation %q: %v", errDamaged, id, err)
			}
			size += len(t.Text)
			if maxBytes > 0 && size > maxBytes && len(turns) > 0 {
				break
			}
			turns = append(turns, t)
		}
		for i, j := 0, len(turns)-1; i < j; i, j = i+1, j-1 {
			turns[i], turns[j] = turns[j], turns[i]
		}
		return nil
	})
	if err != nil {
		return Conversation{}, nil, err
	}
	return c, turns, nil
}

// Usage reports how many conversations the file holds and the estimated
// bytes of what they store (the measure of SessionLimits.MaxBytes).
func (s *Sessions) Usage() (conversations int, bytes int64) {
	s.imu.Lock()
	defer s.imu.Unlock()
	return len(s.idx), s.total
}

// Increment adds one to the counter setting key (absent: 0) in one
// transaction and returns the new value, as for the number of the
// dashboard's conversation, which must survive a restart.
func (s *Sessions) Increment(key string) (int64, error) {
	if key == "" || len(key) > 1024 {
		return 0, fmt.Errorf("storage: invalid setting key %q", key)
	}
	var n int64
	err := s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bktSettings)
		if v := b.Get([]byte(key)); v != nil {
			var err error
			if n, err = strconv.ParseInt(string(v), 10, 64); err != nil {
				return fmt.Errorf("storage: setting %q is not a counter: %q", key, v)
			}
		}
		n++
		return b.Put([]byte(key), strconv.AppendInt(nil, n, 10))
	})
	return n, err
}

// Setting returns the value of a setting and whether it is set.
func (s *Sessions) Setting(key string) (string, bool, error) {
	var (
		val string
		ok  bool
	)
	err := s.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bktSettings).Get([]byte(key)); v != nil {
			val, ok = string(v), true
		}
		return nil
	})
	return val, ok, err
}

// SetSetting stores a setting.
func (s *Sessions) SetSetting(key, value string) error {
	if key == "" || len(key) > 1024 {
		return fmt.Errorf("storage: invalid setting key %q", key)
	}
	return s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktSettings).Put([]byte(key), []byte(value))
	})
}

// DeleteSetting removes a setting (no error when absent).
func (s *Sessions) DeleteSetting(key string) error {
	if key == "" {
		return nil
	}
	return s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bktSettings).Delete([]byte(key))
	})
}

// Settings returns all settings.
func (s *Sessions) Settings() (map[string]string, error) {
	out := map[string]string{}
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bktSettings).ForEach(func(k, v []byte) error {
			out[string(k)] = string(v)
			return nil
		})
	})
	return out, err
}

func seqKey(seq uint64) []byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], seq)
	return k[:]
}

// turnFormat tags the binary turn encoding of schema 2.
const turnFormat = 2

// encodeTurn: format byte, time (varint Unix ns), role and text (uvarint
// length + bytes), token count (uvarint) and tokens (varint each).
func encodeTurn(t Turn) []byte {
	b := make([]byte, 0, 16+len(t.Role)+len(t.Text)+3*len(t.Tokens))
	b = append(b, turnFormat)
	b = binary.AppendVarint(b, t.Time.UnixNano())
	b = binary.AppendUvarint(b, uint64(len(t.Role)))
	b = append(b, t.Role...)
	b = binary.AppendUvarint(b, uint64(len(t.Text)))
	b = append(b, t.Text...)
	b = binary.AppendUvarint(b, uint64(len(t.Tokens)))
	for _, tok := range t.Tokens {
		b = binary.AppendVarint(b, int64(tok))
	}
	return b
}

var errBadTurn = errors.New("malformed turn record")

func decodeTurn(k, v []byte) (Turn, error) {
	if len(k) != 8 || len(v) == 0 || v[0] != turnFormat {
		return Turn{}, errBadTurn
	}
	t := Turn{Seq: binary.BigEndian.Uint64(k)}
	r := v[1:]
	ns, n := binary.Varint(r)
	if n <= 0 {
		return Turn{}, errBadTurn
	}
	r = r[n:]
	t.Time = time.Unix(0, ns).UTC()
	str := func() (string, bool) {
		l, n := binary.Uvarint(r)
		if n <= 0 || l > uint64(len(r)-n) {
			return "", false
		}
		s := string(r[n : n+int(l)])
		r = r[n+int(l):]
		return s, true
	}
	var ok bool
	if t.Role, ok = str(); !ok {
		return Turn{}, errBadTurn
	}
	if t.Text, ok = str(); !ok {
		return Turn{}, errBadTurn
	}
	cnt, n := binary.Uvarint(r)
	if n <= 0 || cnt > uint64(len(r)) {
		return Turn{}, errBadTurn
	}
	r = r[n:]
	if cnt > 0 {
		t.Tokens = make([]int32, cnt)
	}
	for i := range t.Tokens {
		x, n := binary.Varint(r)
		if n <= 0 || x != int64(int32(x)) {
			return Turn{}, errBadTurn
		}
		t.Tokens[i] = int32(x)
		r = r[n:]
	}
	if len(r) != 0 {
		return Turn{}, errBadTurn
	}
	return t, nil
}

// jsonTurnV1 is a turn as schema 1 stored it.
type jsonTurnV1 struct {
	Role   string    `json:"role"`
	Text   string    `json:"text"`
	Tokens []int32   `json:"tokens"`
	Time   time.Time `json:"time"`
}

// migrateJSONTurns rewrites every schema-1 JSON turn in binary form.
func migrateJSONTurns(tx *bolt.Tx) error {
	convs := tx.Bucket(bktConvs)
	if convs == nil {
		return errors.New("no conversations bucket")
	}
	if _, err := tx.CreateBucketIfNotExists(bktSettings); err != nil {
		return err
	}
	return convs.ForEachBucket(func(id []byte) error {
		tb := convs.Bucket(id).Bucket(bktTurns)
		if tb == nil {
			return nil
		}
		type kv struct{ k, v []byte }
		var out []kv
		err := tb.ForEach(func(k, v []byte) error {
			var old jsonTurnV1
			dec := json.NewDecoder(bytes.NewReader(v))
			if err := dec.Decode(&old); err != nil {
				return fmt.Errorf("conversation %q turn %x: %w", id, k, err)
			}
			t := Turn{Role: old.Role, Text: old.Text, Tokens: old.Tokens, Time: old.Time}
			out = append(out, kv{append([]byte(nil), k...), encodeTurn(t)})
			return nil
		})
		if err != nil {
			return err
		}
		for _, e := range out {
			if err := tb.Put(e.k, e.v); err != nil {
				return err
			}
		}
		return nil
	})
}
