package redis

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
)

// call is one decision waiting for a pipeline.
type call struct {
	ctx      context.Context // the caller's (on the direct path, bounded by the store's timeout)
	deadline time.Time       // the caller's wait ends by then: now + the store's timeout
	script   *script
	args     []any // "evalsha"/"eval", sha/source, 1, key, ARGV...
	limit    int64
	done     chan result // buffered: a leader never blocks on a caller that gave up
	state    uint8       // queued, taken or leading (see combine.go), guarded by Store.mu
	plain    *plainOp    // non-nil: decided without Lua (WithCounters, plain.go)
}

type result struct {
	d    sluice.Decision
	err  error
	lead *batcher // non-nil: no answer yet, the caller's turn to lead a pipeline with it
}

// noRetry marks script calls so go-redis never sends them twice: a call whose reply was
// lost may have committed.
type noRetry struct{ *goredis.Cmd }

func (noRetry) NoRetry() bool { return true }

// exec decides the live calls of batch and answers every caller: it groups them (see
// batcher.group), sends each group of several calls as one call of its script's batched
// variant and every other call on its own, all in one pipeline, then those that met NOSCRIPT
// again with EVAL (a script that was not found did not run). A key decided under two
// algorithms in one batch has its later calls sent in a second pipeline (batcher.split), so
// that a NOSCRIPT resend never reorders one key's decisions. A batched call that fails (an
// error reply, a timeout, a lost connection) fails every decision in it with
// sluice.ErrStoreUnavailable, never "allowed"; as with a single script that timed out, the
// keys before the failure may have been decided and committed.
func (s *Store) exec(batch []*call, b *batcher) {
	live := batch[:0]
	now := time.Now()
	var deadline time.Time
	for _, c := range batch {
		switch err := c.ctx.Err(); {
		case err != nil: // a caller that gave up is not decided for
			c.done <- result{err: unavailable(err)}
		case !now.Before(c.deadline): // nor one whose time is up
			c.done <- result{err: unavailable(context.DeadlineExceeded)}
		default:
			live = append(live, c)
			if deadline.IsZero() || c.deadline.Before(deadline) {
				deadline = c.deadline
			}
		}
	}
	if len(live) == 0 {
		return
	}
	// The pipeline ends by the first deadline of its calls, so that no caller waits longer
	// than its timeout for its answer, with no timer of its own (the client bounds its I/O by
	// the context: Store.bounded), and a queued call waits for a worker no longer than the
	// pipelines ahead of it, which end by their earlier deadlines.
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	for len(live) > 0 {
		var later []*call
		if !sameScript(live) {
			live, later = b.split(live)
		}
		s.send(ctx, live, b)
		live = later
	}
}

// send decides calls in one pipeline, bounded by ctx, and answers every caller.
func (s *Store) send(ctx context.Context, live []*call, b *batcher) {
	groups := b.group(live, s.batching)
	pipe := s.client.Pipeline()
	var pb plainBatch
	for i := range groups {
		g := &groups[i]
		if g.calls[0].plain != nil {
			pb.add(ctx, s, pipe, g.calls[0])
			continue
		}
		if len(g.calls) == 1 {
			c := g.calls[0]
			c.args[0], c.args[1] = "evalsha", c.script.sha
			g.args = c.args
		} else {
			n := len(b.args)
			b.args = multiArgs(g.calls, b.args)
			g.args = b.args[n:len(b.args):len(b.args)]
			s.batched.Add(int64(len(g.calls)))
		}
		g.cmd = noRetry{goredis.NewCmd(ctx, g.args...)}
		_ = pipe.Process(ctx, g.cmd)
	}
	pb.sent = time.Now()
	_, _ = pipe.Exec(ctx)
	pb.got = time.Now()
	var again goredis.Pipeliner
	for i := range groups {
		g := &groups[i]
		if g.cmd.Cmd == nil { // a decision without Lua
			continue
		}
		if err := g.cmd.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
			if again == nil {
				again = s.client.Pipeline()
			}
			g.args[0], g.args[1] = "eval", g.script().src
			g.cmd = noRetry{goredis.NewCmd(ctx, g.args...)}
			_ = again.Process(ctx, g.cmd)
		}
	}
	if again != nil {
		_, _ = again.Exec(ctx)
	}
	for i := range groups {
		g := &groups[i]
		if g.cmd.Cmd == nil {
			continue
		}
		if len(g.calls) == 1 {
			g.calls[0].done <- answer(g.cmd, g.calls[0])
			continue
		}
		reply, err := g.cmd.Text()
		if err == nil && len(reply) != 40*len(g.calls) {
			err = fmt.Errorf("batched script reply has %d bytes, want %d", len(reply), 40*len(g.calls))
		}
		for j, c := range g.calls {
			if err != nil {
				c.done <- result{err: unavailable(err)}
				continue
			}
			d, err := c.decode(reply[40*j : 40*j+40])
			c.done <- result{d: d, err: err}
		}
	}
	if len(pb.calls) > 0 {
		s.finishPlain(ctx, &pb)
	}
}

// multiArgs appends to args the batched call deciding calls, which share one script:
// "evalsha", its SHA, K, the K keys, the K packed parameters and, if the script takes one,
// the K extra arguments.
func multiArgs(calls []*call, args []any) []any {
	sc := calls[0].script
	args = append(args, "evalsha", sc.multi.sha, len(calls))
	for _, c := range calls {
		args = append(args, c.args[3])
	}
	for _, c := range calls {
		args = append(args, c.args[4])
	}
	if sc.extra {
		for _, c := range calls {
			args = append(args, c.args[5])
		}
	}
	return args
}

// run sends one call on its own, in the caller's goroutine, bounded by the call's context (the
// client honours it), with EVAL after NOSCRIPT (a script that was not found did not run).
func (s *Store) run(c *call) result {
	if c.plain != nil {
		return s.runPlain(c)
	}
	c.args[0], c.args[1] = "evalsha", c.script.sha
	cmd := noRetry{goredis.NewCmd(c.ctx, c.args...)}
	_ = s.client.Process(c.ctx, cmd)
	if err := cmd.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
		c.args[0], c.args[1] = "eval", c.script.src
		cmd = noRetry{goredis.NewCmd(c.ctx, c.args...)}
		_ = s.client.Process(c.ctx, cmd)
	}
	return answer(cmd, c)
}

func answer(cmd noRetry, c *call) result {
	reply, err := cmd.Text()
	if err != nil {
		return result{err: unavailable(err)}
	}
	d, err := c.decode(reply)
	return result{d: d, err: err}
}

// decode turns the call's reply into its Decision (see decode): a window's script answers
// NextAfter where the others answer Delay (lua/prelude.lua).
func (c *call) decode(reply string) (sluice.Decision, error) {
	if len(reply) == 1 && c.script.budgetStep {
		return sluice.Decision{}, budgetError(reply)
	}
	d, err := decode(reply, c.limit)
	if c.script.next {
		d.NextAfter, d.Delay = d.Delay, 0
	}
	return d, err
}
