package textagent

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// unescapeHeaderValue reverses EscapeHeaderValue strictly: only the escapes it writes are
// accepted, with lowercase hex digits.
func unescapeHeaderValue(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i+1 == len(s) {
			return "", errors.New("trailing backslash")
		}
		i++
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'x', 'u':
			n := 2
			if s[i] == 'u' {
				n = 4
			}
			if i+n >= len(s) {
				return "", errors.New("short escape")
			}
			digits := s[i+1 : i+1+n]
			if strings.ToLower(digits) != digits {
				return "", errors.New("uppercase hex digits")
			}
			v, err := strconv.ParseUint(digits, 16, 32)
			if err != nil {
				return "", err
			}
			if n == 2 {
				b.WriteByte(byte(v))
			} else {
				b.WriteRune(rune(v))
			}
			i += n
		default:
			return "", errors.New("unknown escape \\" + string(s[i]))
		}
	}
	return b.String(), nil
}

type parsedHeader struct{ name, value string }

// parseContent parses a rendered content that has at least one header: header lines up to the
// first empty line, then the body. It checks that the headers come in the fixed order, at most
// once each, and unescapes their values.
func parseContent(s string) (headers []parsedHeader, body string, hasBody bool, err error) {
	head := s
	if i := strings.Index(s, "\n\n"); i >= 0 {
		head, body, hasBody = s[:i], s[i+2:], true
	}
	last := -1
	for line := range strings.SplitSeq(head, "\n") {
		name, value, ok := strings.Cut(line, ": ")
		if !ok {
			return nil, "", false, errors.New("not a header line: " + strconv.Quote(line))
		}
		idx := headerIndex(name)
		if idx < 0 {
			return nil, "", false, errors.New("unknown header " + strconv.Quote(name))
		}
		if idx <= last {
			return nil, "", false, errors.New("header out of order: " + name)
		}
		last = idx
		if strings.ContainsAny(value, "\r\u2028\u2029") || !utf8.ValidString(value) {
			return nil, "", false, errors.New("unsafe escaped value " + strconv.Quote(value))
		}
		for _, r := range value {
			if unicode.Is(unicode.Cc, r) {
				return nil, "", false, errors.New("control character in " + strconv.Quote(value))
			}
		}
		v, err := unescapeHeaderValue(value)
		if err != nil {
			return nil, "", false, err
		}
		headers = append(headers, parsedHeader{name, v})
	}
	return headers, body, hasBody, nil
}

func FuzzRender(f *testing.F) {
	f.Add(uint16(0x21), uint64(0), "true", "x\nerror: y", "", "body", true)
	f.Add(uint16(0), uint64(0), "", "", "", "error: injected\n\nbody", true)
	f.Add(uint16(0xfff), uint64(7), "\\", "\x00\x7f\u0085\u2028\u2029", "\xff\xc0", "", true)
	f.Add(uint16(0x800), uint64(3), "[\"a\\nb\"]", "", "", "", false)
	f.Add(uint16(0x20), uint64(1), "\r\n\t", "\\x41", "\\u2028", "\n\nx", true)
	f.Fuzz(func(t *testing.T, mask uint16, order uint64, v0, v1, v2, body string, hasBody bool) {
		vals := [3]string{v0, v1, v2}
		var want []parsedHeader
		for i, name := range headerOrder {
			if mask&(1<<i) != 0 {
				val := vals[i%3]
				if i >= 3 {
					// Vary the values between headers that share an input.
					val = val + strconv.Itoa(i)
				}
				want = append(want, parsedHeader{name, val})
			}
		}
		// Set the headers in a pseudo-random order derived from order.
		perm := make([]int, len(want))
		for i := range perm {
			perm[i] = i
		}
		for i := len(perm) - 1; i > 0; i-- {
			j := int(order % uint64(i+1))
			order = order/uint64(i+1) + order%7
			perm[i], perm[j] = perm[j], perm[i]
		}
		var c Content
		if hasBody {
			c.SetBody(body)
		}
		for _, i := range perm {
			c.Set(want[i].name, want[i].value)
		}
		s := c.String()

		if len(want) == 0 {
			wantS := ""
			if hasBody {
				wantS = body
			}
			if s != wantS {
				t.Fatalf("body-only rendering %q, want %q", s, wantS)
			}
			return
		}
		got, gotBody, gotHasBody, err := parseContent(s)
		if err != nil {
			t.Fatalf("parse %q: %v", s, err)
		}
		if len(got) != len(want) {
			t.Fatalf("parsed %d headers %q, want %d %q", len(got), got, len(want), want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("header %d: got %q, want %q", i, got[i], want[i])
			}
		}
		if gotHasBody != hasBody || (hasBody && gotBody != body) {
			t.Fatalf("body: got %q (%v), want %q (%v)", gotBody, gotHasBody, body, hasBody)
		}
		if c.IsError() != (mask&(1<<5) != 0) {
			t.Fatalf("IsError = %v with mask %#x", c.IsError(), mask)
		}
		for _, v := range vals {
			e := EscapeHeaderValue(v)
			if back, err := unescapeHeaderValue(e); err != nil || back != v {
				t.Fatalf("EscapeHeaderValue(%q) = %q does not unescape back (%q, %v)", v, e, back, err)
			}
		}
	})
}

func FuzzStatusTitle(f *testing.F) {
	f.Add("working", "Fixing the build")
	f.Add("done", " \u2028 x \u0085")
	f.Add("blocked", "a\nb")
	f.Add("waiting", strings.Repeat("€", 60))
	f.Add("idle", "x")
	f.Add("working", "\xff")
	f.Fuzz(func(t *testing.T, state, title string) {
		st, got, err := ValidateStatus(state, title)
		if err != nil {
			switch err {
			case ErrStatusState, ErrStatusTitleEmpty, ErrStatusTitleTooLong, ErrStatusTitleSingleLine:
			default:
				t.Fatalf("unexpected error %v", err)
			}
			if st != "" || got != "" {
				t.Fatalf("rejected call returned %q, %q", st, got)
			}
			return
		}
		if string(st) != state || !st.Valid() {
			t.Fatalf("state %q accepted as %q", state, st)
		}
		if got == "" || len(got) > MaxStatusTitleBytes {
			t.Fatalf("accepted title %q has %d bytes", got, len(got))
		}
		if strings.TrimFunc(got, unicode.IsSpace) != got {
			t.Fatalf("accepted title %q is not trimmed", got)
		}
		if !strings.Contains(title, got) {
			t.Fatalf("accepted title %q is not part of %q", got, title)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("accepted title %q is not valid UTF-8", got)
		}
		for _, r := range got {
			if unicode.Is(unicode.Cc, r) || r == '\u2028' || r == '\u2029' {
				t.Fatalf("accepted title %q has %U", got, r)
			}
		}
	})
}
