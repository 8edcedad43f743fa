// Package narration holds the rules of voiced narration (SPEC 8): the per-session queue of
// things to say with its priorities and its replacement rule, the floor (who may speak now),
// the accounting of audible speech that decides whether a narration was delivered, and the
// outcome table of an attempt (delivered, failed, retried, delivery failed). It does no I/O:
// the broker's voice side drives it and sends the frames it decides on.
package narration
