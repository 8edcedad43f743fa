package broker

import (
	"errors"
	"time"

	"github.com/backchannel-io/backchannel/cluster"
)

// The health of the node's journal writes (SPEC 15: no frame is sent before the journal has
// it). A write that fails keeps the session's frames waiting and is retried (held.go); each
// failure is counted (backchannel_journal_errors_total), and once writes have failed for
// journalFailingAfter with none succeeding in between, /readyz answers 503 with reason
// "journal writes failing" — the store may still answer pings (a full Redis refuses writes
// and answers PING). A refusal because another node took the session over is no failure: the
// node lets that session go.

// journalFailingAfter is how long journal writes must have failed, none succeeding, before
// /readyz reports it.
const journalFailingAfter = 5 * time.Second

// journalWrote records the outcome of one journal write.
func (n *Node) journalWrote(err error) {
	switch {
	case err == nil:
		if n.journalFailingSince.Load() != 0 {
			n.journalFailingSince.Store(0)
		}
	case errors.Is(err, cluster.ErrLeaseLost):
	default:
		n.metrics.journalErrors.Inc()
		n.journalFailingSince.CompareAndSwap(0, n.now().UnixMilli())
	}
}

// journalFailing reports whether journal writes have failed for journalFailingAfter, none
// succeeding since.
func (n *Node) journalFailing() bool {
	since := n.journalFailingSince.Load()
	return since != 0 && n.now().Sub(time.UnixMilli(since)) >= journalFailingAfter
}
