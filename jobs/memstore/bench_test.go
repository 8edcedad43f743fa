package memstore_test

import (
	"testing"

	"github.com/backchannel-io/backchannel/jobs/storetest"
)

// BenchmarkTransitions measures transitions/s on the memory store.
func BenchmarkTransitions(b *testing.B) { storetest.BenchmarkTransitions(b, newStore) }

// BenchmarkLifecycle measures lifecycles/s (call → defer → 3 progress → result) on the memory store.
func BenchmarkLifecycle(b *testing.B) { storetest.BenchmarkLifecycle(b, newStore) }

// BenchmarkDeadlines measures how late deadlines fire with 100,000 open deferred jobs in memory.
func BenchmarkDeadlines(b *testing.B) { storetest.BenchmarkDeadlines(b, newStore) }
