package jobs

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// cutOf encodes e, cuts it and decodes the result.
func cutOf(t *testing.T, e Entry) (map[string]any, bool) {
	t.Helper()
	whole, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	out, ok, err := CutEntry(whole)
	if err != nil {
		t.Fatalf("CutEntry(%.200s): %v", whole, err)
	}
	if !ok {
		return nil, false
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("cut entry %.300s: %v", out, err)
	}
	return m, true
}

// TestCutEntry checks the cut form of SPEC 18 --timeline-max-bytes: long detail strings cut to
// at most 256 bytes at a character boundary, long non-string values rendered as a cut string of
// their compact JSON, the rest kept, "truncated": true, the top-level members as they were.
func TestCutEntry(t *testing.T) {
	long := "a" + strings.Repeat("é", 400) // the 256th byte is inside an "é"
	big := make([]int, 500)
	e := Entry{AtMS: 1764504000123, Kind: KindResult, CallID: "call_abcdefghijklmnopqrst", Handle: "report-1",
		Detail: map[string]any{
			"note":    long,
			"output":  json.RawMessage(`{"rows": [` + strings.Repeat(`"row", `, 100) + `"end"]}`),
			"list":    big,
			"number":  json.RawMessage(strings.Repeat("9", 300)),
			"small":   map[string]any{"k": "v"},
			"escaped": strings.Repeat("<", 200), // 200 bytes, 1,200 bytes of escaped JSON: kept
			"state":   "completed",
			"n":       3,
			"ok":      true,
		}}
	m, ok := cutOf(t, e)
	if !ok {
		t.Fatal("an entry with long values was not cut")
	}
	if m["at_ms"] != float64(e.AtMS) || m["kind"] != e.Kind || m["call_id"] != e.CallID || m["handle"] != e.Handle {
		t.Fatalf("cut entry %v: top-level members changed", m)
	}
	d := m["detail"].(map[string]any)
	if d["truncated"] != true {
		t.Fatalf("cut detail %v: want truncated true", d)
	}
	note := d["note"].(string)
	if len(note) != 255 || !utf8.ValidString(note) || !strings.HasPrefix(long, note) {
		t.Fatalf("note cut to %d bytes %q, want the first 255 (a character boundary)", len(note), note)
	}
	wantOut := `{"rows":[` + strings.Repeat(`"row",`, 100)
	if s, _ := d["output"].(string); s != wantOut[:CutBytes] {
		t.Fatalf("output cut to %q, want its compact JSON cut to 256 bytes", d["output"])
	}
	bigJSON, _ := json.Marshal(big)
	if s, _ := d["list"].(string); s != string(bigJSON[:CutBytes]) {
		t.Fatalf("list cut to %q", d["list"])
	}
	if s, _ := d["number"].(string); s != strings.Repeat("9", CutBytes) {
		t.Fatalf("number cut to %v", d["number"])
	}
	if d["escaped"] != strings.Repeat("<", 200) || d["state"] != "completed" || d["n"] != float64(3) || d["ok"] != true {
		t.Fatalf("short values changed: %v", d)
	}
	if s, _ := d["small"].(map[string]any); s["k"] != "v" {
		t.Fatalf("small object changed: %v", d["small"])
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if len(v) > CutBytes {
				t.Errorf("a string of %d bytes in a cut detail", len(v))
			}
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(d)
}

// TestCutEntryNothingToCut: an entry with no value over 256 bytes is not cut, however long it is.
func TestCutEntryNothingToCut(t *testing.T) {
	for _, d := range []map[string]any{
		nil,
		{},
		{"state": "completed", "note": strings.Repeat("x", CutBytes)},
		{"a": strings.Repeat("x", 200), "b": strings.Repeat("y", 200), "c": strings.Repeat("&", 256)},
	} {
		if m, ok := cutOf(t, Entry{AtMS: 1, Kind: KindProgress, CallID: "c", Detail: d}); ok {
			t.Errorf("detail %v cut to %v", d, m)
		}
	}
	m, ok := cutOf(t, Entry{AtMS: 1, Kind: KindProgress, Detail: map[string]any{"note": strings.Repeat("x", CutBytes+1)}})
	if !ok || m["detail"].(map[string]any)["note"] != strings.Repeat("x", CutBytes) {
		t.Fatalf("a note of 257 bytes: %v, %v", m, ok)
	}
}

// TestTimelineNotice checks that the notice built without reflection is the JSON of the entry.
func TestTimelineNotice(t *testing.T) {
	for _, c := range []struct{ at, max int64 }{{0, 1}, {1764504000123, 4 << 20}, {1, 4096}} {
		want, _ := json.Marshal(TimelineNotice(c.at, c.max))
		if got := AppendTimelineNotice(nil, c.at, c.max); string(got) != string(want) {
			t.Fatalf("AppendTimelineNotice = %s, want %s", got, want)
		}
	}
	if got := TimelineNoticeText(4096); got != "timeline over 4096 bytes: entry details are cut to 256 bytes" {
		t.Fatalf("notice text %q", got)
	}
}

// capStore records the cap of the transitions it is given.
type capStore struct {
	Store
	max []int64
}

func (s *capStore) Apply(ctx context.Context, t *Transition) error {
	s.max = append(s.max, t.TimelineMax)
	return nil
}

// TestTimelineMaxOption: the engine's option reaches every transition; zero means 4 MiB,
// negative no cap.
func TestTimelineMaxOption(t *testing.T) {
	for _, c := range []struct {
		opt  int
		want int64
	}{{0, 4 << 20}, {4096, 4096}, {-1, 0}} {
		s := &capStore{}
		e := NewEngine(s, Options{TimelineMaxBytes: c.opt})
		if err := e.Record(context.Background(), "t", "s", Entry{Kind: KindNotice}); err != nil {
			t.Fatal(err)
		}
		if len(s.max) != 1 || s.max[0] != c.want {
			t.Fatalf("TimelineMaxBytes %d: transitions carried %v, want %d", c.opt, s.max, c.want)
		}
	}
}
