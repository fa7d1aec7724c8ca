package redis

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// Store is the Redis store. It is safe for concurrent use. Build it with New or NewFromURL and
// Close it when done.
type Store struct {
	client goredis.UniversalClient
	owned  bool      // Close closes client (NewFromURL)
	redial *redialer // the client's Dialer (NewFromURL, a single Redis or Sentinel), stopped by Close
	cfg    config

	bounded  bool         // the client bounds its I/O by the context's deadline (honoursContext)
	direct   bool         // bounded: an idle store lets callers send their own call
	batching batching     // how several decisions may share one script call
	active   atomic.Int64 // decisions under way (direct, queued or in a pipeline)
	batched  atomic.Int64 // decisions made by batched script calls (for tests)

	// The combining of concurrent decisions into pipelines (combine.go).
	mu      sync.Mutex
	queued  []*call    // calls waiting for a pipeline, oldest first
	leaders int        // pipelines under way or about to be (at most maxInFlight)
	free    []*batcher // the memory of the leaders that are done
	shut    bool       // Close has begun: nothing more is queued
	idle    sync.Cond  // signalled when leaders drops to 0

	closed    atomic.Bool
	closeOnce sync.Once

	// WithCounters (plain.go)
	params algorithm.ParamsCache
	offset serverOffset // the server's clock minus the client's
	pipes  sync.Pool    // pipelines of client, empty, to reuse (a pipeline empties on Exec)
}

var _ sluice.Store = (*Store)(nil)

// New returns a Store deciding on client, which may be a *goredis.Client (single node or
// Sentinel failover client), a *goredis.ClusterClient or any other UniversalClient. The Store
// does not contact Redis until the first decision and does not close client. Script calls are
// never retried whatever the client's MaxRetries (a call that timed out may have committed);
// other commands keep the client's settings. Give the client ContextTimeoutEnabled: true so a
// stuck server holds a pipeline no longer than the store's timeout (callers never wait longer
// than their timeout either way). After PoolSize failed dials, go-redis's pool stops dialing
// and re-dials once a second, so decisions on a client of your own come back up to a second
// after a restarted Redis does; NewFromURL's single-node clients re-dial every 10 ms.
func New(client goredis.UniversalClient, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("redis: New: client is nil")
	}
	cfg := config{
		timeout:     DefaultTimeout,
		prefix:      DefaultPrefix,
		maxBatch:    DefaultMaxBatch,
		maxInFlight: DefaultMaxInFlight,
	}
	for _, o := range opts {
		o.apply(&cfg)
	}
	switch {
	case cfg.timeout <= 0:
		return nil, fmt.Errorf("redis: WithTimeout: must be positive, got %v", cfg.timeout)
	case strings.ContainsAny(cfg.prefix, "{}"):
		return nil, fmt.Errorf("redis: WithPrefix: must not contain '{' or '}', got %q", cfg.prefix)
	case cfg.maxKeyLen < 0:
		return nil, fmt.Errorf("redis: WithMaxKeyLength: must not be negative, got %d", cfg.maxKeyLen)
	case cfg.maxBatch <= 0 || cfg.maxBatch > maxMaxBatch:
		return nil, fmt.Errorf("redis: WithMaxBatch: must be in [1, %d], got %d", maxMaxBatch, cfg.maxBatch)
	case cfg.maxDelay < 0:
		return nil, fmt.Errorf("redis: WithMaxBatchDelay: must not be negative, got %v", cfg.maxDelay)
	case cfg.maxInFlight <= 0 || cfg.maxInFlight > maxMaxInFlight:
		return nil, fmt.Errorf("redis: WithMaxInFlight: must be in [1, %d], got %d", maxMaxInFlight, cfg.maxInFlight)
	case cfg.counters && batchingOf(client) == batchNone:
		return nil, errors.New("redis: WithCounters: needs a *goredis.Client or a *goredis.ClusterClient")
	case cfg.counters && batchingOf(client) == batchBySlot && cfg.clock == nil:
		return nil, errors.New("redis: WithCounters: on a Redis Cluster, only with WithClock (the server's TIME must come from each key's node)")
	}
	s := &Store{
		bounded:  honoursContext(client),
		direct:   honoursContext(client) && !cfg.noDirect,
		batching: batchingOf(client),
		client:   client,
		cfg:      cfg,
	}
	s.idle.L = &s.mu
	return s, nil
}

// Client returns the store's go-redis client.
func (s *Store) Client() goredis.UniversalClient { return s.client }

// Key returns the Redis key holding a user key's state.
func (s *Store) Key(userKey string) string { return redisKey(s.cfg.prefix, userKey) }

