package textagent

import (
	"strings"
	"testing"
)

func TestValidateStatus(t *testing.T) {
	title160 := strings.Repeat("a", 160)
	title161 := strings.Repeat("a", 161)
	euro53 := strings.Repeat("€", 53) // 159 bytes
	euro54 := strings.Repeat("€", 54) // 162 bytes
	tests := []struct {
		name, state, title string
		wantState          StatusState
		wantTitle          string
		wantErr            string
	}{
		{"working", "working", "Fixing the build", StatusWorking, "Fixing the build", ""},
		{"waiting", "waiting", "for review", StatusWaiting, "for review", ""},
		{"blocked", "blocked", "need a key", StatusBlocked, "need a key", ""},
		{"done", "done", "shipped", StatusDone, "shipped", ""},
		{"trimmed", "working", " \t\n  a  b \r\n", StatusWorking, "a  b", ""},
		{"trimmed unicode space", "working", "\u00a0\u3000\u2028x\u2029\u0085\u205f", StatusWorking, "x", ""},
		{"160 bytes", "done", title160, StatusDone, title160, ""},
		{"160 bytes after trimming", "done", "  " + title160 + "\n", StatusDone, title160, ""},
		{"multi-byte within limit", "done", euro53 + "a", StatusDone, euro53 + "a", ""},
		{"internal spaces kept", "working", "a\u00a0b c", StatusWorking, "a\u00a0b c", ""},
		{"format chars allowed", "working", "a\u200bb\u00adc", StatusWorking, "a\u200bb\u00adc", ""},

		{"unknown state", "idle", "x", "", "", "status state must be one of working, waiting, blocked, done"},
		{"empty state", "", "x", "", "", "status state must be one of working, waiting, blocked, done"},
		{"state case", "Working", "x", "", "", "status state must be one of working, waiting, blocked, done"},
		{"state spaces", " working", "x", "", "", "status state must be one of working, waiting, blocked, done"},
		{"state before title", "nope", "", "", "", "status state must be one of working, waiting, blocked, done"},

		{"empty title", "working", "", "", "", "status title must not be empty"},
		{"blank title", "working", " \t\r\n\u2028\u00a0", "", "", "status title must not be empty"},

		{"161 bytes", "working", title161, "", "", "status title must be at most 160 UTF-8 bytes"},
		{"multi-byte over limit", "working", euro54, "", "", "status title must be at most 160 UTF-8 bytes"},
		{"length before control", "working", title160 + "\nx", "", "", "status title must be at most 160 UTF-8 bytes"},

		{"LF inside", "working", "a\nb", "", "", "status title must be a single line without control characters"},
		{"CR inside", "working", "a\rb", "", "", "status title must be a single line without control characters"},
		{"TAB inside", "working", "a\tb", "", "", "status title must be a single line without control characters"},
		{"NUL", "working", "a\x00", "", "", "status title must be a single line without control characters"},
		{"ESC", "working", "\x1b[1mbold", "", "", "status title must be a single line without control characters"},
		{"DEL", "working", "a\x7fb", "", "", "status title must be a single line without control characters"},
		{"C1", "working", "a\u0080b", "", "", "status title must be a single line without control characters"},
		{"NEL inside", "working", "a\u0085b", "", "", "status title must be a single line without control characters"},
		{"U+2028 inside", "working", "a\u2028b", "", "", "status title must be a single line without control characters"},
		{"U+2029 inside", "working", "a\u2029b", "", "", "status title must be a single line without control characters"},
		{"invalid UTF-8", "working", "a\xffb", "", "", "status title must be a single line without control characters"},
		{"invalid UTF-8 at the edge", "working", "\xffab", "", "", "status title must be a single line without control characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, title, err := ValidateStatus(tt.state, tt.title)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if st != "" || title != "" {
					t.Errorf("rejected call returned %q, %q", st, title)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if st != tt.wantState || title != tt.wantTitle {
				t.Errorf("got %q, %q; want %q, %q", st, title, tt.wantState, tt.wantTitle)
			}
		})
	}
}

func TestStatusErrorsAreSentinels(t *testing.T) {
	for _, tt := range []struct {
		state, title string
		want         error
	}{
		{"x", "t", ErrStatusState},
		{"done", " ", ErrStatusTitleEmpty},
		{"done", strings.Repeat("x", 200), ErrStatusTitleTooLong},
		{"done", "a\nb", ErrStatusTitleSingleLine},
	} {
		if _, _, err := ValidateStatus(tt.state, tt.title); err != tt.want {
			t.Errorf("ValidateStatus(%q, %q) = %v, want %v", tt.state, tt.title, err, tt.want)
		}
	}
}

func TestStatusErrorsNeverEcho(t *testing.T) {
	const secret = "SECRET"
	for _, tt := range []struct{ state, title string }{
		{secret, "t"},
		{"done", " "},
		{"done", strings.Repeat(secret, 40)},
		{"done", secret + "\n" + secret},
	} {
		_, _, err := ValidateStatus(tt.state, tt.title)
		if err == nil || strings.Contains(err.Error(), secret) {
			t.Errorf("ValidateStatus(%q, %q) = %v", tt.state, tt.title, err)
		}
	}
}

func TestStatusStateValid(t *testing.T) {
	for _, s := range []StatusState{StatusWorking, StatusWaiting, StatusBlocked, StatusDone} {
		if !s.Valid() {
			t.Errorf("%q not valid", s)
		}
	}
	if StatusState("").Valid() || StatusState("WORKING").Valid() {
		t.Error("invalid state is valid")
	}
	got := string(StatusWorking) + "," + string(StatusWaiting) + "," + string(StatusBlocked) + "," + string(StatusDone)
	if got != "working,waiting,blocked,done" {
		t.Errorf("states = %q", got)
	}
}

func TestStatusSetBody(t *testing.T) {
	st, title, err := ValidateStatus("blocked", "  need the API key \n")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := StatusSetBody(st, title), "Status set to `blocked`: need the API key"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	var c Content
	c.SetBody(StatusSetBody(StatusWorking, "x"))
	if got, want := c.String(), "Status set to `working`: x"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
