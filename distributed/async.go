package distributed

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/shardmap"
)

// Defaults of Async.
const (
	DefaultInterval     = 100 * time.Millisecond
	DefaultAsyncMaxKeys = 100_000
)

// Async is a Store decorator that decides fixed-window and sliding-window rules locally, on a
// view made of the last synced global count plus this process's unsynced delta, and syncs
// in the background: every interval (aligned to multiples of the interval on the clock) it
// pushes the deltas of every key decided on since the last sync and pulls their global
// totals, in one round trip for all of them (sluice.WindowCounter). No store call is made on
// the decision path. Other algorithms go to the wrapped store's Take unchanged.
//
// Bound: each process sees the others' admissions late by at most about one interval (two in
// the worst case, when its pull lands just before another's push), so with nodes processes
// each admitting at most rate units per second on a key, a window admits at most about
//
//	limit + (nodes-1) x min(limit, rate x interval)
//
// units (up to twice the second term in the worst case); docs/MODES.md has measured figures.
// With WithSyncWrites, admissions are written through at once and only reads are
// asynchronous, which shrinks the bound to the writes in flight at the same instant.
//
// Close syncs what is pending, so nothing counted is lost on a clean shutdown. Async is safe
// for concurrent use.
type Async struct {
	next       sluice.Store
	counters   sluice.WindowCounter
	clock      sluice.Clock
	interval   time.Duration
	timeout    time.Duration
	maxStale   time.Duration
	syncWrites bool
	manual     bool
	views      *shardmap.Map[*keyState] // marked: the keys decided on since the last sync

	syncMu   sync.Mutex // one sync at a time
	lastSync atomic.Int64
	lastErr  atomic.Pointer[error]
	closed   atomic.Bool
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// viewShard is a shard of Async's views.
type viewShard = shardmap.Shard[*keyState]

// viewRemaining lets a full shard drop an idle view, and keeps the others.
func viewRemaining(ks *keyState, now int64) int64 {
	if ks.idle(now) {
		return 0
	}
	return shardmap.Pinned
}

type asyncConfig struct {
	clock      sluice.Clock
	interval   time.Duration
	timeout    time.Duration
	maxStale   time.Duration
	maxKeys    int
	syncWrites bool
	manual     bool
}

// NewAsync wraps store, which must implement sluice.WindowCounter. Its options are WithClock,
// WithInterval, WithTimeout, WithMaxStaleness, WithMaxKeys, WithSyncWrites and
// WithManualSync; another option, or an invalid value, is an error naming the option.
func NewAsync(store sluice.Store, opts ...Option) (*Async, error) {
	cfg := asyncConfig{interval: DefaultInterval, maxKeys: DefaultAsyncMaxKeys}
	if err := applyOptions("NewAsync", opts, &cfg, func(o Option) func(*asyncConfig) { return o.async }); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, fmt.Errorf("distributed: NewAsync: %w", sluice.ErrNoStore)
	}
	counters, ok := store.(sluice.WindowCounter)
	if !ok {
		return nil, fmt.Errorf("distributed: NewAsync: store %T does not implement sluice.WindowCounter (AddWindowCounts), which local-first counting needs", store)
	}
	switch {
	case cfg.interval <= 0:
		return nil, fmt.Errorf("distributed: WithInterval: must be positive, got %v", cfg.interval)
	case cfg.timeout < 0:
		return nil, fmt.Errorf("distributed: WithTimeout: must not be negative, got %v", cfg.timeout)
	case cfg.maxStale < 0:
		return nil, fmt.Errorf("distributed: WithMaxStaleness: must not be negative, got %v", cfg.maxStale)
	case cfg.maxKeys <= 0:
		return nil, fmt.Errorf("distributed: WithMaxKeys: must be positive, got %d", cfg.maxKeys)
	}
	if cfg.timeout == 0 {
		cfg.timeout = max(cfg.interval, 100*time.Millisecond)
	}
	a := &Async{next: store, counters: counters, clock: cfg.clock, interval: cfg.interval,
		timeout: cfg.timeout, maxStale: cfg.maxStale, syncWrites: cfg.syncWrites, manual: cfg.manual,
		views: shardmap.New(cfg.maxKeys, viewRemaining), stop: make(chan struct{}), done: make(chan struct{})}
	a.lastSync.Store(now(a.clock))
	if cfg.manual {
		close(a.done)
	} else {
		go a.loop()
	}
	return a, nil
}

