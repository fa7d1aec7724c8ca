package redis_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/redis"
)

// sentinelClient returns a failover client of the Sentinel setup from scripts/test.sh, settled
// and shared (testenv.Sentinel).
func sentinelClient(t testing.TB) goredis.UniversalClient {
	t.Helper()
	addrs, master := testenv.Sentinel(t)
	return failoverClient(t, addrs, master)
}

func failoverClient(t testing.TB, addrs []string, master string) goredis.UniversalClient {
	t.Helper()
	c := goredis.NewFailoverClient(&goredis.FailoverOptions{MasterName: master, SentinelAddrs: addrs,
		MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// clusterClient returns a client of the 3-primary Cluster from scripts/test.sh.
func clusterClient(t testing.TB) goredis.UniversalClient {
	t.Helper()
	c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: testenv.List(t, "SLUICE_REDIS_CLUSTER_ADDRS"),
		MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestConformanceSentinel(t *testing.T) { conformance(t, sentinelClient(t)) }

func TestConformanceCluster(t *testing.T) { conformance(t, clusterClient(t)) }

func TestDifferentialCluster(t *testing.T) {
	// Keys with braces land on their own slots; every script runs with no CROSSSLOT.
	c := clusterClient(t)
	clock := sluicetest.NewManualClock(t0)
	s := newStore(t, c, redis.WithClock(clock))
	ctx := context.Background()
	slots := map[int64]bool{}
	for i, k := range []string{"{a}", "{a}b", "a}{", "}", "{", `\{a\}`, "x{y}z", "{}", "{{}}", "plain"} {
		for _, a := range sluice.Algorithms() {
			r := sluice.Rule{Algorithm: a, Limit: 2, Period: time.Second}
			for j := 0; j < 3; j++ {
				d, err := s.Take(ctx, sluice.Request{Key: k, Rule: r, N: 1})
				if err != nil {
					t.Fatalf("key %q %s: %v", k, a, err)
				}
				if d.Allowed != (j < 2) {
					t.Fatalf("key %q %s take %d: %+v", k, a, j, d)
				}
			}
			clock.Advance(time.Hour) // the next algorithm starts on a clean slate anyway
		}
		slot, err := c.(*goredis.ClusterClient).ClusterKeySlot(ctx, s.Key(k)).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot] = true
		_ = i
	}
	if len(slots) < 5 {
		t.Errorf("10 keys with braces landed on %d slots: the braces chose the slot", len(slots))
	}
}

// TestReadOnlyReplica: a write on a replica is an error wrapping ErrStoreUnavailable, never
// a decision.
func TestReadOnlyReplica(t *testing.T) {
	addrs, master := testenv.Sentinel(t)
	sc := goredis.NewSentinelClient(&goredis.Options{Addr: addrs[0]})
	defer sc.Close()
	// The replica is whichever node of the pair reports role "slave" (a failover test may
	// have swapped them), waiting a little for a fresh failover to settle.
	var c *goredis.Client
	deadline := time.Now().Add(30 * time.Second)
	for c == nil && time.Now().Before(deadline) {
		replicas, _ := sc.Replicas(context.Background(), master).Result()
		primary, _ := sc.GetMasterAddrByName(context.Background(), master).Result()
		var cands []string
		for _, r := range replicas {
			cands = append(cands, net.JoinHostPort(r["ip"], r["port"]))
		}
		if len(primary) == 2 {
			cands = append(cands, net.JoinHostPort(primary[0], primary[1]))
		}
		for _, addr := range cands {
			cc := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
			role, _ := cc.Do(context.Background(), "ROLE").Slice()
			if len(role) > 0 && role[0] == "slave" {
				c = cc
				break
			}
			_ = cc.Close()
		}
		if c == nil {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if c == nil {
		t.Fatal("no node of the Sentinel setup is a replica")
	}
	defer c.Close()
	s, err := redis.New(c, redis.WithTimeout(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, a := range sluice.Algorithms() {
		d, err := s.Take(context.Background(), sluice.Request{Key: "ro", Rule: sluice.Rule{Algorithm: a, Limit: 5, Period: time.Second}, N: 1})
		if !errors.Is(err, sluice.ErrStoreUnavailable) {
			t.Errorf("%s on a replica: %+v, %v; want ErrStoreUnavailable", a, d, err)
		}
	}
}

// TestSentinelFailover triggers SENTINEL FAILOVER and wants decisions to resume, within a
// bounded wait, on the new primary.
func TestSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("failover takes seconds")
	}
	addrs, master := testenv.SentinelFailover(t)
	s := newStore(t, failoverClient(t, addrs, master))
	sc := goredis.NewSentinelClient(&goredis.Options{Addr: addrs[0]})
	defer sc.Close()
	ctx := context.Background()
	rule := sluice.TokenBucket(1000, time.Hour, 0)
	take := func() (sluice.Decision, error) {
		return s.Take(ctx, sluice.Request{Key: "failover", Rule: rule, N: 1})
	}
	if _, err := take(); err != nil {
		t.Fatal(err)
	}
	before, err := sc.GetMasterAddrByName(ctx, master).Result()
	if err != nil {
		t.Fatal(err)
	}
	// Let the replica catch up, then fail over (retrying while Sentinel still settles a
	// previous failover).
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := sc.Failover(ctx, master).Err()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SENTINEL FAILOVER: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var after []string
	var errs, oks int
	for time.Now().Before(deadline) {
		after, err = sc.GetMasterAddrByName(ctx, master).Result()
		if err == nil && net.JoinHostPort(after[0], after[1]) != net.JoinHostPort(before[0], before[1]) {
			d, err := take()
			if err == nil && d.Allowed {
				oks++
				if oks == 10 {
					t.Logf("primary %v -> %v; %d errors during the switch", before, after, errs)
					return
				}
				continue
			}
			if err != nil && !errors.Is(err, sluice.ErrStoreUnavailable) {
				t.Fatalf("error during failover does not wrap ErrStoreUnavailable: %v", err)
			}
		}
		errs++
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("decisions did not resume on a new primary within 60s (primary before %v, now %v)", before, after)
}
