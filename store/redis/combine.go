package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

// Concurrent decisions are combined into pipelines by their own callers, with no goroutine
// between a caller and the socket (flat combining). A caller that finds fewer than
// WithMaxInFlight pipelines under way leads one: it takes the calls queued so far (up to
// WithMaxBatch, its own first), sends them as one pipeline in its own goroutine and answers
// each. Other callers queue their call and park until their answer. A leader that is done,
// when calls are queued, passes its place to the oldest of them, which wakes and leads the
// next pipeline with whatever has queued up meanwhile; so under load each pipeline is sent by
// one of its own callers, and a decision costs one wake-up (its answer, or its turn to lead)
// instead of two hand-offs between goroutines.
//
// A caller never waits past its timeout: a leader sends its pipeline in its own goroutine only
// when the pipeline's deadline (the first of its calls', see exec) comes no later than its own
// context's, and when the client bounds its I/O by the context (Store.bounded); otherwise a
// goroutine sends it while the leader waits like the others. A caller that gives up while
// queued leaves the queue; one that gives up when its turn to lead has come passes the turn on.

// call states, guarded by Store.mu.
const (
	queued  uint8 = iota // in Store.queued
	taken                // in a pipeline (or answered by Close): it will be answered
	leading              // given the turn to lead (a batcher is on its way in done)
)

// enqueue queues c, or returns a batcher when c is to lead a pipeline (c is then not queued).
func (s *Store) enqueue(c *call) (*batcher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shut {
		return nil, fmt.Errorf("redis: take: %w", sluice.ErrClosed)
	}
	if s.leaders < s.cfg.maxInFlight {
		s.leaders++
		c.state = leading
		return s.batcherLocked(), nil
	}
	c.state = queued
	s.queued = append(s.queued, c)
	return nil, nil
}

func (s *Store) batcherLocked() *batcher {
	if n := len(s.free); n > 0 {
		b := s.free[n-1]
		s.free = s.free[:n-1]
		return b
	}
	return newBatcher(s.cfg.maxBatch)
}

// wait parks the caller of c until its answer, leading a pipeline when its turn comes (b
// non-nil: at once).
func (s *Store) wait(ctx context.Context, c *call, b *batcher) (sluice.Decision, error) {
	for {
		if b != nil {
			if s.inline(ctx, c) {
				s.lead(c, b)
				r := <-c.done // lead answered c
				return r.d, r.err
			}
			s.mu.Lock()
			c.state = taken // a goroutine answers it; abandon has nothing to pass on
			s.mu.Unlock()
			go s.lead(c, b)
			b = nil
		}
		select {
		case r := <-c.done:
			if r.lead != nil {
				b = r.lead
				continue
			}
			return r.d, r.err
		case <-ctx.Done():
			s.abandon(c)
			return sluice.Decision{}, unavailable(ctx.Err())
		}
	}
}

// inline reports whether the leader c may send its pipeline in its own goroutine: the client
// bounds its I/O by the pipeline's deadline, which comes no later than c's context's (the
// pipeline ends by c.deadline at the latest).
func (s *Store) inline(ctx context.Context, c *call) bool {
	if !s.bounded || s.cfg.noDirect {
		return false
	}
	d, ok := ctx.Deadline()
	return !ok || !d.Before(c.deadline)
}

// lead sends one pipeline, led by c: c and the calls queued so far (after waiting up to
// WithMaxBatchDelay for more), then passes the turn on.
func (s *Store) lead(c *call, b *batcher) {
	if s.cfg.maxDelay > 0 {
		if d := min(s.cfg.maxDelay, time.Until(c.deadline)); d > 0 {
			time.Sleep(d)
		}
	}
	s.mu.Lock()
	if s.shut {
		s.mu.Unlock()
		c.done <- result{err: fmt.Errorf("redis: take: %w", sluice.ErrClosed)}
		s.handOff(b)
		return
	}
	c.state = taken
	batch := append(b.batch[:0], c)
	n := min(len(s.queued), s.cfg.maxBatch-1)
	for _, q := range s.queued[:n] {
		q.state = taken
		batch = append(batch, q)
	}
	s.dequeueLocked(n)
	s.mu.Unlock()
	b.batch = batch
	s.exec(batch, b)
	clear(batch) // no call outlives its answer in the batcher
	s.handOff(b)
}

// dequeueLocked removes the first n queued calls.
func (s *Store) dequeueLocked(n int) {
	k := copy(s.queued, s.queued[n:])
	clear(s.queued[k:])
	s.queued = s.queued[:k]
}

// handOff gives the turn to lead, with b, to the oldest queued call, or frees it.
func (s *Store) handOff(b *batcher) {
	s.mu.Lock()
	if len(s.queued) == 0 || s.shut {
		s.leaders--
		s.free = append(s.free, b)
		if s.leaders == 0 {
			s.idle.Broadcast()
		}
		s.mu.Unlock()
		return
	}
	next := s.queued[0]
	next.state = leading
	s.dequeueLocked(1)
	s.mu.Unlock()
	next.done <- result{lead: b} // buffered, and empty: a queued call has had no answer
}

// abandon is a caller giving up on c: it leaves the queue, or passes its turn to lead on.
func (s *Store) abandon(c *call) {
	s.mu.Lock()
	switch c.state {
	case queued:
		for i, q := range s.queued {
			if q == c {
				n := copy(s.queued[i:], s.queued[i+1:])
				s.queued[i+n] = nil
				s.queued = s.queued[:i+n]
				break
			}
		}
		s.mu.Unlock()
	case leading:
		s.mu.Unlock()
		r := <-c.done // sent right after the state changed
		s.handOff(r.lead)
	default: // taken: the pipeline answers into the buffered channel
		s.mu.Unlock()
	}
}

// shutdown fails the queued calls with sluice.ErrClosed and waits until no pipeline is under
// way.
func (s *Store) shutdown() {
	s.mu.Lock()
	s.shut = true
	for _, c := range s.queued {
		c.state = taken
		c.done <- result{err: fmt.Errorf("redis: take: %w", sluice.ErrClosed)}
	}
	s.dequeueLocked(len(s.queued))
	for s.leaders > 0 {
		s.idle.Wait()
	}
	s.mu.Unlock()
}
