package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"
)

// servePprof serves Go's profiles (net/http/pprof: CPU, heap, block, mutex, goroutines,
// execution traces) on addr, a listener of its own apart from the broker's routes, and turns on
// the block and mutex profiles at the given rates (0 leaves them off). It is for measuring a
// running node (docs/BENCHMARKS.md): the listener answers anyone who reaches it, so it must stay
// on loopback or a private network.
func servePprof(addr string, blockRate, mutexFraction int, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--pprof-addr %s: %v", addr, err)
	}
	runtime.SetBlockProfileRate(blockRate)
	runtime.SetMutexProfileFraction(mutexFraction)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	log.Info("profiles served", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	return func() { _ = srv.Close() }, nil
}

// The block profile records a blocking event per this many nanoseconds blocked, and the mutex
// profile one contended lock in this many: rare enough to cost nothing measurable under the
// benchmarks, often enough to show where a session waits.
const (
	pprofBlockRate     = 10_000
	pprofMutexFraction = 100
)
