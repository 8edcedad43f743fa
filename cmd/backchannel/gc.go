package main

import (
	"os"
	"runtime/debug"
)

// defaultGCPercent is the Go collector's target percentage (GOGC) serve runs with unless told
// otherwise: twice Go's own 100. The garbage collector set the broker's latency tail: in the
// paced benchmark (docs/BENCHMARKS.md, "The Redis path's tail") a node on Redis with 1,000
// active sessions collected every second or so, each cycle marking its 50–90 MB of live heap
// for 40–60 ms (with stop-the-world pauses of up to 4 ms on two busy cores), and the slowest
// percent of defer-acks were those that met a cycle. At 200 the collector runs half as often;
// the heap may grow to three times the live data instead of two (the idle-session figure of the
// same benchmark did not move: those sessions make no garbage).
const defaultGCPercent = 200

// gcPercentDefault is --gc-percent's default: defaultGCPercent, or 0 (leave it to the Go
// runtime) when the environment sets GOGC, which the runtime has read already.
func gcPercentDefault() int {
	if _, ok := os.LookupEnv("GOGC"); ok {
		return 0
	}
	return defaultGCPercent
}

// setGCPercent applies --gc-percent (0: the runtime's own, from GOGC).
func setGCPercent(p int) {
	if p > 0 {
		debug.SetGCPercent(p)
	}
}
