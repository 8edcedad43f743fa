package faulttest

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// brokerBin is the backchannel binary TestMain built.
var brokerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "faulttest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faulttest:", err)
		os.Exit(1)
	}
	if brokerBin = os.Getenv("FAULT_BROKER_BIN"); brokerBin == "" {
		brokerBin, err = BuildBinary(dir, os.Getenv("FAULT_BROKER_RACE") == "1")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "faulttest:", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// shortRun is the size of one mode's short run.
type shortRun struct {
	mode     Mode
	seeds    []uint64
	sessions int
	ops      int
	faults   int
	quiesce  time.Duration
}

// shortRuns is the size of TestFaultsShort: a few seeds, small counts; the three-node mode
// with 8 faults (node kills, Redis restarts) per run.
var shortRuns = []shortRun{
	{ModeMemory, []uint64{1, 2, 3}, 10, 30, 0, 20 * time.Second},
	{ModeRedis, []uint64{1, 2, 3}, 10, 30, 0, 20 * time.Second},
	{ModeCluster, []uint64{1, 2}, 12, 40, 8, 40 * time.Second},
}

// TestFaultsShort runs every mode for a few seeds and fails on any violation. Modes run in
// parallel (with the self-check too); the seeds of a mode one after another.
func TestFaultsShort(t *testing.T) {
	t.Parallel()
	for _, sr := range shortRuns {
		t.Run(string(sr.mode), func(t *testing.T) {
			t.Parallel()
			for _, seed := range sr.seeds {
				t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
					res := Run(t, brokerBin, Config{Mode: sr.mode, Seed: seed, Sessions: sr.sessions, Ops: sr.ops,
						Faults: sr.faults, Quiesce: sr.quiesce, Logger: testLogger(t)})
					report(t, res)
				})
			}
		})
	}
}

// testLogger logs through t.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var reportMu sync.Mutex

// report logs a run's statistics and fails the test with its violations (grouped by kind,
// with example traces); with FAULT_REPORT set it also appends them to that file.
func report(t *testing.T, res Result) {
	t.Helper()
	st := res.Stats
	line := fmt.Sprintf("%s: %v, %d sessions, %d connections, %d frames, %d agent calls, %d node kills, %d Redis restarts, %d drops, %d mutations, %d unresolved, %d violations",
		res.Config.Name(), res.Elapsed.Round(time.Millisecond), st.Sessions, st.Conns, st.Frames, st.Calls,
		st.NodeKills, st.RedisRestarts, st.Drops, st.Mutations, st.Unresolved, len(res.Violations))
	t.Log(line)
	if path := os.Getenv("FAULT_REPORT"); path != "" {
		reportMu.Lock()
		if f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "==== %s\n%s\n%s", line, Summarize(res.Violations, 1000), res.StoreDump)
			f.Close()
		}
		reportMu.Unlock()
	}
	if dir := os.Getenv("FAULT_DUMP"); dir != "" {
		for _, h := range res.Histories {
			name := filepath.Join(dir, strings.ReplaceAll(res.Config.Name(), "/", "_")+"_"+h.Session+".txt")
			_ = os.WriteFile(name, []byte(h.Format()), 0o644)
		}
	}
	if len(res.Violations) > 0 {
		t.Errorf("%s\n%s", line, Summarize(res.Violations, 3))
		t.Logf("node logs:\n%s\n%s", res.NodeLogs, res.StoreDump)
	}
}
