package memstore_test

import (
	"testing"

	"github.com/backchannel-io/backchannel/jobs"
	"github.com/backchannel-io/backchannel/jobs/memstore"
	"github.com/backchannel-io/backchannel/jobs/storetest"
)

func newStore(t testing.TB, clock jobs.Clock) jobs.Store { return memstore.New(clock) }

// TestConformance runs the store conformance suite against the memory store.
func TestConformance(t *testing.T) {
	storetest.Run(t, newStore)
	t.Run("Journal", func(t *testing.T) { storetest.RunJournal(t, newStore) })
	t.Run("RenewMany", func(t *testing.T) { storetest.RunRenewMany(t, newStore) })
	t.Run("FramesWithTransitions", func(t *testing.T) { storetest.RunFramesWithTransitions(t, newStore) })
}
