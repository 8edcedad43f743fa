package broker

import (
	"strconv"
	"strings"
	"time"

	"github.com/backchannel-io/backchannel/frames"
)

// Slot is one attached (or resumable) connection's place in its session (SPEC 10): its role,
// its declared tools, its seq counter and outbox, and its resume token. A resumed connection
// takes over the slot with everything in it.
type Slot struct {
	id    string
	role  frames.Role
	order int // creation order: a new call goes to the latest slot that declares the tool

	tools    map[string]*Tool // the declared tool set (nil until the first declaration)
	declared bool             // it has declared tools (it gets tool_deferred_resume on resume)
	// byCaller: attached with the caller token (SPEC 11): it may declare only names no other
	// slot declares, and its job.cancel reaches only its own jobs and those of the voice calls.
	byCaller bool

	client    *Client // the attached connection, nil while dropped
	tokenHash [32]byte
	// prevHash is the hash of the token the current connection's hello used. It stays valid
	// beside tokenHash on this node (prevOK) while a relayed connection's welcome may not have
	// reached its client (until its edge confirms it: Session.welcomeConfirmed). The journal
	// keeps it valid (prevKept) until the client is known to have the welcome — its first
	// frame after it (Session.welcomeReceived): a node that dies between journaling the new
	// token and writing the welcome leaves the client with the used one only, and the node
	// that takes the session over must take it.
	prevHash [32]byte
	prevOK   bool
	prevKept bool
	out      outbox
	sent     int64 // the newest seq handed to a connection
	expiry   Timer
	expired  bool
	detached time.Time // when its connection dropped (zero while attached)
}

// resumeToken renders a slot's resume token: the slot id, a dash, and 128 random bits in
// base64url (SPEC 3.3). Only the hash of the secret part is kept.
func newResumeToken(slotID string) (token string, hash [32]byte) {
	secret := randomToken(16)
	return slotID + "-" + secret, hashToken(secret)
}

// parseResumeToken splits a token into slot id and secret.
func parseResumeToken(token string) (slotID, secret string, ok bool) {
	i := strings.IndexByte(token, '-') // slot ids have no dash; the secret may
	if i <= 0 || i == len(token)-1 {
		return "", "", false
	}
	return token[:i], token[i+1:], true
}

// withSeq inserts `"seq":N` right after the type member of an encoded frame.
func withSeq(encoded []byte, typ string, seq int64) []byte {
	prefix := len(`{"type":""`) + len(typ)
	if len(encoded) < prefix || encoded[prefix-1] != '"' {
		return encoded // not produced by frames.Encode; never happens
	}
	out := make([]byte, 0, len(encoded)+24)
	out = append(out, encoded[:prefix]...)
	out = append(out, `,"seq":`...)
	out = strconv.AppendInt(out, seq, 10)
	return append(out, encoded[prefix:]...)
}
