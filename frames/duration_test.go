package frames

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestDurationAccepts(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{`90000`, 90 * time.Second},
		{`"90s"`, 90 * time.Second},
		{`"2h"`, 2 * time.Hour},
		{`"1h30m"`, 90 * time.Minute},
		{`0`, 0},
		{`"0"`, 0},
		{`"1.5s"`, 1500 * time.Millisecond},
		{`"1.7ms"`, time.Millisecond}, // truncated to the millisecond
		{`"250µs"`, 0},
		{`9223372036854`, 9223372036854 * time.Millisecond},
	} {
		var d Duration
		if err := json.Unmarshal([]byte(c.in), &d); err != nil {
			t.Errorf("%s: %v", c.in, err)
			continue
		}
		if d.Std() != c.want {
			t.Errorf("%s = %v, want %v", c.in, d.Std(), c.want)
		}
		// In a frame.
		in := `{"type":"tools.declare","tools":[{"name":"a","description":"d","parameters":{},"timeout":` + c.in + `}]}`
		f, err := Decode([]byte(in))
		if err != nil {
			t.Errorf("Decode with timeout %s: %v", c.in, err)
			continue
		}
		if got := f.(*ToolsDeclare).Tools[0].Timeout.Std(); got != c.want {
			t.Errorf("timeout %s decoded as %v", c.in, got)
		}
	}
	var d Duration = Duration(5 * time.Second)
	if err := d.UnmarshalJSON([]byte("null")); err != nil || d.Std() != 5*time.Second {
		t.Errorf("null changed the duration: %v %v", d, err)
	}
}

func TestDurationRejects(t *testing.T) {
	for _, in := range []string{
		`"abc"`, `-1`, `true`, `false`, `"-5s"`, `1.5`, `1e3`, `""`, `"90"`, `{}`, `[]`,
		`9223372036855`, `99999999999999999999`, `"9999999999h"`,
	} {
		var d Duration
		if err := d.UnmarshalJSON([]byte(in)); err == nil {
			t.Errorf("%s accepted as %v", in, d)
		}
		frame := `{"type":"tools.declare","id":"d1","tools":[{"name":"slow","description":"d","parameters":{},"deferred":true,"deferred_timeout":` + in + `}]}`
		_, err := Decode([]byte(frame))
		e, ok := err.(*Error)
		if !ok || e.Code != CodeBadFrame || e.Ref != "d1" ||
			!strings.Contains(e.Message, "tools[0].deferred_timeout") || !strings.Contains(e.Message, `"slow"`) {
			t.Errorf("deferred_timeout %s: %v", in, err)
		}
	}
}

func TestDurationMarshal(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{90 * time.Second, `90000`},
		{2 * time.Hour, `7200000`},
		{0, `0`},
		{1500 * time.Microsecond, `1`},
	} {
		b, err := json.Marshal(Duration(c.d))
		if err != nil || string(b) != c.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", c.d, b, err, c.want)
		}
	}
	if Duration(90*time.Second).String() != "1m30s" || Duration(time.Second).Milliseconds() != 1000 {
		t.Error("String / Milliseconds")
	}
	if b, err := (Duration(0)).JSONSchemaBytes(); err != nil || !json.Valid(b) {
		t.Errorf("JSONSchemaBytes: %s %v", b, err)
	}
	// omitempty drops a zero duration; a set one is written as milliseconds.
	out, err := Encode(ToolsDeclare{Tools: []ToolDecl{{Name: "a", Parameters: json.RawMessage(`{}`), DeferredTimeout: Duration(2 * time.Hour), Deferred: true}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"type":"tools.declare","tools":[{"name":"a","description":"","parameters":{},"deferred":true,"deferred_timeout":7200000}]}`; string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}
