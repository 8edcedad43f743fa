package redisstore

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// A batcher sends the scripts of concurrent callers to Redis in pipelines: each worker takes
// the requests that are waiting when it becomes free (no added delay), up to maxBatch, and
// sends them in one round trip. Under load the batches grow by themselves, so the rate of
// transitions is not capped by one round trip per request.
type batcher struct {
	rdb      redis.UniversalClient
	reqs     chan *request
	maxBatch int
	done     chan struct{} // closed by close: the workers stop taking requests
	stopped  chan struct{} // closed once the workers have returned and the queue is drained
	once     sync.Once
	workers  sync.WaitGroup
}

type request struct {
	ctx    context.Context
	script *redis.Script
	cmd    []any // the whole EVALSHA command (evalCmd)
	reply  chan result
}

type result struct {
	val any
	err error
}

func newBatcher(rdb redis.UniversalClient, workers, maxBatch int) *batcher {
	b := &batcher{rdb: rdb, reqs: make(chan *request, workers*maxBatch), maxBatch: maxBatch,
		done: make(chan struct{}), stopped: make(chan struct{})}
	b.workers.Add(workers)
	for range workers {
		go func() {
			defer b.workers.Done()
			b.work()
		}()
	}
	return b
}

// evalCmd starts the EVALSHA command of script s with nkeys keys, with room for the keys and
// nargs arguments, which the caller appends. The command is built once, by its caller: go-redis's
// Script.EvalSha would copy keys and arguments into a slice of its own.
func evalCmd(s *redis.Script, nkeys, nargs int) []any {
	cmd := make([]any, 3, 3+nkeys+nargs)
	cmd[0], cmd[1], cmd[2] = "evalsha", s.Hash(), nkeys
	return cmd
}

// run sends the EVALSHA command cmd of script s (evalCmd) through a pipeline and waits for its
// reply.
func (b *batcher) run(ctx context.Context, s *redis.Script, cmd []any) (any, error) {
	return b.wait(ctx, &request{ctx: ctx, script: s, cmd: cmd, reply: make(chan result, 1)})
}

func (b *batcher) wait(ctx context.Context, r *request) (any, error) {
	select {
	case b.reqs <- r:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.done:
		return nil, redis.ErrClosed
	}
	select {
	case res := <-r.reply:
		return res.val, res.err
	case <-ctx.Done():
		// The request may still be applied: the caller's retry with the same transition id
		// is recognised by the script.
		return nil, ctx.Err()
	case <-b.stopped:
		// Every request a worker took, or the drain found, has its reply by now; one queued
		// after the drain is never sent.
		select {
		case res := <-r.reply:
			return res.val, res.err
		default:
			return nil, redis.ErrClosed
		}
	}
}

// close stops the workers once they have sent the pipeline in hand, fails the requests still
// queued with redis.ErrClosed, and returns when all of that is done. It may be called twice.
func (b *batcher) close() {
	b.once.Do(func() {
		close(b.done)
		b.workers.Wait()
		for {
			select {
			case r := <-b.reqs:
				r.reply <- result{err: redis.ErrClosed}
			default:
				close(b.stopped)
				return
			}
		}
	})
}

func (b *batcher) work() {
	batch := make([]*request, 0, b.maxBatch)
	for {
		select {
		case r := <-b.reqs:
			batch = append(batch[:0], r)
		case <-b.done:
			return
		}
	drain:
		for len(batch) < b.maxBatch {
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		b.send(batch)
		clear(batch) // an idle worker keeps no request (its frames) alive
	}
}

// send runs one pipeline of EVALSHAs; scripts missing on the server (after a restart) are
// loaded and their requests sent again.
func (b *batcher) send(batch []*request) {
	// No deadline of its own: the client's read and write timeouts bound a pipeline (go-redis
	// does not take a context's deadline for its socket unless ContextTimeoutEnabled), and a
	// context with a timer per pipeline was garbage for nothing.
	ctx := context.Background()
	live := batch[:0:0]
	for _, r := range batch {
		if r.ctx.Err() == nil {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(live))
	for i, r := range live {
		cmds[i] = redis.NewCmd(ctx, r.cmd...)
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx)
	for i, r := range live {
		val, err := cmds[i].Result()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// Redis lost its scripts (a restart): load this one and send the command again.
			if err = r.script.Load(ctx, b.rdb).Err(); err == nil {
				val, err = b.rdb.Do(ctx, r.cmd...).Result()
			}
		}
		r.reply <- result{val: val, err: err}
	}
}
