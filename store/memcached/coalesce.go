package memcached

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// laneShards is the number of locks the lanes are spread over.
const laneShards = 64

// A lane exists while decisions on one key are under way in this process (a nil lane until
// a second one queues): the one making a
// round (the leader) and the calls queued behind it. When its round is done, the leader hands
// the queue (up to WithMaxBatch calls) to the first of them, which makes the next round for
// all of them; the lane disappears when nobody is left. So a hot key costs one round per
// batch, not one per decision, and every caller makes at most one round.
type lane struct{ pending []*call }

type laneShard struct {
	mu    sync.Mutex
	m     map[string]*lane
	memos map[memoKey]*memo // what the store remembers of window counters (counters.go)
}

// call is one decision: its request, and its outcome once decided.
type call struct {
	req   sluice.Request
	p     *algorithm.Params
	d     sluice.Decision
	err   error
	state atomic.Int32  // queued, taken or abandoned (calls waiting in a lane)
	done  chan struct{} // closed when decided, or when promoted to lead (batch set)
	batch []*call       // the calls this one leads, itself first
	one   [1]*call      // the batch of a call that leads alone
}

const (
	queued int32 = iota
	taken
	abandoned
)

// Take implements sluice.Store: the request is validated, then decided in a round of its own
// or, when other decisions on the key are under way in this process, in the next round of
// the key, together with the calls queued with it (see the package doc).
func (s *Store) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if err := req.Validate(s.cfg.maxKeyLen); err != nil {
		return sluice.Decision{}, err
	}
	if s.closed.Load() {
		return sluice.Decision{}, fmt.Errorf("memcached: take: %w", sluice.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return sluice.Decision{}, unavailable(err)
	}
	c := &call{req: req, p: s.rules.Get(req.Rule)}
	sh := &s.lanes[maphash.String(s.seed, req.Key)%laneShards]
	sh.mu.Lock()
	ln, busy := sh.m[req.Key]
	if !busy {
		sh.m[req.Key] = nil // a lane with nobody queued yet
		sh.mu.Unlock()
		c.one[0] = c
		s.lead(sh, c.one[:])
		return c.d, c.err
	}
	if ln == nil {
		ln = &lane{}
		sh.m[req.Key] = ln
	}
	c.done = make(chan struct{})
	ln.pending = append(ln.pending, c)
	sh.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		if c.state.CompareAndSwap(queued, abandoned) {
			return sluice.Decision{}, unavailable(ctx.Err())
		}
		<-c.done // taken into a round, which its own deadline bounds
	}
	if c.batch != nil {
		s.lead(sh, c.batch)
	}
	return c.d, c.err
}

// lead makes one round for batch (whose first call is the caller's), answers the others, and
// hands the key's queue to its next leader or removes the lane.
func (s *Store) lead(sh *laneShard, batch []*call) {
	key := batch[0].req.Key
	s.round(sh, key, batch, time.Now().Add(s.cfg.timeout))
	for _, c := range batch[1:] {
		close(c.done)
	}
	sh.mu.Lock()
	ln := sh.m[key]
	var next []*call
	for ln != nil && len(ln.pending) > 0 && len(next) < s.cfg.maxBatch {
		c := ln.pending[0]
		ln.pending[0] = nil
		ln.pending = ln.pending[1:]
		if c.state.CompareAndSwap(queued, taken) {
			next = append(next, c)
		}
	}
	if len(next) == 0 {
		delete(sh.m, key)
	}
	sh.mu.Unlock()
	if len(next) > 0 {
		next[0].batch = next
		close(next[0].done)
	}
}

// round decides batch, the calls on one key in queue order, at one instant: consecutive calls
// of the counter algorithms that take units under one rule share one increment, consecutive
// calls of the other algorithms and budget steps (of any algorithm: a budget key's state and
// reservations live in its state item) one gets/cas round, and anything else goes on its own.
func (s *Store) round(sh *laneShard, key string, batch []*call, deadline time.Time) {
	now, latest := s.now()
	b := base{s.cfg.prefix, body(s.cfg.prefix, key)}
	for i := 0; i < len(batch); {
		c, j := batch[i], i+1
		if counted(c.req.Rule.Algorithm) && !c.req.Kind().Budget() {
			if increments(c) {
				for j < len(batch) && increments(batch[j]) && batch[j].req.Rule == c.req.Rule {
					j++
				}
			}
			s.countRound(sh, key, b, batch[i:j], now, latest)
		} else {
			for j < len(batch) && (!counted(batch[j].req.Rule.Algorithm) || batch[j].req.Kind().Budget()) {
				j++
			}
			s.casRound(b, batch[i:j], now, deadline)
		}
		i = j
	}
	for _, c := range batch {
		if c.err == nil {
			s.stats.decisions.Add(1)
		}
	}
}
