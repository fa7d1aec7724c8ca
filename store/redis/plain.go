package redis

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// Counters (WithCounters): the fixed and sliding windows kept as plain integer counters, one
// key per window or sub-window ("<key>:f:<length ns>:<index>", ":s:" for the sliding window's
// sub-windows; the key's hash tag, so one slot), decided without Lua. A decision is one
// pipeline: TIME (with the server clock), INCRBY of the request's units on the current
// counter with PEXPIRE NX (its TTL when it is new), and MGET of the sliding window's other
// sub-windows; then package algorithm decides on the counts as they were before the INCRBY
// (the same FixedWindow and SlidingWindow code the memory store runs), and whatever the
// decision did not take is given back in a second pipeline: a denied take's units (DECRBY),
// a settle's units past its debt bound, a refund. Concurrent decisions share the pipelines
// of the combiner (combine.go), as script calls do, with one TIME per pipeline.
//
// What a decision sees: the counts of every INCRBY before its own, including those of
// concurrent requests that will be denied and give their units back. So an admitted request
// always fitted (nothing is over-admitted), and a request may be denied while a concurrent
// denied request's units are counted, until its give-back lands (one round trip): a denial
// under contention that a script would not give, never an extra admission. With
// --count-denied (sluice.DeniedCounter) a denied take's units stay, as envoyproxy/ratelimit's
// INCRBY does, and nothing is given back.
//
// The window of a decision is chosen before its pipeline is sent, from the client's clock
// corrected by the offset to the server's clock measured on earlier pipelines (a TIME reply
// against the middle of its round trip). A pipeline reads TIME again when that measure is
// older than 100 ms or a decision falls within its error (1 ms and two round trips) of a
// window's start or end; its decisions are then made at the server's TIME, and one whose
// window was not the server's gives its units back and is made again. Elsewhere a decision is
// made at the estimate: its window is the server's, and its instant (which weighs the
// previous sub-window, and sets RetryAfter and ResetAfter) is the server's clock to within
// half a round trip, where a script reads TIME exactly. With WithClock the client's time is
// the decision's, and no TIME is sent.
//
// Where counters differ from the scripts' states (each a deliberate cost of deciding without
// a read-modify-write, as on the memcached store's counters; docs/ALGORITHMS.md): a change of a rule's period (or sub-window count)
// starts counting in the new rule's windows at once, from their own counts, instead of
// carrying the old window over; a clock that goes back counts in the earlier window's
// counter (the scripts stay in the newest window); and a key decided under another
// algorithm and back within one window finds its window's count again (the scripts start
// from full). Timed-out or failed pipelines are never retried: their INCRBY may have landed,
// and it then stays counted until its window ends.

// plainOp is one window decision made without Lua.
type plainOp struct {
	req     sluice.Request
	p       *algorithm.Params
	sliding bool
	length  int64 // the window's, or the sub-window's, length (ns)
	count   int   // counters read: 1, or the sliding window's N+1
	now     int64 // the instant decided at (Unix ns), estimated until the server's TIME
	idx     int64 // the window of now
	delta   int64 // the units added by the pipeline's INCRBY (0: GET)
	keys    []string
	tries   int
	// countDenied: a denied take is charged all the same (Store.TakeCountingDenied)
	countDenied bool
	// the pipeline's commands
	cur, others *goredis.Cmd
	// storage that saves allocations for up to inlineCounters counters (the default sliding
	// window reads 2): the keys, their arguments, the counts
	keyBuf  [inlineCounters]string
	argv    [3 + 2*inlineCounters]any
	seenBuf [inlineCounters]int64
	ringBuf [inlineCounters]int64
	res     result // the answer on the direct path (call.answer)
}

// inlineCounters is how many counters a plainOp holds without allocating more.
const inlineCounters = 4

// isCounted reports whether a rule's algorithm is kept in counters under WithCounters.
func isCounted(a sluice.Algorithm) bool {
	return a == sluice.AlgorithmFixedWindow || a == sluice.AlgorithmSlidingWindow
}

// counterKeys sets op.keys to the keys of its counters, windows op.idx down to
// op.idx-count+1: "<Key(key)>:f:<length ns>:<index>" (":s:" for a sliding window), all in one
// string (and the key's hash-tagged form).
func (op *plainOp) counterKeys(s *Store) {
	kind := ":f:"
	if op.sliding {
		kind = ":s:"
	}
	base := s.Key(op.req.Key)
	buf := make([]byte, 0, op.count*(len(base)+len(kind)+42))
	op.keys = op.keyBuf[:0]
	var ends [inlineCounters]int
	end := ends[:0]
	for j := range op.count {
		buf = append(buf, base...)
		buf = append(buf, kind...)
		buf = strconv.AppendInt(buf, op.length, 10)
		buf = append(buf, ':')
		buf = strconv.AppendInt(buf, op.idx-int64(j), 10)
		end = append(end, len(buf))
	}
	all := string(buf)
	from := 0
	for _, to := range end {
		op.keys = append(op.keys, all[from:to])
		from = to
	}
}

