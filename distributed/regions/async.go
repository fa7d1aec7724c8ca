package regions

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/distributed"
)

// newAsync returns Async mode's store: distributed.Async over the regions' counts.
func newAsync(cfg *Config) (asyncStore, error) {
	c := &counts{timeout: max(cfg.Interval, 500*time.Millisecond), last: make(map[countKey]int64)}
	for _, r := range cfg.Regions {
		wc := r.Store.(sluice.WindowCounter)
		if r.Name == cfg.Region {
			c.own = wc
		} else {
			c.others = append(c.others, wc)
		}
	}
	opts := []distributed.Option{distributed.WithInterval(cfg.Interval), distributed.WithTimeout(c.timeout + cfg.Interval),
		distributed.WithMaxKeys(cfg.MaxKeys)}
	if cfg.Clock != nil {
		opts = append(opts, distributed.WithClock(cfg.Clock))
	}
	if cfg.Manual {
		opts = append(opts, distributed.WithManualSync())
	}
	return distributed.NewAsync(c, opts...)
}

// counts is the window counters of every region as one sluice.WindowCounter: a call adds
// its deltas to this region's counters, reads the same counters in every other region's
// store, and returns the sums. A region that does not answer within the timeout counts as
// it was last read (its admissions since are unseen: the overshoot Async mode allows).
type counts struct {
	own     sluice.WindowCounter
	others  []sluice.WindowCounter
	timeout time.Duration

	mu   sync.Mutex
	last map[countKey]int64 // each region's count of a window as last read
	gen  uint64
	seen map[countKey]uint64 // the sync that last read it, to forget old windows
}

type countKey struct {
	region int
	key    string
	length time.Duration
	window int64
}

// Take implements sluice.Store: Async mode counts windows, so the limits it decides are
// fixed or sliding windows; distributed.Async hands every other rule here, refused.
func (c *counts) Take(context.Context, sluice.Request) (sluice.Decision, error) {
	return sluice.Decision{}, &sluice.FieldError{Field: "algorithm", Err: fmt.Errorf(
		"regions: async mode counts windows: a global limit needs fixed_window or sliding_window (or escrow mode): %w", sluice.ErrInvalidRule)}
}

// AddWindowCounts implements sluice.WindowCounter over every region.
func (c *counts) AddWindowCounts(ctx context.Context, batch []sluice.WindowCounts) error {
	if err := c.own.AddWindowCounts(ctx, batch); err != nil {
		return err
	}
	reads := make([][]sluice.WindowCounts, len(c.others))
	errs := make([]error, len(c.others))
	var wg sync.WaitGroup
	for i, o := range c.others {
		read := make([]sluice.WindowCounts, len(batch))
		for j, w := range batch {
			read[j] = sluice.WindowCounts{Key: w.Key, Length: w.Length, First: w.First, TTL: w.TTL,
				Deltas: make([]int64, len(w.Deltas)), Totals: make([]int64, len(w.Deltas))}
		}
		reads[i] = read
		wg.Add(1)
		go func() {
			defer wg.Done()
			rctx, cancel := context.WithTimeout(ctx, c.timeout)
			defer cancel()
			errs[i] = o.AddWindowCounts(rctx, read)
		}()
	}
	wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if c.seen == nil {
		c.seen = make(map[countKey]uint64)
	}
	for i := range c.others {
		for j := range batch {
			w := &batch[j]
			if w.Err != nil {
				continue
			}
			for k := range w.Totals {
				ck := countKey{i, w.Key, w.Length, w.First + int64(k)}
				if errs[i] == nil && reads[i][j].Err == nil {
					c.last[ck] = reads[i][j].Totals[k]
				}
				c.seen[ck] = c.gen
				w.Totals[k] += c.last[ck]
			}
		}
	}
	if c.gen%64 == 0 { // forget the windows no sync asked for lately
		for ck, g := range c.seen {
			if c.gen-g > 64 {
				delete(c.seen, ck)
				delete(c.last, ck)
			}
		}
	}
	return nil
}
