package redis_test

import (
	"context"
	"errors"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/redis"
)

// TestReshardHotSlot (issue 16, item 5): on a 3-primary cluster of the test's own, the slot
// of a hot key moves to another primary with redis-cli --cluster reshard while 8 goroutines
// decide that key: ASK, MOVED and TRYAGAIN are handled (under 0.1% of decisions fail, each as
// ErrStoreUnavailable) and the count the new owner holds is exactly what was admitted.
func TestReshardHotSlot(t *testing.T) {
	testenv.Timing(t)
	_, addrs, c := ownCluster(t, 3, 0)
	prefix := testPrefix(t, c)
	s := newStore(t, c, redis.WithPrefix(prefix))
	ctx := context.Background()
	rule := sluice.FixedWindow(1_000_000, time.Hour)
	// The slots' owners and ranges: reshard moves slots from the low end of a range, so the
	// hot key is one whose slot lies within the first 20 of its range (few slots to move).
	//lint:ignore SA1019 CLUSTER SLOTS still answers on Redis 7 and names each range's primary first
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var hot, from string
	var slot, first int64
	for i := 0; from == ""; i++ {
		hot = "hot" + strconv.Itoa(i)
		if slot, err = c.ClusterKeySlot(ctx, prefix+"{"+hot+"}").Result(); err != nil {
			t.Fatal(err)
		}
		for _, r := range slots {
			if int64(r.Start) <= slot && slot < int64(r.Start)+20 && slot <= int64(r.End) {
				from, first = r.Nodes[0].ID, int64(r.Start)
			}
		}
	}
	var to string
	for _, r := range slots {
		if r.Nodes[0].ID != from {
			to = r.Nodes[0].ID
		}
	}
	var admitted, failed, total atomic.Int64
	stop := hammer(8, func() {
		d, err := s.Take(ctx, sluice.Request{Key: hot, Rule: rule, N: 1})
		total.Add(1)
		switch {
		case err != nil:
			failed.Add(1)
			if !errors.Is(err, sluice.ErrStoreUnavailable) {
				t.Errorf("error does not wrap ErrStoreUnavailable: %v", err)
			}
		case d.Allowed:
			admitted.Add(1)
		}
	})
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	out, err := exec.Command("redis-cli", "--cluster", "reshard", addrs[0], "--cluster-from", from, "--cluster-to", to,
		"--cluster-slots", strconv.FormatInt(slot-first+1, 10), "--cluster-yes").CombinedOutput()
	took := time.Since(start)
	time.Sleep(300 * time.Millisecond)
	stop()
	if err != nil {
		t.Fatalf("redis-cli --cluster reshard: %v\n%.2000s", err, out)
	}
	//lint:ignore SA1019 CLUSTER SLOTS still answers on Redis 7 and names each range's primary first
	if slots, err = c.ClusterSlots(ctx).Result(); err != nil {
		t.Fatal(err)
	}
	for _, r := range slots {
		if int64(r.Start) <= slot && slot <= int64(r.End) && r.Nodes[0].ID != to {
			t.Fatalf("slot %d still on %s after the reshard, not %s", slot, r.Nodes[0].ID, to)
		}
	}
	held := consumed(t, s, hot, rule)
	t.Logf("slot %d and %d below it moved in %v under load: %d decisions, %d admitted, %d failed (%.3f%%); the new owner holds %d",
		slot, slot-first, took.Round(time.Millisecond), total.Load(), admitted.Load(), failed.Load(),
		100*float64(failed.Load())/float64(total.Load()), held)
	if held != admitted.Load() {
		t.Errorf("Redis holds %d, %d were admitted", held, admitted.Load())
	}
	if failed.Load()*1000 > total.Load() {
		t.Errorf("%d of %d decisions failed, more than 0.1%%", failed.Load(), total.Load())
	}
}

// ownCluster starts a cluster of the test's own (testenv.StartCluster) and returns its nodes,
// their addresses and a client of it.
func ownCluster(t *testing.T, primaries, replicas int) ([]*testenv.RedisServer, []string, *goredis.ClusterClient) {
	t.Helper()
	nodes := testenv.StartCluster(t, primaries, replicas)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return nodes, addrs, c
}