// initPlainOp sets op to req's decision without Lua, at now (Unix ns).
func (s *Store) initPlainOp(op *plainOp, req *sluice.Request, now int64) {
	*op = plainOp{req: *req, p: s.params.Get(req.Rule), sliding: req.Rule.Algorithm == sluice.AlgorithmSlidingWindow}
	shape := algorithm.WindowShape(req.Rule)
	op.length, op.count = shape.Length, int(shape.Count)
	op.at(s, now)
}

// at sets the instant decided at, its window and the counters' keys.
func (op *plainOp) at(s *Store, now int64) {
	op.now, op.idx = now, algorithm.WindowIndex(now, op.length)
	op.counterKeys(s)
	switch op.req.Kind() {
	case sluice.KindTake, sluice.KindWait, sluice.KindTakeHoldback, sluice.KindSettle:
		op.delta = max(0, op.req.N) // a settle's refund gives back through the adjustment
	default:
		op.delta = 0
	}
}

// ttl is how long counter j of op must live: until its window has left the last decision
// that reads it, plus SLACK (lua/prelude.lua); with a client clock, at least
// clientClockMinTTL, as the scripts' keys.
func (op *plainOp) ttl(s *Store, j int) int64 {
	until := (op.idx - int64(j) + int64(op.count)) * op.length
	ms := (until-op.now)/int64(time.Millisecond) + 1 + slackMs
	if s.cfg.clock != nil {
		ms = max(ms, clientClockMinTTL.Milliseconds())
	}
	return ms
}

// slackMs is how long a counter may outlive what it counts (lua/prelude.lua's SLACK).
const slackMs = 1000

// queue adds op's commands to pipe.
func (op *plainOp) queue(ctx context.Context, s *Store, pipe goredis.Pipeliner) {
	// the arguments: the commands' names and values, each key boxed once
	argv := op.argv[:]
	if len(op.keys) > inlineCounters {
		argv = make([]any, 3+2*len(op.keys))
	}
	key := any(op.keys[0])
	if op.delta != 0 {
		argv[0], argv[1], argv[2] = "incrby", key, op.delta
		op.cur = goredis.NewCmd(ctx, argv[0:3]...)
		_ = pipe.Process(ctx, noRetry{op.cur})
		argv[3], argv[4], argv[5], argv[6] = "pexpire", key, op.ttl(s, 0), "nx"
		_ = pipe.Process(ctx, noRetry{goredis.NewCmd(ctx, argv[3:7]...)})
	} else {
		argv[0], argv[1] = "get", key
		op.cur = goredis.NewCmd(ctx, argv[0:2]...)
		_ = pipe.Process(ctx, op.cur)
	}
	op.others = nil
	if len(op.keys) > 1 {
		m := argv[7 : 7+len(op.keys)]
		m[0] = "mget"
		for j, k := range op.keys[1:] {
			m[1+j] = k
		}
		op.others = goredis.NewCmd(ctx, m...)
		_ = pipe.Process(ctx, op.others)
	}
}

// adjust is a counter change that a decision gives back (or applies: a refund).
type adjust struct {
	key   string
	delta int64
	ttl   int64
}

