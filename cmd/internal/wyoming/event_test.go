package wyoming

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/geisten/geist/engine/zoo"
)

func readAll(t testing.TB, b []byte, lim Limits) ([]Event, error) {
	r := NewReader(bytes.NewReader(b), lim)
	var evs []Event
	for {
		ev, err := r.Read()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func TestEventRoundTrip(t *testing.T) {
	var b []byte
	var err error
	b, err = AppendEvent(b, "transcript", map[string]any{"text": "Grüß dich <&>", "context": map[string]any{"conversation_id": "c1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = AppendEvent(b, "describe", nil, nil)
	b, _ = AppendEvent(b, "audio-chunk", map[string]int{"rate": 16000}, []byte{1, 2, 3, 0, '\n'})
	b, _ = AppendEvent(b, "handled-stop", map[string]any{}, nil)
	evs, err := readAll(t, b, Limits{})
	if !errors.Is(err, io.EOF) || len(evs) != 4 {
		t.Fatalf("%d events, err %v", len(evs), err)
	}
	var tr transcript
	if err := evs[0].Decode(&tr); err != nil || *tr.Text != "Grüß dich <&>" || tr.Context["conversation_id"] != "c1" {
		t.Errorf("transcript %+v %v", tr, err)
	}
	if evs[1].Type != "describe" || len(evs[1].data) != 0 || evs[3].Type != "handled-stop" || len(evs[3].data) != 0 {
		t.Errorf("events without data: %+v %+v", evs[1], evs[3])
	}
	if !bytes.Equal(evs[2].Payload, []byte{1, 2, 3, 0, '\n'}) {
		t.Errorf("payload %v", evs[2].Payload)
	}
	first, _, _ := bytes.Cut(b, []byte("\n"))
	if !bytes.Contains(first, []byte(`"version":"`+ProtocolVersion+`"`)) || !bytes.Contains(first, []byte(`"data_length":`)) {
		t.Errorf("header line %s", first)
	}
}

// The data block's keys win over the header's data, as the reference
// implementation merges them.
func TestEventDataMerge(t *testing.T) {
	raw := `{"type":"transcript","data":{"text":"header","language":"en"},"data_length":16}` + "\n" + `{"text":"block"}`
	evs, err := readAll(t, []byte(raw), Limits{})
	if len(evs) != 1 || !errors.Is(err, io.EOF) {
		t.Fatalf("%v %v", evs, err)
	}
	var tr transcript
	evs[0].Decode(&tr)
	if *tr.Text != "block" || tr.Language != "en" {
		t.Errorf("merged %+v", tr)
	}
}

// Events written by the reference implementation (wyoming/event.py) read
// back here, and events written here read back there.
func TestEventFramingWithReference(t *testing.T) {
	pkg := filepath.Join(filepath.Dir(zoo.Peer(t, "wyoming-ask.py")), "wyoming")
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: the reference Wyoming package needs it")
	}
	write := `
import sys
sys.path.insert(0, sys.argv[1])
from wyoming.event import Event, write_event
from wyoming.asr import Transcript
from wyoming.info import Describe
t = Transcript(text="Wie spät ist es? 🕐").event()
t.data["context"] = {"conversation_id": "01HS6SP2XD1E5HEHVDZE8R2WMR"}
write_event(t)
write_event(Describe().event())
write_event(Event(type="audio-chunk", data={"rate": 16000, "width": 2, "channels": 1}, payload=bytes(range(256))))
`
	out, err := exec.Command(py, "-c", write, pkg).Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	evs, err := readAll(t, out, Limits{})
	if !errors.Is(err, io.EOF) || len(evs) != 3 {
		t.Fatalf("read %d events of the reference's %q: %v", len(evs), out, err)
	}
	var tr transcript
	if err := evs[0].Decode(&tr); err != nil || *tr.Text != "Wie spät ist es? 🕐" || tr.Context["conversation_id"] != "01HS6SP2XD1E5HEHVDZE8R2WMR" {
		t.Errorf("transcript %+v %v", tr, err)
	}
	if evs[1].Type != "describe" || evs[2].Type != "audio-chunk" || len(evs[2].Payload) != 256 || evs[2].Payload[255] != 255 {
		t.Errorf("events %+v", evs[1:])
	}

	var b []byte
	b, _ = AppendEvent(b, "handled", handled{Text: "Es ist 🕐 <drei>", Context: map[string]any{"conversation_id": "x"}}, nil)
	b, _ = AppendEvent(b, "handled-stop", nil, nil)
	b, _ = AppendEvent(b, "audio-chunk", map[string]int{"rate": 22050}, []byte("\x00\x01\n\x02"))
	read := `
import sys, json
sys.path.insert(0, sys.argv[1])
from wyoming.event import read_event
while True:
    ev = read_event(sys.stdin.buffer)
    if ev is None:
        break
    print(json.dumps({"type": ev.type, "data": ev.data, "payload": list(ev.payload or b"")}, ensure_ascii=False))
`
	cmd := exec.Command(py, "-c", read, pkg)
	cmd.Stdin = bytes.NewReader(b)
	if out, err = cmd.Output(); err != nil {
		t.Fatalf("python: %v", err)
	}
	want := `{"type": "handled", "data": {"text": "Es ist 🕐 <drei>", "context": {"conversation_id": "x"}}, "payload": []}
{"type": "handled-stop", "data": null, "payload": []}
{"type": "audio-chunk", "data": {"rate": 22050}, "payload": [0, 1, 10, 2]}
`
	if string(out) != want {
		t.Errorf("the reference read\n%s\nwant\n%s", out, want)
	}
}

func TestEventLimits(t *testing.T) {
	lim := Limits{MaxLine: 64, MaxData: 32, MaxPayload: 16}
	for _, c := range []struct {
		raw  string
		want error
	}{
		{`{"type":"x"}` + "\n", io.EOF},
		{`{"type":"x","data_length":32}` + "\n" + `{"a":"` + strings.Repeat("b", 24) + `"}`, io.EOF},
		{`{"type":"x","data_length":33}` + "\n", ErrTooLarge},
		{`{"type":"x","payload_length":16}` + "\n" + strings.Repeat("p", 16), io.EOF},
		{`{"type":"x","payload_length":17}` + "\n", ErrTooLarge},
		{`{"type":"x","payload_length":1e3}` + "\n", ErrMalformed},
		{`{"type":"x","payload_length":"9"}` + "\n" + "123456789", io.EOF},
		{`{"type":"x","payload_length":99999999999999999999999}` + "\n", ErrMalformed},
		{`{"type":"` + strings.Repeat("t", 60) + `"}` + "\n", ErrTooLarge},
		{`{"type":"x"}`, ErrMalformed}, // no newline before the end
		{`{"type":"x"} {"type":"y"}` + "\n", ErrMalformed},
		{`{"type":"x","data":null}` + "\n", io.EOF},
		{`{"type":"x","data":[]}` + "\n", ErrMalformed},
		{`{"type":""}` + "\n", ErrMalformed},
		{`{"type":5}` + "\n", ErrMalformed},
		{"\n", ErrMalformed},
		{`{"type":"x","data_length":4}` + "\n" + `{"a"`, ErrMalformed},
	} {
		_, err := readAll(t, []byte(c.raw), lim)
		if !errors.Is(err, c.want) {
			t.Errorf("%q: %v, want %v", c.raw, err, c.want)
		}
	}
}

// FuzzReadEvent: any bytes read as events never panic, every event read
// keeps within the limits, and its data re-encoded reads back the same.
func FuzzReadEvent(f *testing.F) {
	seed := func(typ string, data any, payload []byte) []byte {
		b, _ := AppendEvent(nil, typ, data, payload)
		return b
	}
	f.Add(seed("transcript", map[string]any{"text": "hi", "context": map[string]any{"conversation_id": "c"}}, nil))
	f.Add(seed("audio-chunk", map[string]any{"rate": 16000}, []byte{0, 1, 2}))
	f.Add([]byte(`{"type":"transcript","data":{"text":"a"},"data_length":12}` + "\n" + `{"text":"bb"}`))
	f.Add([]byte(`{"type":"x","payload_length":-1}` + "\n"))
	f.Add([]byte("{\"type\":\"describe\"}\n{\"type\":\"ping\",\"data\":{\"text\":null}}\n"))
	lim := Limits{MaxLine: 256, MaxData: 256, MaxPayload: 256}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(bytes.NewReader(b), lim)
		for range 64 {
			ev, err := r.Read()
			if err != nil {
				return
			}
			if ev.Type == "" || len(ev.Payload) > lim.MaxPayload || len(ev.data) > 2 {
				t.Fatalf("event %+v out of bounds", ev)
			}
			var m map[string]any
			if err := ev.Decode(&m); err != nil {
				continue // valid JSON objects that do not decode into a map: duplicate keys of other types
			}
			enc, err := AppendEvent(nil, ev.Type, m, ev.Payload)
			if err != nil {
				t.Fatal(err)
			}
			back, err := NewReader(bytes.NewReader(enc), Limits{MaxLine: 1 << 20, MaxData: 1 << 20, MaxPayload: 1 << 20}).Read()
			if err != nil {
				t.Fatalf("re-encoded %q: %v", enc, err)
			}
			var m2 map[string]any
			back.Decode(&m2)
			if len(m) == 0 {
				m = nil
			}
			if back.Type != ev.Type || !bytes.Equal(back.Payload, ev.Payload) || !reflect.DeepEqual(m, m2) {
				t.Fatalf("round trip of %q: %+v %v, then %+v %v", b, ev, m, back, m2)
			}
		}
	})
}
