package memcached_test

import (
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memcached"
)

// TestTransientOverCount measures the fixed window's transient over-count: two stores (two
// processes) with 32 goroutines each send 5L one-unit requests on a key while a reader polls
// the window's counter. Past the limit every increment is undone, so the counter holds
// admitted units plus the increments under way: at most one round per store and key, each of
// at most WithMaxBatch units. It never exceeds that bound, and exactly L are admitted.
func TestTransientOverCount(t *testing.T) {
	const limit, maxBatch = 100, 16
	addr := server(t)
	clock := sluicetest.NewManualClock(t0)
	p := prefix()
	a := newStore(t, []string{addr}, memcached.WithClock(clock), memcached.WithPrefix(p), memcached.WithMaxBatch(maxBatch))
	b := newStore(t, []string{addr}, memcached.WithClock(clock), memcached.WithPrefix(p), memcached.WithMaxBatch(maxBatch))
	rule := sluice.FixedWindow(limit, time.Hour)
	length := int64(time.Hour)
	w := algorithm.WindowIndex(t0.UnixNano(), length)
	counter := a.Key("oc") + "|w3600000:" + strconv.FormatInt(w, 10)
	raw := memcache.New(addr)
	var peak, samples atomic.Int64
	stop := make(chan struct{})
	var reader sync.WaitGroup
	reader.Add(1)
	go func() {
		defer reader.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if it, err := raw.Get(counter); err == nil {
				samples.Add(1)
				v, _ := strconv.ParseInt(strings.TrimRight(string(it.Value), " "), 10, 64)
				if v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	admitted, errs := hammer([]*sluice.Limiter{sluice.New(a), sluice.New(b)}, 64, 5*limit/64+1, "oc", rule)
	close(stop)
	reader.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d errors, first: %v", len(errs), errs[0])
	}
	if admitted != limit {
		t.Errorf("admitted %d, want exactly %d", admitted, limit)
	}
	if bound := int64(limit + 2*maxBatch); peak.Load() > bound {
		t.Errorf("counter peaked at %d, above the bound %d (limit + 2 stores x a batch of %d)", peak.Load(), bound, maxBatch)
	}
	sa, sb := a.Stats(), b.Stats()
	t.Logf("over-count: counter peaked at %d for a limit of %d (%d samples); %d increments undone, %d units, in %d decisions",
		peak.Load(), limit, samples.Load(), sa.Overshoots+sb.Overshoots, sa.OvershootUnits+sb.OvershootUnits, sa.Decisions+sb.Decisions)
}