func windowed(r sluice.Rule) bool {
	return r.Algorithm == sluice.AlgorithmFixedWindow || r.Algorithm == sluice.AlgorithmSlidingWindow
}

// Take implements sluice.Store.
func (a *Async) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if a.closed.Load() {
		return sluice.Decision{}, fmt.Errorf("distributed: async: %w", sluice.ErrClosed)
	}
	if !windowed(req.Rule) || req.Budget.Op != sluice.BudgetNone { // a budget step: the store's ledger
		return a.next.Take(ctx, req)
	}
	if err := req.Validate(0); err != nil {
		return sluice.Decision{}, err
	}
	t := now(a.clock)
	if a.maxStale > 0 && t-a.lastSync.Load() > int64(a.maxStale) {
		return sluice.Decision{}, fmt.Errorf("distributed: async: no successful sync for %v: %w",
			time.Duration(t-a.lastSync.Load()), sluice.ErrStoreUnavailable)
	}
	sh := a.views.Shard(req.Key)
	sh.Lock()
	ks, ok := sh.Get(req.Key)
	if !ok {
		if !sh.MakeRoom(t) {
			sh.Unlock()
			return a.next.Take(ctx, req) // no room for a local view
		}
		ks = newKeyState(strings.Clone(req.Key), req.Rule)
		sh.Set(ks.key, ks)
	} else if !ks.sameShape(req.Rule) {
		ks.reshape(req.Rule, t)
	}
	d := ks.decide(t, req.Rule, req.N, req.Settle)
	markDirty(sh, ks)
	if !a.syncWrites || !d.Allowed || req.N == 0 {
		sh.Unlock()
		return d, nil
	}
	item := a.takePending(ks)
	sh.Unlock()
	if err := a.writeThrough(ctx, sh, ks, item); err != nil {
		return sluice.Decision{}, err
	}
	return d, nil
}

// markDirty queues ks for the next sync, once.
func markDirty(sh *viewShard, ks *keyState) {
	if !ks.dirty {
		ks.dirty = true
		sh.Mark(ks)
	}
}

// takePending moves the key's pending deltas (windows of the view) into flight and returns
// the item that sends them and reads every window of the view; orphans are left for the
// next sync.
func (a *Async) takePending(ks *keyState) sluice.WindowCounts {
	n := len(ks.slots)
	buf := make([]int64, 2*n)
	item := sluice.WindowCounts{Key: ks.key, Length: time.Duration(ks.length), First: ks.first(),
		Deltas: buf[:n:n], Totals: buf[n:], TTL: a.ttl(ks)}
	for j := range n {
		if s := ks.slotFor(item.First + int64(j)); s != nil {
			item.Deltas[j] = s.pending
			s.inflight += s.pending
			s.pending = 0
		}
	}
	return item
}

// ttl keeps a key's counters while any process may still read them.
func (a *Async) ttl(ks *keyState) time.Duration {
	return time.Duration(int64(len(ks.slots)+1)*ks.length) + 2*a.interval + time.Second
}

// writeThrough sends one admission (WithSyncWrites) and folds the fresh totals into the view.
func (a *Async) writeThrough(ctx context.Context, sh *viewShard, ks *keyState, item sluice.WindowCounts) error {
	batch := [1]sluice.WindowCounts{item}
	err := a.counters.AddWindowCounts(ctx, batch[:])
	if err == nil {
		err = batch[0].Err
	}
	sh.Lock()
	defer sh.Unlock()
	if err != nil {
		// The admission is not known to be recorded: undo it locally and report.
		for j, d := range item.Deltas {
			if s := ks.at(item.First + int64(j)); s.idx == item.First+int64(j) {
				s.inflight -= d
			}
		}
		return fmt.Errorf("distributed: async write: %w", err)
	}
	a.apply(ks, &batch[0], nil)
	return nil
}

// apply folds a finished round trip into the view: totals replace the global counts (the
// greater one in the write-through variant, where writes overlap), or, on failure, the deltas go
// back to pending (or to the orphans when their window has left the ring).
func (a *Async) apply(ks *keyState, item *sluice.WindowCounts, err error) {
	same := time.Duration(ks.length) == item.Length
	for j, d := range item.Deltas {
		idx := item.First + int64(j)
		var s *slot
		if same {
			s = ks.slotFor(idx)
		}
		if s != nil {
			s.inflight -= d
		}
		switch {
		case err != nil && s != nil:
			s.pending += d
		case err != nil && d != 0:
			ks.orphans = append(ks.orphans, orphan{item.Length, idx, d})
		case s == nil:
		case a.syncWrites:
			s.global = max(s.global+d, item.Totals[j])
		default:
			s.global = item.Totals[j]
		}
	}
}

