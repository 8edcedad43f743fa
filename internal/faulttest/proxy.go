package faulttest

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"
)

// Mutation makes the self-check's proxy corrupt what the broker sends: each broker frame
// with a seq is dropped with probability Drop, else sent twice with probability Dup.
type Mutation struct {
	Drop float64
	Dup  float64
}

// proxy is a small in-process WebSocket proxy between the clients and a node's /v1/ws. With
// a zero Mutation it passes every message through unchanged.
type proxy struct {
	target func() string
	mut    Mutation
	srv    *http.Server
	ln     net.Listener
	url    string

	mu      sync.Mutex
	rng     *rand.Rand
	mutated atomic.Int64
}

func startProxy(target func() string, mut Mutation, seed uint64) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &proxy{target: target, mut: mut, ln: ln, url: "http://" + ln.Addr().String(), rng: rand.New(rand.NewPCG(seed, 0x9e))}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve)}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *proxy) close() { _ = p.srv.Close() }

// decide returns how many times to pass one broker message on (0, 1 or 2).
func (p *proxy) decide(msg []byte) int {
	if p.mut.Drop == 0 && p.mut.Dup == 0 || !bytes.Contains(msg, []byte(`"seq":`)) {
		return 1
	}
	p.mu.Lock()
	x := p.rng.Float64()
	p.mu.Unlock()
	switch {
	case x < p.mut.Drop:
		p.mutated.Add(1)
		return 0
	case x < p.mut.Drop+p.mut.Dup:
		p.mutated.Add(1)
		return 2
	}
	return 1
}

func (p *proxy) serve(w http.ResponseWriter, r *http.Request) {
	base := p.target()
	if base == "" || r.URL.Path != "/v1/ws" {
		http.Error(w, "no such route", http.StatusNotFound)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	up, _, err := websocket.Dial(ctx, wsURL(base), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer up.CloseNow()
	up.SetReadLimit(16 << 20)
	down, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer down.CloseNow()
	down.SetReadLimit(16 << 20)
	done := make(chan struct{}, 2)
	pump := func(from, to *websocket.Conn, mutate bool) {
		defer func() { done <- struct{}{} }()
		for {
			typ, msg, err := from.Read(ctx)
			if err != nil {
				var ce websocket.CloseError
				if errors.As(err, &ce) {
					_ = to.Close(ce.Code, ce.Reason)
				}
				return
			}
			n := 1
			if mutate && typ == websocket.MessageText {
				n = p.decide(msg)
			}
			for range n {
				if err := to.Write(ctx, typ, msg); err != nil {
					return
				}
			}
		}
	}
	go pump(down, up, false)
	go pump(up, down, true)
	<-done
}
