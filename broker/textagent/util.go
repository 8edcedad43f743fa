package textagent

import (
	"crypto/rand"
	"strconv"
)

func itoa(n int) string { return strconv.Itoa(n) }

// randomSuffix is a short random string that keeps ids unguessable across sessions.
func randomSuffix() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// withHeader returns c with one more header.
func withHeader(c Content, name, value string) Content {
	c.Set(name, value)
	return c
}
