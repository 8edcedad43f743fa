// Package broker runs Backchannel sessions (SPEC 2–13, 16–18): a Node owns the sessions of one
// broker process and wires their connections, the job engine (package jobs), the text agent
// (broker/textagent) and the voice side (model adapter, floor, narration, spoken permissions)
// together.
//
// Transports (broker/ws for WebSocket, broker/webrtc for WebRTC) decode frames on their own
// goroutines and hand them to a Client, which posts them to the session's mailbox: every
// session runs its events — frames, job changes, timers, model events — one at a time, so
// nothing a session owns needs a lock, and an idle session costs no goroutine. Each attached
// connection owns a Slot with its outbox, seq counter and rotating resume token (SPEC 10).
//
// Node.Handler serves the HTTP API (sessions, timelines, health, metrics) around a transport's
// handler. docs/broker.md records the choices made where docs/spec.md is silent.
package broker