// decide makes op's decision on the counts its pipeline read, at op.now, and appends to adj
// what it gives back (or, for a refund, applies). With countDenied, a denied take's units
// are charged all the same (sluice.DeniedCounter): they stay counted.
func (op *plainOp) decide(s *Store, adj []adjust) (sluice.Decision, []adjust, error) {
	cur, err := counterValue(op.cur)
	if err != nil {
		return sluice.Decision{}, adj, err
	}
	var others []any
	if op.others != nil {
		if others, err = op.others.Slice(); err != nil {
			return sluice.Decision{}, adj, err
		}
	}
	seen := op.seenBuf[:] // counter j as read (0: after the INCRBY)
	if op.count > inlineCounters {
		seen = make([]int64, op.count)
	}
	seen = seen[:op.count]
	seen[0] = cur
	for j, v := range others {
		if seen[j+1], err = counterValue(v); err != nil {
			return sluice.Decision{}, adj, err
		}
	}
	var st algorithm.State
	var fw algorithm.FixedWindow
	var sw algorithm.SlidingWindow
	if op.sliding {
		ring := op.ringBuf[:]
		if op.count > inlineCounters {
			ring = make([]int64, op.count)
		}
		sw = algorithm.SlidingWindow{Counts: ring[:op.count], Newest: op.idx, Sub: op.length}
		for j, c := range seen {
			if j == 0 {
				c -= op.delta
			}
			sw.Counts[algorithm.RingIndex(op.idx-int64(j), int64(op.count))] = max(0, c)
		}
		st = &sw
	} else {
		fw = algorithm.FixedWindow{End: (op.idx + 1) * op.length, Count: max(0, cur-op.delta)}
		st = &fw
	}
	d, _ := algorithm.Apply(st, op.now, op.p, &op.req) // no budget step: never an error
	if op.countDenied && !d.Allowed && op.req.Kind().Takes() {
		charge := sluice.Request{Key: op.req.Key, Rule: op.req.Rule, N: min(op.req.N, sluice.MaxLimit), Settle: true}
		_, _ = algorithm.Apply(st, op.now, op.p, &charge)
	}
	if d.Allowed && d.Remaining == 0 && op.req.Kind() != sluice.KindSettle && op.req.N > 0 {
		// when the next unit frees: a take of one on a copy of the state
		var next sluice.Decision
		if op.sliding {
			next = sw.Clone().Take(op.now, op.p, 1, 0)
		} else {
			cp := fw
			next = cp.Take(op.now, op.p, 1, 0)
		}
		if !next.Allowed && next.RetryAfter > 0 {
			d.NextAfter = next.RetryAfter
		}
	}
	for j, c := range seen {
		want := fw.Count
		if op.sliding {
			want = sw.Counts[algorithm.RingIndex(op.idx-int64(j), int64(op.count))]
		}
		if want != c && (j == 0 || want != max(0, c)) {
			adj = append(adj, adjust{key: op.keys[j], delta: want - c, ttl: op.ttl(s, j)})
		}
	}
	return d, adj, nil
}

