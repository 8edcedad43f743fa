//go:build faultlong

package faulttest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFaultsLong is the long run, built only with -tags faultlong (see the package doc):
//
//	FAULT_SEEDS=1..20 FAULT_OPS=5000 go test -tags faultlong ./internal/faulttest -run TestFaultsLong -timeout 2h
//
// FAULT_SEEDS (a..b or a,b,c; default 1..5), FAULT_OPS (per session; default 1000),
// FAULT_SESSIONS (default 16), FAULT_MODES (default memory,redis,redis-cluster), FAULT_FAULTS
// (per cluster run; default one per 400 operations) and FAULT_QUIESCE (a Go duration;
// default 60s) size it. Modes run in parallel, seeds one after another.
func TestFaultsLong(t *testing.T) {
	seeds, err := parseSeeds(envOr("FAULT_SEEDS", "1..5"))
	if err != nil {
		t.Fatalf("FAULT_SEEDS: %v", err)
	}
	ops := envInt(t, "FAULT_OPS", 1000)
	sessions := envInt(t, "FAULT_SESSIONS", 16)
	faults := envInt(t, "FAULT_FAULTS", max(3, sessions*ops/400))
	quiesce, err := time.ParseDuration(envOr("FAULT_QUIESCE", "60s"))
	if err != nil {
		t.Fatalf("FAULT_QUIESCE: %v", err)
	}
	for _, m := range strings.Split(envOr("FAULT_MODES", "memory,redis,redis-cluster"), ",") {
		mode := Mode(strings.TrimSpace(m))
		switch mode {
		case ModeMemory, ModeRedis, ModeCluster:
		default:
			t.Fatalf("FAULT_MODES: unknown mode %q", mode)
		}
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			for _, seed := range seeds {
				t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
					cfg := Config{Mode: mode, Seed: seed, Sessions: sessions, Ops: ops, Quiesce: quiesce, Logger: testLogger(t)}
					if mode == ModeCluster {
						cfg.Faults = faults
					}
					report(t, Run(t, brokerBin, cfg))
				})
			}
		})
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envInt(t *testing.T, k string, def int) int {
	v := os.Getenv(k)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", k, v)
	}
	return n
}

// parseSeeds reads "a..b" or "a,b,c".
func parseSeeds(s string) ([]uint64, error) {
	if lo, hi, ok := strings.Cut(s, ".."); ok {
		a, err1 := strconv.ParseUint(strings.TrimSpace(lo), 10, 64)
		b, err2 := strconv.ParseUint(strings.TrimSpace(hi), 10, 64)
		if err1 != nil || err2 != nil || b < a {
			return nil, fmt.Errorf("%q is not a range a..b", s)
		}
		var out []uint64
		for x := a; x <= b; x++ {
			out = append(out, x)
		}
		return out, nil
	}
	var out []uint64
	for _, p := range strings.Split(s, ",") {
		x, err := strconv.ParseUint(strings.TrimSpace(p), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", p, err)
		}
		out = append(out, x)
	}
	return out, nil
}
