package faulttest

import (
	"log/slog"
	"math/rand/v2"
	"sort"
	"time"
)

// faultKind is one kind of fault of mode redis-cluster.
type faultKind string

const (
	faultKillNode     faultKind = "kill_node"     // kill -9 a node, then start a replacement
	faultRestartRedis faultKind = "restart_redis" // Kill() and Restart() the Redis server
	faultDropConn     faultKind = "drop_conn"     // close a random client connection abruptly
)

// fault is one planned fault: it fires once the run's agents made atOp operations.
type fault struct {
	atOp int64
	kind faultKind
}

// planFaults spreads n faults over the middle of a run of totalOps operations: at least one
// node kill and one Redis restart when n ≥ 3, the rest mostly dropped connections.
func planFaults(r *rand.Rand, totalOps, n int) []fault {
	if n <= 0 || totalOps <= 0 {
		return nil
	}
	lo, hi := totalOps/8, totalOps*3/4
	if hi <= lo {
		hi = lo + 1
	}
	fs := make([]fault, n)
	for i := range fs {
		k := faultDropConn
		switch {
		case n >= 3 && i == 0:
			k = faultKillNode
		case n >= 3 && i == 1:
			k = faultRestartRedis
		default:
			switch x := r.IntN(10); {
			case x < 2:
				k = faultKillNode
			case x < 3:
				k = faultRestartRedis
			}
		}
		fs[i] = fault{atOp: int64(lo + r.IntN(hi-lo)), kind: k}
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].atOp < fs[j].atOp })
	return fs
}

// injectFaults runs the plan as the operation count passes each fault's mark, until the plan
// is done or stop is closed; it returns what it did.
func (run *runner) injectFaults(plan []fault, r *rand.Rand, stop <-chan struct{}) (kills, restarts, drops int) {
	for _, f := range plan {
		for run.ops.Load() < f.atOp {
			select {
			case <-stop:
				return
			case <-run.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		switch f.kind {
		case faultKillNode:
			n := run.cl.killRandom(r)
			if n == nil {
				continue
			}
			kills++
			run.log.Info("faulttest: killed a node", "run", run.name, "node", n.id, "url", n.url, "at_op", f.atOp)
			time.Sleep(time.Duration(r.IntN(1500)) * time.Millisecond)
			if nn, err := run.cl.startNode(); err != nil {
				run.log.Error("faulttest: starting a replacement node", "err", err)
			} else {
				run.log.Info("faulttest: replacement node up", "run", run.name, "node", nn.id, "url", nn.url)
			}
		case faultRestartRedis:
			restarts++
			run.cl.redis.Kill()
			down := time.Duration(200+r.IntN(1200)) * time.Millisecond
			run.log.Info("faulttest: Redis killed", "run", run.name, "down_for", down, "at_op", f.atOp)
			time.Sleep(down)
			run.cl.redis.Restart()
		case faultDropConn:
			drops++
			s := run.sessions[r.IntN(len(run.sessions))]
			if r.IntN(2) == 0 {
				s.host.l.drop()
			} else {
				s.agent.l.drop()
			}
		}
	}
	return
}

// discard is a logger that writes nothing.
var discard = slog.New(slog.DiscardHandler)