// counterValue reads a counter from a reply: an integer, or nil for a missing key (0).
func counterValue(v any) (int64, error) {
	if c, ok := v.(*goredis.Cmd); ok {
		x, err := c.Result()
		if err == goredis.Nil {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		v = x
	}
	switch x := v.(type) {
	case nil:
		return 0, nil
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, errCounter
}

var (
	errCounter     = errors.New("redis: counter: not an integer")
	errWindowMoved = errors.New("redis: counters: the server's clock kept falling in another window than the one chosen")
)

// serverOffset is the store's estimate of the server's clock minus the client's, from the
// TIME replies of its pipelines.
type serverOffset struct {
	ns     atomic.Int64 // the offset
	synced atomic.Int64 // when it was measured last (the client's Unix ns; 0: never)
	rtt    atomic.Int64 // the round trip it was measured on (ns)
}

// syncEvery is how old the estimate may be before a pipeline asks the server's TIME again.
const syncEvery = 100 * time.Millisecond

// now is the client's clock corrected by the estimate.
func (o *serverOffset) now() int64 { return time.Now().UnixNano() + o.ns.Load() }

// needsTime reports whether a decision at the estimated server time now, in windows of
// length, must read the server's TIME: when the estimate is missing or older than syncEvery,
// or now is within its error (1 ms plus twice the last round trip) of a window's start or
// end. Elsewhere the estimate picks the server's window for sure, and the decision is made
// at the estimate.
func (o *serverOffset) needsTime(now, length int64) bool {
	synced := o.synced.Load()
	if synced == 0 || time.Now().UnixNano()-synced > int64(syncEvery) {
		return true
	}
	margin := int64(time.Millisecond) + 2*o.rtt.Load()
	pos := now - algorithm.WindowIndex(now, length)*length
	return pos < margin || length-pos < margin
}

// observe records a TIME reply srv read during a round trip from sent to got.
func (o *serverOffset) observe(srv time.Time, sent, got time.Time) {
	mid := sent.UnixNano() + got.Sub(sent).Nanoseconds()/2
	o.ns.Store(srv.UnixNano() - mid)
	o.rtt.Store(got.Sub(sent).Nanoseconds())
	o.synced.Store(got.UnixNano())
}

// plainBatch is the decisions without Lua of one pipeline.
type plainBatch struct {
	calls     []*call
	time      *goredis.TimeCmd // the server's clock; nil with WithClock
	sent, got time.Time
}

// add queues c's commands on pipe, its window chosen at the server's time as the store
// estimates it now; the pipeline reads the server's TIME too when that estimate may pick the
// wrong window (serverOffset.needsTime), and then every call of it decides at that time.
func (pb *plainBatch) add(ctx context.Context, s *Store, pipe goredis.Pipeliner, c *call) {
	op := c.plain
	if s.cfg.clock == nil {
		now := s.offset.now()
		if algorithm.WindowIndex(now, op.length) == op.idx {
			op.now = now
		} else {
			op.at(s, now)
		}
		if pb.time == nil && s.offset.needsTime(now, op.length) {
			pb.time = pipe.Time(ctx)
		}
	}
	op.queue(ctx, s, pipe)
	pb.calls = append(pb.calls, c)
}

// maxPlainTries bounds how often a decision is made again because the server's clock fell in
// another window than the one chosen.
const maxPlainTries = 3

// finishPlain decides the calls of pb, whose pipeline was sent, gives back what they did not
// take, and answers them; a call whose window was not the server's is decided again in a
// pipeline of its own.
func (s *Store) finishPlain(ctx context.Context, pb *plainBatch) {
	type answer struct {
		c *call
		r result
	}
	for {
		var srv int64
		if pb.time != nil {
			t, err := pb.time.Result()
			if err != nil {
				for _, c := range pb.calls {
					c.answer(result{err: unavailable(err)})
				}
				return
			}
			s.offset.observe(t, pb.sent, pb.got)
			srv = t.UnixNano()
		}
		var adj []adjust
		var redo []*call
		var inline [4]answer
		answers := inline[:0]
		for _, c := range pb.calls {
			op := c.plain
			if err := op.cur.Err(); err != nil && err != goredis.Nil {
				answers = append(answers, answer{c, result{err: unavailable(err)}})
				continue
			}
			if pb.time != nil {
				if algorithm.WindowIndex(srv, op.length) != op.idx {
					if op.delta != 0 {
						adj = append(adj, adjust{key: op.keys[0], delta: -op.delta, ttl: op.ttl(s, 0)})
					}
					if op.tries++; op.tries < maxPlainTries {
						redo = append(redo, c)
					} else {
						answers = append(answers, answer{c, result{err: unavailable(errWindowMoved)}})
					}
					continue
				}
				op.now = srv
			}
			d, a, err := op.decide(s, adj)
			adj = a
			if err != nil {
				err = unavailable(err)
			}
			answers = append(answers, answer{c, result{d: d, err: err}})
		}
		s.adjust(ctx, adj)
		for _, a := range answers {
			a.c.answer(a.r)
		}
		if len(redo) == 0 {
			return
		}
		next := plainBatch{}
		pipe := s.pipeline()
		for _, c := range redo {
			next.add(ctx, s, pipe, c)
		}
		next.sent = time.Now()
		_, _ = pipe.Exec(ctx)
		next.got = time.Now()
		s.pipes.Put(pipe)
		*pb = next
	}
}

// adjust applies the counter changes adj in one pipeline, each with its TTL should its key be
// gone. A change that fails is not retried: a give-back lost leaves its units counted until
// their window ends (the scripts' timed-out calls may leave as much).
func (s *Store) adjust(ctx context.Context, adj []adjust) {
	if len(adj) == 0 {
		return
	}
	pipe := s.pipeline()
	defer s.pipes.Put(pipe)
	for _, a := range adj {
		_ = pipe.Process(ctx, noRetry{goredis.NewCmd(ctx, "incrby", a.key, a.delta)})
		_ = pipe.Process(ctx, noRetry{goredis.NewCmd(ctx, "pexpire", a.key, a.ttl, "nx")})
	}
	_, _ = pipe.Exec(ctx)
}

// runPlain decides c on its own (the direct path).
func (s *Store) runPlain(c *call) result {
	var pb plainBatch
	pipe := s.pipeline()
	pb.add(c.ctx, s, pipe, c)
	pb.sent = time.Now()
	_, _ = pipe.Exec(c.ctx)
	pb.got = time.Now()
	s.pipes.Put(pipe)
	s.finishPlain(c.ctx, &pb)
	return c.plain.res
}

// answer gives c its result: into its channel, or, on the direct path (no channel), to its
// caller through c.plain.
func (c *call) answer(r result) {
	if c.done == nil {
		c.plain.res = r
		return
	}
	c.done <- r
}

// pipeline returns a pipeline of the store's client, from its pool (see Store.pipes).
func (s *Store) pipeline() goredis.Pipeliner {
	if p, ok := s.pipes.Get().(goredis.Pipeliner); ok {
		return p
	}
	return s.client.Pipeline()
}

// plainScript stands for the decisions without Lua in the combiner's grouping: each goes
// alone (no batched variant), and a key is decided by one "script" per pipeline.
var plainScript = &script{name: "counters"}

var _ sluice.DeniedCounter = (*Store)(nil)

// TakeCountingDenied implements sluice.DeniedCounter: with WithCounters, a window's denied
// take keeps the units its INCRBY added (envoyproxy/ratelimit's own command, with nothing
// given back); otherwise a take and, when it is denied, a settle of its units.
func (s *Store) TakeCountingDenied(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if !s.cfg.counters || !isCounted(req.Rule.Algorithm) || !req.Kind().Takes() {
		d, err := s.Take(ctx, req)
		if err != nil || d.Allowed || !req.Kind().Takes() {
			return d, err
		}
		return d, sluice.ChargeDenied(ctx, s, req)
	}
	return s.take(ctx, &req, true)
}
