// Package jobs is the durable job lifecycle of Backchannel (SPEC sections 5, 6, 7, 9 and 11):
// the state machine of a call from dispatch to its one terminal state, the defer handshake and
// its handles, the ordinary, deferred and permission clocks, interaction bookkeeping, and the
// parent/child cancellation cascade.
//
// The rules are decided in Go, without I/O, from a job's current record, the request and the
// time of an injected Clock (decide.go and the per-operation files). A Store makes each decision
// durable as one atomic Transition: a compare-and-set on the job's version together with the
// handle claim, the deadline, the indexes and the timeline entries it implies. The memory store
// applies it under a lock, the Redis store in one Lua script (one round trip). Whatever loses a
// race sees a version conflict, re-reads the job and decides again, so every job reaches exactly
// one terminal state and the loser is recorded on the timeline, never applied.
//
// The Engine ties the two together: it keeps the open jobs it works on in memory, retries store
// errors with backoff (a retried Transition is idempotent), fires due deadlines with Tick (a
// scheduler goroutine calls it from Run; tests call it with a FakeClock), and reports every
// applied transition to its OnChange callback.
package jobs