// Sync pushes every pending delta and pulls the global totals of every key decided on since
// the last sync, in one round trip. The background loop calls it every interval; call it
// yourself with WithManualSync. On error the deltas stay pending for the next sync.
func (a *Async) Sync(ctx context.Context) error {
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	var (
		batch []sluice.WindowCounts
		owner []*keyState // nil for orphan items
		shard []int
	)
	for i := range shardmap.Shards {
		sh := a.views.At(i)
		sh.Lock()
		for _, ks := range sh.Marked() {
			ks.dirty = false
			batch = append(batch, a.takePending(ks))
			owner, shard = append(owner, ks), append(shard, i)
			for _, o := range ks.orphans {
				batch = append(batch, sluice.WindowCounts{Key: ks.key, Length: o.length, First: o.idx,
					Deltas: []int64{o.delta}, Totals: make([]int64, 1), TTL: a.ttl(ks)})
				owner, shard = append(owner, nil), append(shard, i)
			}
			ks.orphans = ks.orphans[:0]
		}
		sh.ResetMarked()
		sh.Unlock()
	}
	a.views.Sweep(now(a.clock)) // drops idle keys from one shard per sync
	if len(batch) == 0 {
		a.lastSync.Store(now(a.clock))
		return nil
	}
	err := a.counters.AddWindowCounts(ctx, batch)
	var itemErr error
	for i := range batch {
		sh := a.views.At(shard[i])
		sh.Lock()
		ks := owner[i]
		if ks == nil { // an orphan: find its key again to keep the delta on failure
			ks = owner[lastOwner(owner, i)]
		}
		e := err
		if e == nil && batch[i].Err != nil {
			e = batch[i].Err
			itemErr = errors.Join(itemErr, fmt.Errorf("item %d: %w", i, e)) // never the key: it may hold a request's value
		}
		if owner[i] != nil {
			a.apply(ks, &batch[i], e)
		} else if e != nil && !errors.Is(e, sluice.ErrInvalidKey) {
			ks.orphans = append(ks.orphans, orphan{batch[i].Length, batch[i].First, batch[i].Deltas[0]})
		}
		if e != nil {
			markDirty(sh, ks)
		}
		sh.Unlock()
	}
	if err != nil {
		a.lastErr.Store(&err)
		return fmt.Errorf("distributed: async sync of %d keys: %w", len(batch), err)
	}
	a.lastSync.Store(now(a.clock))
	return itemErr
}

// lastOwner finds the key item i (an orphan) belongs to: the nearest owner before it.
func lastOwner(owner []*keyState, i int) int {
	for owner[i] == nil {
		i--
	}
	return i
}

// Len reports the number of keys with a local view.
func (a *Async) Len() int { return a.views.Len() }

// LastSyncError returns the error of the last failed background sync, or nil.
func (a *Async) LastSyncError() error {
	if p := a.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (a *Async) loop() {
	defer close(a.done)
	for {
		t := now(a.clock)
		wait := int64(a.interval) - t%int64(a.interval) // to the next multiple of the interval
		var tick <-chan time.Time
		var timer *time.Timer
		if a.clock == nil {
			timer = time.NewTimer(time.Duration(wait))
			tick = timer.C
		} else {
			tick = a.clock.After(time.Duration(wait))
		}
		select {
		case <-a.stop:
			if timer != nil {
				timer.Stop()
			}
			return
		case <-tick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
		if err := a.Sync(ctx); err == nil {
			a.lastErr.Store(nil)
		}
		cancel()
	}
}

// Flush syncs pending deltas, then flushes the wrapped store if it is a sluice.Flusher.
func (a *Async) Flush(ctx context.Context) error {
	return errors.Join(a.Sync(ctx), flushNext(ctx, a.next))
}

// Close stops the background sync and syncs what is pending (within 5 s), so nothing counted
// is lost. Later calls to Take fail with sluice.ErrClosed. It does not close the wrapped store.
func (a *Async) Close() error {
	var err error
	a.once.Do(func() {
		a.closed.Store(true)
		close(a.stop)
		<-a.done
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		err = a.Flush(ctx)
	})
	return err
}
