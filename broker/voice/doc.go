// Package voice is the voice side of a session with a caller (SPEC 8, 9, 11, 12, 17) as a state
// machine with no I/O: the floor, the narration queue and each narration's lifecycle, the
// pacing of agent audio and the accounting of what the caller heard, the retry of a completion
// and its delivery failure, asks and answers by voice with their re-ask, and the spoken
// permission turn. The rule tables it applies are package narration's.
//
// A Voice acts through its Env — the session's clock, its slots, its caller, its job engine
// and its permission verifier — and through the session's model.Model; the broker feeds it the
// model's and the caller's events and the jobs' changes, all on the session's event loop, and
// carries out what it decides. Its tests run it on a fake clock.
package voice
