package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
)

// call is one decision waiting for a pipeline.
type call struct {
	ctx    context.Context // the caller's, bounded by the store's timeout
	script *script
	args   []any // "evalsha"/"eval", sha/source, 1, key, ARGV...
	limit  int64
	done   chan result // buffered: a worker never blocks on a caller that gave up
}

type result struct {
	d   sluice.Decision
	err error
}

// noRetry marks script calls so go-redis never sends them twice: a call whose reply was
// lost may have committed.
type noRetry struct{ *goredis.Cmd }

func (noRetry) NoRetry() bool { return true }

// worker sends pipelines: it takes one call, adds whatever else is queued (waiting up to
// MaxBatchDelay) up to MaxBatch, executes them in one pipeline and answers each caller.
func (s *Store) worker() {
	defer s.workers.Done()
	batch := make([]*call, 0, s.cfg.maxBatch)
	cmds := make([]noRetry, 0, s.cfg.maxBatch)
	var timer *time.Timer
	for {
		batch = batch[:0]
		select {
		case <-s.closing:
			return
		case c := <-s.queue:
			batch = append(batch, c)
		}
		if s.cfg.maxDelay > 0 && len(batch) < s.cfg.maxBatch {
			if timer == nil {
				timer = time.NewTimer(s.cfg.maxDelay)
			} else {
				timer.Reset(s.cfg.maxDelay)
			}
		wait:
			for len(batch) < s.cfg.maxBatch {
				select {
				case c := <-s.queue:
					batch = append(batch, c)
				case <-timer.C:
					break wait
				}
			}
			timer.Stop()
		}
	drain:
		for len(batch) < s.cfg.maxBatch {
			select {
			case c := <-s.queue:
				batch = append(batch, c)
			default:
				break drain
			}
		}
		cmds = s.exec(batch, cmds[:0])
	}
}

// exec runs the live calls of batch in one pipeline, then those that met NOSCRIPT again with
// EVAL (a script that was not found did not run), and answers every caller.
func (s *Store) exec(batch []*call, cmds []noRetry) []noRetry {
	live := batch[:0]
	for _, c := range batch {
		if c.ctx.Err() == nil { // a caller that gave up is not decided for
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return cmds
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.timeout)
	defer cancel()
	pipe := s.client.Pipeline()
	for _, c := range live {
		c.args[0], c.args[1] = "evalsha", c.script.sha
		cmd := noRetry{goredis.NewCmd(ctx, c.args...)}
		cmds = append(cmds, cmd)
		_ = pipe.Process(ctx, cmd)
	}
	_, _ = pipe.Exec(ctx)
	var again goredis.Pipeliner
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
			if again == nil {
				again = s.client.Pipeline()
			}
			c := live[i]
			c.args[0], c.args[1] = "eval", c.script.src
			cmds[i] = noRetry{goredis.NewCmd(ctx, c.args...)}
			_ = again.Process(ctx, cmds[i])
		}
	}
	if again != nil {
		_, _ = again.Exec(ctx)
	}
	for i, c := range live {
		c.done <- answer(cmds[i], c.limit)
	}
	return cmds
}

// run sends one call on its own, in the caller's goroutine, bounded by the call's context (the
// client honours it), with EVAL after NOSCRIPT (a script that was not found did not run).
func (s *Store) run(c *call) result {
	c.args[0], c.args[1] = "evalsha", c.script.sha
	cmd := noRetry{goredis.NewCmd(c.ctx, c.args...)}
	_ = s.client.Process(c.ctx, cmd)
	if err := cmd.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		c.args[0], c.args[1] = "eval", c.script.src
		cmd = noRetry{goredis.NewCmd(c.ctx, c.args...)}
		_ = s.client.Process(c.ctx, cmd)
	}
	return answer(cmd, c.limit)
}

func answer(cmd noRetry, limit int64) result {
	reply, err := cmd.Text()
	if err != nil {
		return result{err: unavailable(err)}
	}
	d, err := decode(reply, limit)
	return result{d: d, err: err}
}
