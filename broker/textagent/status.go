package textagent

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// StatusState is the state of a `status` call (SPEC 13).
type StatusState string

// The states of a `status` call.
const (
	StatusWorking StatusState = "working"
	StatusWaiting StatusState = "waiting"
	StatusBlocked StatusState = "blocked"
	StatusDone    StatusState = "done"
)

// Valid reports whether s is one of the four states.
func (s StatusState) Valid() bool {
	switch s {
	case StatusWorking, StatusWaiting, StatusBlocked, StatusDone:
		return true
	}
	return false
}

// MaxStatusTitleBytes is the longest accepted status title, in UTF-8 bytes, after trimming.
const MaxStatusTitleBytes = 160

// Errors of a `status` call. Their texts are the exact `error` header values of SPEC 13; none
// echoes the rejected state or title.
var (
	ErrStatusState           = errors.New("status state must be one of working, waiting, blocked, done")
	ErrStatusTitleEmpty      = errors.New("status title must not be empty")
	ErrStatusTitleTooLong    = errors.New("status title must be at most 160 UTF-8 bytes")
	ErrStatusTitleSingleLine = errors.New("status title must be a single line without control characters")
)

// ValidateStatus checks the arguments of a `status` call and returns the state and the trimmed
// title, or one of the Err errors above (state and title are then zero).
//
// The title is trimmed of leading and trailing Unicode white space (unicode.IsSpace, which
// includes TAB, LF, CR, U+0085, U+2028 and U+2029 at the edges). The rules are checked in this
// order and the first failing one is reported:
//  1. the state is exactly one of working, waiting, blocked, done (ErrStatusState);
//  2. the trimmed title is not empty (ErrStatusTitleEmpty);
//  3. it is at most MaxStatusTitleBytes bytes long (ErrStatusTitleTooLong);
//  4. it is valid UTF-8 and holds no control character (Unicode category Cc: U+0000–U+001F,
//     U+007F–U+009F), U+2028 or U+2029 (ErrStatusTitleSingleLine). Invalid UTF-8 is rejected by
//     this rule too.
func ValidateStatus(state, title string) (StatusState, string, error) {
	st := StatusState(state)
	if !st.Valid() {
		return "", "", ErrStatusState
	}
	t := strings.TrimFunc(title, unicode.IsSpace)
	if t == "" {
		return "", "", ErrStatusTitleEmpty
	}
	if len(t) > MaxStatusTitleBytes {
		return "", "", ErrStatusTitleTooLong
	}
	if !utf8.ValidString(t) {
		return "", "", ErrStatusTitleSingleLine
	}
	for _, r := range t {
		if unicode.Is(unicode.Cc, r) || r == '\u2028' || r == '\u2029' {
			return "", "", ErrStatusTitleSingleLine
		}
	}
	return st, t, nil
}

// StatusSetBody is the body of a successful `status` call, with the trimmed title ValidateStatus
// returned:
//
//	Status set to `STATE`: TITLE
func StatusSetBody(state StatusState, title string) string {
	return "Status set to `" + string(state) + "`: " + title
}
