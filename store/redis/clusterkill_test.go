package redis_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/redis"
)

// TestClusterPrimaryKill (issue 16, item 4): on a 3-primary, 3-replica cluster of the test's
// own, the primary of a hot key is killed with SIGKILL while 8 goroutines decide it: its
// replica takes over and decisions resume within the slot-map reload interval + 1 s of its
// promotion (the promotion itself is Redis's: node timeout 2 s + election), every failure
// is ErrStoreUnavailable (no silent allow), and the admissions lost with the primary (its
// replica's lag) are measured.
func TestClusterPrimaryKill(t *testing.T) {
	testenv.Timing(t)
	nodes, addrs, c := ownCluster(t, 3, 1)
	// The store decides on the client a redis-cluster:// URL builds (sluice serve's), which
	// reloads the slot map every redis.ClusterStateReloadInterval; a client of go-redis's
	// defaults would keep sending the dead primary's slots to it for a minute.
	prefix := testPrefix(t, c)
	s, err := redis.NewFromURL("redis-cluster://"+strings.Join(addrs, ","), redis.WithPrefix(prefix), redis.WithTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	rule := sluice.FixedWindow(1_000_000, time.Hour)
	slot, err := c.ClusterKeySlot(ctx, prefix+"{hot}").Result()
	if err != nil {
		t.Fatal(err)
	}
	var admitted, failed atomic.Int64
	var mu sync.Mutex
	var calls []time.Time // when each admitted call started
	stop := hammer(8, func() {
		called := time.Now()
		d, err := s.Take(ctx, sluice.Request{Key: "hot", Rule: rule, N: 1})
		switch {
		case err != nil:
			failed.Add(1)
			if !errors.Is(err, sluice.ErrStoreUnavailable) {
				t.Errorf("error does not wrap ErrStoreUnavailable: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		case d.Allowed:
			admitted.Add(1)
			mu.Lock()
			calls = append(calls, called)
			mu.Unlock()
		}
	})
	time.Sleep(300 * time.Millisecond)
	kill := testenv.KillSlotPrimary(t, nodes, slot, 20*time.Second)
	// Load past the bound below, so that a late resumption fails it rather than going unseen.
	time.Sleep(redis.ClusterStateReloadInterval + time.Second + 200*time.Millisecond)
	stop()
	if kill.Promoted.IsZero() {
		t.Fatalf("no replica took over slot %d within 20 s of killing %s (%d failed)", slot, kill.From, failed.Load())
	}
	// Decisions resumed with the first admitted call that started after the kill.
	var resumed time.Time
	for _, c := range calls {
		if c.After(kill.Killed) && (resumed.IsZero() || c.Before(resumed)) {
			resumed = c
		}
	}
	if resumed.IsZero() {
		t.Fatalf("decisions did not resume within the reload interval + 1.2 s of the promotion (%v after killing %s; %d failed)",
			kill.Promoted.Sub(kill.Killed).Round(time.Millisecond), kill.From, failed.Load())
	}
	// Bring the old primary back (it rejoins as a replica), so the test's cleanup can scan
	// every node for keys without a TTL.
	kill.Victim.Start()
	var held int64
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		d, err := s.Take(ctx, sluice.Request{Key: "hot", Rule: rule, N: 0})
		if err == nil {
			held = rule.Limit - d.Remaining
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("peek after the failover: %v", err)
		}
	}
	t.Logf("primary %s killed, replica %s took over after %v (node timeout 2 s); decisions resumed after %v (%v after the promotion); %d admitted, %d failed; the new primary holds %d (%d admissions lost with the old one)",
		kill.From, kill.To, kill.Promoted.Sub(kill.Killed).Round(time.Millisecond), resumed.Sub(kill.Killed).Round(time.Millisecond), resumed.Sub(kill.Promoted).Round(time.Millisecond),
		admitted.Load(), failed.Load(), held, admitted.Load()-held)
	if resumed.Sub(kill.Promoted) > redis.ClusterStateReloadInterval+time.Second {
		t.Errorf("decisions resumed %v after the promotion, want <= the reload interval %v + 1 s", resumed.Sub(kill.Promoted), redis.ClusterStateReloadInterval)
	}
	// A call that failed may still have run (its reply lost with the connection): the new
	// primary may hold up to the failed calls more than was admitted, never more than that.
	if held > admitted.Load()+failed.Load() {
		t.Errorf("the new primary holds %d, more than the %d admitted + %d failed", held, admitted.Load(), failed.Load())
	}
}