// Take implements sluice.Store: one script call, bounded by ctx and the store's timeout. When
// no other decision is under way and the client bounds its I/O by the context, the caller
// sends the call itself; otherwise the call is coalesced with concurrent ones into a
// pipeline, and a batched script call (see exec), which one of their callers sends (see
// combine.go).
func (s *Store) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	return s.take(ctx, &req, false)
}

// take is Take, and with countDenied a window's take under WithCounters that keeps its units
// when denied (TakeCountingDenied).
func (s *Store) take(ctx context.Context, req *sluice.Request, countDenied bool) (sluice.Decision, error) {
	if err := req.Validate(s.cfg.maxKeyLen); err != nil {
		return sluice.Decision{}, err
	}
	if s.closed.Load() {
		return sluice.Decision{}, fmt.Errorf("redis: take: %w", sluice.ErrClosed)
	}
	if s.direct && s.active.CompareAndSwap(0, 1) {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.timeout)
		r := s.run(s.newCall(ctx, req, countDenied))
		cancel()
		s.active.Add(-1)
		return r.d, r.err
	}
	s.active.Add(1)
	defer s.active.Add(-1)
	if !s.bounded {
		// The pipeline's I/O may outlast its deadline: the caller bounds its own wait.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.timeout)
		defer cancel()
	}
	// Otherwise no timer per call: the pipeline answers the call by its deadline (see exec).
	c := s.newCall(ctx, req, countDenied)
	c.done = make(chan result, 1)
	b, err := s.enqueue(c)
	if err != nil {
		return sluice.Decision{}, err
	}
	return s.wait(ctx, c, b)
}

// honoursContext reports whether client bounds every network wait by the context's deadline
// (ContextTimeoutEnabled), so that a caller may do its own I/O and still never wait longer
// than its timeout.
func honoursContext(client goredis.UniversalClient) bool {
	switch c := client.(type) {
	case *goredis.Client:
		return c.Options().ContextTimeoutEnabled
	case *goredis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

func (s *Store) newCall(ctx context.Context, req *sluice.Request, countDenied bool) *call {
	if req.Budget.Op != sluice.BudgetNone {
		return s.newBudgetCall(ctx, req, s.clockParams())
	}
	if s.cfg.counters && isCounted(req.Rule.Algorithm) {
		return s.newPlainCall(ctx, req, countDenied)
	}
	p := s.clockParams()
	if req.Kind() == sluice.KindTakeHoldback {
		return s.newHoldbackCall(ctx, req, p)
	}
	sc, p := scriptArgs(p, req)
	p = settleParam(p, req)
	args := []any{nil, nil, 1, s.Key(req.Key), []byte(p)}
	return &call{ctx: ctx, deadline: time.Now().Add(s.cfg.timeout), script: sc, args: args, limit: req.Rule.Capacity()}
}

// newPlainCall is newCall for a window kept in counters (WithCounters, plain.go).
func (s *Store) newPlainCall(ctx context.Context, req *sluice.Request, countDenied bool) *call {
	var now int64
	if s.cfg.clock != nil {
		now = s.cfg.clock.Now().UnixNano()
	} else {
		now = s.offset.now()
	}
	pc := &plainCall{}
	op := &pc.op
	s.initPlainOp(op, req, now)
	op.countDenied = countDenied
	pc.args = [4]any{nil, nil, 1, op.keys[0]}
	pc.c = call{ctx: ctx, deadline: time.Now().Add(s.cfg.timeout), script: plainScript,
		args: pc.args[:], limit: req.Rule.Capacity(), plain: op}
	return &pc.c
}

// plainCall is a call decided without Lua and its decision, in one allocation.
type plainCall struct {
	c    call
	op   plainOp
	args [4]any
}

// clockParams starts a script's parameters with its clock (lua/prelude.lua): the server's
// unless WithClock.
func (s *Store) clockParams() params {
	p := make(params, 0, paramsLen)
	if s.cfg.clock == nil {
		return p.add(0).add(0).add(0) // a shortest TTL of 0 asks for the server clock
	}
	ns := s.cfg.clock.Now().UnixNano()
	ms := ns / 1e6
	if ns%1e6 < 0 {
		ms--
	}
	return p.add(ms).add(ns - ms*1e6).add(clientClockMinTTL.Milliseconds())
}

// newHoldbackCall is newCall for a request with a criticality holdback: the algorithm's
// holdback variant, deciding a take of N + Holdback (or, in a fixed window, of N + the paced
// hold) and giving it back (lua/holdback.lua).
func (s *Store) newHoldbackCall(ctx context.Context, req *sluice.Request, p params) *call {
	take := *req
	take.N += req.Holdback
	sc, p := scriptArgs(p, &take)
	p = settleParam(p, &take)
	var pace int64 // the window a fixed window paces a class's share over (algorithm.TakeHoldback)
	if req.Rule.Algorithm == sluice.AlgorithmFixedWindow {
		pace = req.Rule.Period.Milliseconds()
	}
	args := []any{nil, nil, 1, s.Key(req.Key), []byte(p), "", req.Holdback, pace, req.Rule.Capacity()}
	return &call{ctx: ctx, deadline: time.Now().Add(s.cfg.timeout), script: sc.holdback, args: args, limit: req.Rule.Capacity()}
}

// newBudgetCall is newCall for a budget step (sluice.Request.Budget): the algorithm's budget
// variant (lua/budget.lua), deciding it on the key's state and its reservations, kept beside
// it in two keys of the same hash tag (budgetKeys). A budget key's state is always a script's,
// WithCounters or not.
func (s *Store) newBudgetCall(ctx context.Context, req *sluice.Request, p params) *call {
	body := *req
	body.N = 0 // each call of the body passes its own
	sc, p := scriptArgs(p, &body)
	for len(p) < paramsLen-8 {
		p = p.add(0)
	}
	p = p.add(algorithm.BudgetDebt(req.Rule))
	b := &req.Budget
	length, count := algorithm.ChargeWindows(req.Rule)
	key := s.Key(req.Key)
	holds, expiries := budgetKeys(key)
	capacity := req.Rule.Capacity()
	step := make(params, 0, 9*8).add(int64(b.Op)).add(req.N).add(b.TTLFor(req.Rule).Milliseconds()).
		add(b2i(b.Mode == sluice.Strict)).add(b2i(b.FreeOnExpiry)).add(length / int64(time.Millisecond)).
		add(count).add(capacity).add(sluice.MaxOpenReservations)
	args := []any{nil, nil, 3, key, holds, expiries, []byte(p), "", []byte(step), b.ID[:]}
	return &call{ctx: ctx, deadline: time.Now().Add(s.cfg.timeout), script: sc.budget, args: args, limit: capacity}
}

// budgetKeys returns the keys of a budget key's open reservations beside its state key: a
// hash of their records and a sorted set of their expiries (lua/budget.lua).
func budgetKeys(key string) (holds, expiries string) { return key + ":holds", key + ":holds:exp" }

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// budgetError returns the error of a budget script's one-byte reply: 'N', a reservation not
// open; 'O', a reserve of an id already open.
func budgetError(reply string) error {
	switch reply {
	case "N":
		return algorithm.NoReservation
	case "O":
		return algorithm.ReservationOpen
	}
	return fmt.Errorf("redis: %w: budget script reply %q", sluice.ErrStoreUnavailable, reply)
}

// Close fails the decisions still queued with sluice.ErrClosed and waits for the pipelines
// under way, and closes the client when the store was built by NewFromURL. Decisions after
// Close fail with sluice.ErrClosed.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.shutdown()
		if s.redial != nil {
			s.redial.close()
		}
		if s.owned {
			err = s.client.Close()
		}
	})
	return err
}

