// Package faulttest is a Jepsen-style randomized fault test of the broker: real
// `backchannel serve` processes, real WebSocket clients, a seeded random schedule of tool
// calls, waits, cancels and dropped connections, faults injected into a three-node
// deployment, and a checker that reads the recorded histories against docs/spec.md.
//
// # What a run does
//
// [Run] starts the brokers of a [Mode] from a binary [BuildBinary] built once:
//
//   - ModeMemory: one node on the memory store;
//   - ModeRedis: one node on a private redis-server (internal/redistest, AOF on);
//   - ModeCluster: three nodes on one private Redis, with faults — kill -9 of a node (then a
//     replacement on a new port, so there are three again), Redis Kill and Restart, and
//     client connections closed abruptly. Every new client connection goes to a random live
//     node, so most connections are relayed to the node that holds their session.
//
// It creates Config.Sessions sessions, each with a host connection (tools quick, slow and
// the deferrable job, with short timeouts so jobs run out within seconds) and a text-agent
// connection (docs/textagent.md). Each agent plays a schedule of Config.Ops operations drawn
// with math/rand/v2 from the seed: calls whose arguments tell the host what to do (answer at
// once, later, never, with progress, defer under a fresh handle, a burned one, a reserved
// one, repeat a defer, finish twice, finish late, cancel the job itself), exact, parallel
// and bare waits, single and double cancels, dropped host and agent connections. The run is
// bounded by operation counts, not wall time. Clients do what the spec allows them: a
// retryable error on hello (the session is moving) is retried with backoff; a close or a
// dropped socket is resumed on a random live node with the resume token and last_seq
// (sometimes a little below what was processed, so replays repeat frames), followed by the
// sync barrier of docs/protocol.md; requests a barrier proves unapplied are sent again; agent
// calls that got no answer are sent again with the same call_id (a duplicate id is refused
// when the first got through). After the load the faults stop and the run quiesces within
// Config.Quiesce: the agent waits for every background result; then every connection sends
// a last barrier, and half the sessions make two calls that stay open and end the session.
//
// Every frame sent and received is recorded with its connection, direction, time and exact
// bytes in a per-session [History].
//
// # The checker
//
// [Check] is a pure function of the histories. It reports, as [Violation]s with the seed,
// the session and the frames around each one: seqs not consecutive on a connection or a
// replay not starting at last_seq+1, a seq seen again with other bytes, a second
// tool_cancel of a job, a burned handle accepted again, results (or placeholders, or a
// built-in's answer) delivered twice, outcomes the host's view contradicts (the tool_cancel
// reason, the results it sent), jobs ended without their tool_cancel, frames after
// session.ended, requests the broker applied but never answered, calls without an outcome
// after quiescence, `Unknown tool call id` for calls the broker had accepted, wait and cancel
// answers the calls' states do not allow, hellos refused where the spec gives no refusal (a
// valid resume token of a live session), clients that could never get back in. Where the
// spec allows something (a late result's call_finished, a token that may have been used by a
// hello whose welcome was lost) it is not reported. [Summarize] groups violations by kind.
//
// # Running it
//
// TestFaultsShort runs every mode — the three-node one with node kills and Redis restarts
// included — for a few seeds with small operation counts in the normal `go test ./...`.
//
// The long run is behind the build tag faultlong and reads its size from
// the environment:
//
//	FAULT_SEEDS=1..20 FAULT_OPS=5000 FAULT_SESSIONS=16 FAULT_MODES=memory,redis,redis-cluster \
//	    go test -tags faultlong ./internal/faulttest -run TestFaultsLong -timeout 2h -v
//
// FAULT_FAULTS sets the faults per cluster run (default: one per 400 operations). With
// FAULT_REPORT=FILE every run appends its summary and every violation's trace to FILE.
// FAULT_BROKER_RACE=1 builds the broker with -race; FAULT_BROKER_BIN=PATH uses a broker binary
// built elsewhere instead of building one. FAULT_DUMP=DIR writes every session's history, one
// event a line, into DIR; FAULT_LOGS=DIR keeps the nodes' logs in DIR/MODE_seedN.
package faulttest
