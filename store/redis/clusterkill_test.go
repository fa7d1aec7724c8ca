package redis_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

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
	owner := slotRange(t, c, slot).Nodes[0].Addr
	var victim *testenv.RedisServer
	for _, n := range nodes {
		if n.Addr() == owner {
			victim = n
		}
	}
	if victim == nil {
		t.Fatalf("slot %d's owner %s is not one of the nodes", slot, owner)
	}
	var admitted, failed atomic.Int64
	var mu sync.Mutex
	var killed, resumed time.Time
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
			if !killed.IsZero() && called.After(killed) && resumed.IsZero() {
				resumed = time.Now()
			}
			mu.Unlock()
		}
	})
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	victim.Kill()
	killed = time.Now()
	mu.Unlock()
	// When a surviving node first names another primary for the slot: the cluster's own
	// failover, which the store cannot shorten.
	var survivor *testenv.RedisServer
	for _, n := range nodes {
		if n != victim {
			survivor = n
		}
	}
	sc := goredis.NewClient(&goredis.Options{Addr: survivor.Addr()})
	defer sc.Close()
	var promoted time.Time
	deadline := killed.Add(20 * time.Second)
	for promoted.IsZero() && time.Now().Before(deadline) {
		//lint:ignore SA1019 CLUSTER SLOTS still answers on Redis 7 and names each range's primary first
		sl, _ := sc.ClusterSlots(ctx).Result()
		for _, r := range sl {
			if int64(r.Start) <= slot && slot <= int64(r.End) && r.Nodes[0].Addr != owner {
				promoted = time.Now()
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	for {
		mu.Lock()
		done := !resumed.IsZero()
		mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	stop()
	if resumed.IsZero() {
		t.Fatalf("decisions did not resume within 20 s of killing %s (%d failed)", owner, failed.Load())
	}
	// Bring the old primary back (it rejoins as a replica), so the test's cleanup can scan
	// every node for keys without a TTL.
	victim.Start()
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
	c.ReloadState(ctx)
	newOwner := slotRange(t, c, slot).Nodes[0].Addr
	t.Logf("primary %s killed, replica %s took over after %v (node timeout 2 s); decisions resumed after %v (%v after the promotion); %d admitted, %d failed; the new primary holds %d (%d admissions lost with the old one)",
		owner, newOwner, promoted.Sub(killed).Round(time.Millisecond), resumed.Sub(killed).Round(time.Millisecond), resumed.Sub(promoted).Round(time.Millisecond),
		admitted.Load(), failed.Load(), held, admitted.Load()-held)
	if resumed.Sub(promoted) > redis.ClusterStateReloadInterval+time.Second {
		t.Errorf("decisions resumed %v after the promotion, want <= the reload interval %v + 1 s", resumed.Sub(promoted), redis.ClusterStateReloadInterval)
	}
	// A call that failed may still have run (its reply lost with the connection): the new
	// primary may hold up to the failed calls more than was admitted, never more than that.
	if held > admitted.Load()+failed.Load() {
		t.Errorf("the new primary holds %d, more than the %d admitted + %d failed", held, admitted.Load(), failed.Load())
	}
}

// slotRange returns the range of CLUSTER SLOTS that holds slot.
func slotRange(t *testing.T, c *goredis.ClusterClient, slot int64) goredis.ClusterSlot {
	t.Helper()
	//lint:ignore SA1019 CLUSTER SLOTS still answers on Redis 7 and names each range's primary first
	slots, err := c.ClusterSlots(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range slots {
		if int64(r.Start) <= slot && slot <= int64(r.End) {
			return r
		}
	}
	t.Fatalf("slot %d is not served", slot)
	return goredis.ClusterSlot{}
}