// clientClockMinTTL is the shortest TTL of a key written with a client clock (WithClock),
// which need not run at the rate of the server's, which expires keys: a manual clock in tests
// moves in jumps, and the real time between two of its steps may exceed the state's life.
const clientClockMinTTL = time.Minute

func unavailable(err error) error {
	return fmt.Errorf("redis: %w: %w", sluice.ErrStoreUnavailable, err)
}

// maxDuration is the largest double below 2^63, where the scripts saturate durations (as
// package algorithm saturates at math.MaxInt64).
const maxDuration = 1<<63 - 1024

// decode turns a script's reply, five little-endian doubles (allowed, remaining, and
// retry-after, reset-after and delay in ns), into a Decision.
func decode(reply string, limit int64) (sluice.Decision, error) {
	if len(reply) != 40 {
		return sluice.Decision{}, fmt.Errorf("redis: %w: script reply has %d bytes, want 40", sluice.ErrStoreUnavailable, len(reply))
	}
	var n [5]int64
	for i := range n {
		x := math.Float64frombits(binary.LittleEndian.Uint64([]byte(reply[8*i : 8*i+8])))
		switch {
		case x >= maxDuration:
			n[i] = math.MaxInt64
		case x < 0:
			n[i] = -1
		default:
			n[i] = int64(x)
		}
	}
	d := sluice.Decision{
		Allowed:    n[0] == 1,
		Capacity:   limit,
		Remaining:  n[1],
		RetryAfter: time.Duration(n[2]),
		ResetAfter: time.Duration(n[3]),
		Delay:      time.Duration(n[4]),
	}
	if n[2] < 0 {
		d.RetryAfter = sluice.Never
	}
	return d, nil
}
