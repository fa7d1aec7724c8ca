package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// counterTable holds the window counters and instance heartbeats of sluice.WindowCounter and
// sluice.Heartbeater. Its zero value is ready to use. Expired entries are removed on
// access once the table has grown past twice its size at the last cleanup.
type counterTable struct {
	mu        sync.Mutex
	counters  map[windowKey]*windowCounter
	groups    map[string]map[string]int64 // group -> instance -> expiry (Unix ns)
	cleanedAt int                         // len(counters) after the last cleanup
}

type windowKey struct {
	key    string
	length time.Duration
	index  int64
}

type windowCounter struct {
	total   int64
	expires int64
}

var (
	_ sluice.WindowCounter = (*Store)(nil)
	_ sluice.Heartbeater   = (*Store)(nil)
)

// AddWindowCounts implements sluice.WindowCounter: it adds the deltas and fills in the totals
// under one lock, so a batch is atomic. Counters expire after their TTL.
func (s *Store) AddWindowCounts(_ context.Context, batch []sluice.WindowCounts) error {
	now := s.now()
	t := &s.counters
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counters == nil {
		t.counters = make(map[windowKey]*windowCounter)
	}
	for i := range batch {
		item := &batch[i]
		item.Err = item.Validate(s.maxKeyLen)
		if item.Err != nil {
			continue
		}
		for j, d := range item.Deltas {
			k := windowKey{item.Key, item.Length, item.First + int64(j)}
			c := t.counters[k]
			if c == nil || c.expires <= now {
				if d == 0 {
					item.Totals[j] = 0
					continue
				}
				c = &windowCounter{}
				t.counters[k] = c
			}
			c.total += d
			c.expires = now + int64(item.TTL)
			item.Totals[j] = c.total
		}
	}
	if len(t.counters) > 2*t.cleanedAt+64 {
		for k, c := range t.counters {
			if c.expires <= now {
				delete(t.counters, k)
			}
		}
		t.cleanedAt = len(t.counters)
	}
	return nil
}

// Heartbeat implements sluice.Heartbeater: it marks instance live in group for ttl and
// returns how many instances of the group are live.
func (s *Store) Heartbeat(_ context.Context, group, instance string, ttl time.Duration) (int, error) {
	if instance == "" {
		return 0, fmt.Errorf("%w: instance: empty", sluice.ErrInvalidKey)
	}
	if ttl <= 0 {
		return 0, fmt.Errorf("%w: ttl: must be positive, got %v", sluice.ErrInvalidRule, ttl)
	}
	now := s.now()
	t := &s.counters
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.groups == nil {
		t.groups = make(map[string]map[string]int64)
	}
	g := t.groups[group]
	if g == nil {
		g = make(map[string]int64)
		t.groups[group] = g
	}
	g[instance] = now + int64(ttl)
	for id, exp := range g {
		if exp <= now {
			delete(g, id)
		}
	}
	return len(g), nil
}
