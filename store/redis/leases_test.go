package redis_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/redis"
)

// roundTrips counts the client's network round trips that run scripts: one per script call
// sent alone, one per pipeline holding any (a new connection's handshake is not counted).
type roundTrips struct{ n atomic.Int64 }

func isScript(cmd goredis.Cmder) bool { return cmd.Name() == "evalsha" || cmd.Name() == "eval" }

func (r *roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (r *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		if isScript(cmd) {
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		if slices.ContainsFunc(cmds, isScript) {
			r.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// TestLeaseRoundTrips: on a server of its own, an acquire and a release are one script call
// and one round trip each; renewing 60 slots of 3 keys is one round trip of 3 script calls.
func TestLeaseRoundTrips(t *testing.T) {
	srv := testenv.StartRedis(t)
	// One connection, opened before counting: its handshake is no decision's round trip.
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true, PoolSize: 1})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	stats := goredis.NewClient(&goredis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = stats.Close() })
	s := newStore(t, c)
	clock := sluicetest.NewManualClock(t0)
	l := sluice.NewLeases(s, sluice.WithClock(clock))
	t.Cleanup(func() { l.Close() })
	ctx := context.Background()
	limit := sluice.InFlight{Limit: 100, Lease: 10 * time.Second}
	for _, src := range redis.LeaseScripts() {
		if err := stats.ScriptLoad(ctx, src).Err(); err != nil {
			t.Fatal(err)
		}
	}
	rt := &roundTrips{}
	c.AddHook(rt)
	before := testenv.ScriptCalls(t, srv.Addr())
	slot, err := l.Acquire(ctx, "k0", limit)
	if err != nil || !slot.Admitted {
		t.Fatalf("%+v, %v", slot, err)
	}
	if got := testenv.ScriptCalls(t, srv.Addr()) - before; got != 1 || rt.n.Load() != 1 {
		t.Errorf("acquire: %d script calls, %d round trips; want 1 and 1", got, rt.n.Load())
	}
	before, _ = testenv.ScriptCalls(t, srv.Addr()), rt.n.Swap(0)
	if err := slot.Release(); err != nil {
		t.Fatal(err)
	}
	_ = slot.Release() // idempotent: no call at all
	if got := testenv.ScriptCalls(t, srv.Addr()) - before; got != 1 || rt.n.Load() != 1 {
		t.Errorf("release (twice): %d script calls, %d round trips; want 1 and 1", got, rt.n.Load())
	}
	for i := range 60 {
		if s, err := l.Acquire(ctx, fmt.Sprintf("k%d", i%3), limit); err != nil || !s.Admitted {
			t.Fatalf("%+v, %v", s, err)
		}
	}
	before, _ = testenv.ScriptCalls(t, srv.Addr()), rt.n.Swap(0)
	for clock.Waiters() == 0 {
		time.Sleep(time.Millisecond)
	}
	clock.Advance(5 * time.Second) // half the lease: every slot is due
	deadline := time.Now().Add(10 * time.Second)
	for rt.n.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // nothing else may follow
	if got := testenv.ScriptCalls(t, srv.Addr()) - before; got != 3 || rt.n.Load() != 1 || l.Held() != 60 {
		t.Errorf("renewal of 60 slots on 3 keys: %d script calls, %d round trips, %d held; want 3, 1, 60", got, rt.n.Load(), l.Held())
	}
}

// TestLeaseHolderKilled re-runs the test binary as a child that holds every slot of a key and
// renews them; the slots stay held past several leases while it lives, and come back within
// the lease after it is killed with SIGKILL.
func TestLeaseHolderKilled(t *testing.T) {
	if os.Getenv("SLUICE_LEASE_CHILD") != "" {
		leaseHolderChild()
		return
	}
	testenv.Timing(t)
	addr := testenv.RedisAddr(t)
	prefix := fmt.Sprintf("sluicetest:killed:%d:", time.Now().UnixNano())
	const lease = time.Second
	limit := sluice.InFlight{Limit: 5, Lease: lease}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeaseHolderKilled$")
	cmd.Env = append(os.Environ(), "SLUICE_LEASE_CHILD="+addr+" "+prefix)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	c := standalone(t)
	s, err := redis.New(c, redis.WithPrefix(prefix), redis.WithTimeout(testTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(); checkTTLs(t, c, prefix, true) })
	l := sluice.NewLeases(s)
	t.Cleanup(func() { l.Close() })
	ctx := context.Background()
	time.Sleep(3 * lease) // the child's renewals keep its slots
	if slot, err := l.Acquire(ctx, "k", limit); err != nil || slot.Admitted || slot.InFlight != 5 {
		t.Fatalf("3 leases after the child took them: %+v, %v; want refused, 5 in flight", slot, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for {
		slot, err := l.Acquire(ctx, "k", limit)
		if err != nil {
			t.Fatal(err)
		}
		if slot.Admitted {
			break
		}
		if time.Since(killed) > lease+2*time.Second {
			t.Fatalf("no slot back %v after the holder was killed (lease %v): %+v", time.Since(killed), lease, slot)
		}
		time.Sleep(min(slot.RetryAfter, 50*time.Millisecond))
	}
	back := time.Since(killed)
	t.Logf("the first slot came back %v after the kill (lease %v)", back, lease)
	if back > lease+300*time.Millisecond { // the lease, and a few polls of slack
		t.Errorf("the first slot came back %v after the kill, later than the lease %v", back, lease)
	}
}

// leaseHolderChild takes every slot of "k", says "held" and waits to be killed.
func leaseHolderChild() {
	addr, prefix, _ := strings.Cut(os.Getenv("SLUICE_LEASE_CHILD"), " ")
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	s, err := redis.New(c, redis.WithPrefix(prefix))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	l := sluice.NewLeases(s)
	for range 5 {
		slot, err := l.Acquire(context.Background(), "k", sluice.InFlight{Limit: 5, Lease: time.Second})
		if err != nil || !slot.Admitted {
			fmt.Fprintln(os.Stderr, slot, err)
			os.Exit(1)
		}
	}
	fmt.Println("held")
	select {}
}

// TestLeaseRenewCluster: one renewal batch over keys of every slot of a Cluster renews each.
func TestLeaseRenewCluster(t *testing.T) {
	s := newStore(t, clusterClient(t))
	ctx := context.Background()
	var batch []sluice.LeaseRenewal
	for i := range 30 {
		key := fmt.Sprintf("k%d", i)
		id := sluice.LeaseID{byte(i), 1}
		d, err := s.AcquireLease(ctx, sluice.LeaseRequest{Key: key, InFlight: sluice.InFlight{Limit: 1, Lease: time.Minute}, ID: id})
		if err != nil || !d.Admitted {
			t.Fatalf("%+v, %v", d, err)
		}
		batch = append(batch, sluice.LeaseRenewal{Key: key, ID: id, Lease: time.Minute}, sluice.LeaseRenewal{Key: key, ID: sluice.LeaseID{byte(i), 2}, Lease: time.Minute})
	}
	if err := s.RenewLeases(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for i, r := range batch {
		if r.Err != nil || r.Held != (i%2 == 0) {
			t.Errorf("item %d (key %s): held %v, error %v; want held %v", i, r.Key, r.Held, r.Err, i%2 == 0)
		}
	}
}
