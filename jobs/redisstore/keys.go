package redisstore

import "strings"

// keys names the Redis keys of one tenant. Every key of a tenant carries the hash tag
// {t:TENANT}, so that every transition — a handle claim included — touches one Cluster slot.
type keys struct {
	base string // PREFIX{t:TENANT}:
}

func (s *Store) keysOf(tenant string) keys {
	var b strings.Builder
	b.Grow(len(s.prefix) + len(tenant) + 5)
	b.WriteString(s.prefix)
	b.WriteString("{t:")
	b.WriteString(tenant)
	b.WriteString("}:")
	return keys{base: b.String()}
}

func (k keys) job(callID string) string         { return k.base + "job:" + callID }
func (k keys) jobPrefix() string                { return k.base + "job:" }
func (k keys) deadlines() string                { return k.base + "deadlines" }
func (k keys) handle(h string) string           { return k.base + "handle:" + h }
func (k keys) open(sessionID string) string     { return k.base + "open:" + sessionID }
func (k keys) children(callID string) string    { return k.base + "children:" + callID }
func (k keys) timeline(sessionID string) string { return k.base + "timeline:" + sessionID }
func (k keys) tlsize(sessionID string) string   { return k.base + "tlsize:" + sessionID }
func (k keys) parked(sessionID string) string   { return k.base + "parked:" + sessionID }
func (k keys) parkedDue() string                { return k.base + "parked" }
func (k keys) live(sessionID string) string     { return k.base + "live:" + sessionID }
func (k keys) settled(sessionID string) string  { return k.base + "settled:" + sessionID }
func (k keys) leases() string                   { return k.base + "live" }
func (k keys) outbox(sessionID, slot string) string {
	return k.base + "out:" + sessionID + ":" + slot
}
func (k keys) replaced(sessionID, slot string) string {
	return k.base + "rep:" + sessionID + ":" + slot
}

// parkedIndex names the key that maps a parked session to its tenant: a resume token names no
// tenant. It has no hash tag (one key, read on its own).
func (s *Store) parkedIndex(sessionID string) string { return s.prefix + "parked:" + sessionID }

// liveIndex names the key that maps a journaled session to its tenant (no hash tag).
func (s *Store) liveIndex(sessionID string) string { return s.prefix + "live:" + sessionID }
