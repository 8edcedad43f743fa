package main

import (
	"encoding/json"
	"errors"
	"flag"
	"os"
	"runtime/pprof"
)

// bench runs `backchannel bench`. With --peer-json it runs the job lifecycle benchmark against
// the Redis at -redis and prints the one JSON line a peer benchmark harness expects (peerResult); without
// it, the broker benchmarks over real WebSocket connections (bench_ws.go). `bench voice` runs
// the voice benchmark with WebRTC callers instead (bench_voice.go).
func bench(args []string) error {
	if len(args) > 0 && args[0] == "voice" {
		return benchVoice(args[1:]) // WebRTC callers (bench_voice.go)
	}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	peer := fs.Bool("peer-json", false, "run the lifecycle benchmark against -redis and print one JSON line (for a peer benchmark harness)")
	addr := fs.String("redis", "", "HOST:PORT of the Redis to use (bench without it starts a private redis-server)")
	n := fs.Int("n", 20000, "job lifecycles to run")
	sessions := fs.Int("sessions", 256, "concurrent sessions")
	pipelines := fs.Int("pipelines", 0, "Redis store pipelines for -peer-json (0: the store's default)")
	maxBatch := fs.Int("max-batch", 0, "Redis store largest pipeline batch for -peer-json (0: the store's default)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the benchmark to this file")
	ws := wsBenchFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *peer {
		if *addr == "" {
			return errors.New("--peer-json needs -redis HOST:PORT")
		}
		r, err := peerLifecycles(*addr, *n, *sessions, *pipelines, *maxBatch)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(r)
	}
	return wsBench(*addr, *n, ws)
}
