package jobs

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"strings"
	"unicode"
	"unicode/utf8"
)

// callIDAlphabet is lowercase base32 (a-z, 2-7), the alphabet of broker call ids (SPEC 5).
const callIDAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

var lowerBase32 = base32.NewEncoding(callIDAlphabet).WithPadding(base32.NoPadding)

// callIDRandomLen is the number of random characters after "call_" (20 × 5 = 100 bits).
const callIDRandomLen = 20

// MaxHandleBytes is the longest handle a defer may name (SPEC 6).
const MaxHandleBytes = 128

// NewCallID mints a broker call id: "call_" followed by 20 random characters of a-z2-7. The
// store's create transition refuses an id that exists, so an id is unique forever.
func NewCallID() string {
	var b [13]byte // 104 bits → 21 base32 characters, cut to 20
	_, _ = rand.Read(b[:])
	return "call_" + lowerBase32.EncodeToString(b[:])[:callIDRandomLen]
}

// DerivedCallID is the broker call id named by parts (a text agent's call: its session, its
// agent's slot, its conversation and its agent call id): "call_" and 20 characters of a-z2-7 of
// their SHA-256, so the same call made twice — sent again after the node that made its job
// died — names the same job, and the store's create transition refuses the second.
func DerivedCallID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts { // each length-prefixed, so no two lists of parts read alike
		h.Write(binary.AppendUvarint(nil, uint64(len(p))))
		h.Write([]byte(p))
	}
	return "call_" + lowerBase32.EncodeToString(h.Sum(nil))[:callIDRandomLen]
}

// IsBrokerCallID reports whether s has the form of a broker call id. Such strings are reserved:
// a host may not use one as a handle (SPEC 6, handle_reserved).
func IsBrokerCallID(s string) bool {
	if len(s) != len("call_")+callIDRandomLen || !strings.HasPrefix(s, "call_") {
		return false
	}
	for i := len("call_"); i < len(s); i++ {
		if strings.IndexByte(callIDAlphabet, s[i]) < 0 {
			return false
		}
	}
	return true
}

// ValidHandle reports whether h may name a deferred job at all: non-empty, at most 128 bytes,
// valid UTF-8, and without control characters (C0, DEL, C1). A handle failing it is answered
// with reason invalid_handle.
func ValidHandle(h string) bool {
	if h == "" || len(h) > MaxHandleBytes || !utf8.ValidString(h) {
		return false
	}
	for _, r := range h {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// randomID returns prefix followed by n random characters of a-z2-7.
func randomID(prefix string, n int) string {
	b := make([]byte, (n*5+7)/8)
	_, _ = rand.Read(b)
	return prefix + lowerBase32.EncodeToString(b)[:n]
}

// NewInteractionID mints the stable id of an interaction that arrived without one (SPEC 9).
func NewInteractionID() string { return randomID("ia_", 16) }

// newTransitionID names one transition so that a retried Apply is recognised as applied.
func newTransitionID() string { return randomID("", 16) }
