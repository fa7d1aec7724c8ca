package testenv

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// sentinelSettleTimeout bounds the wait for a Sentinel setup to agree on its primary (a
// failover's reconfiguration of the old primary takes Sentinel several seconds).
const sentinelSettleTimeout = 60 * time.Second

// Sentinel returns the addresses and master name of the Sentinel setup scripts/test.sh
// starts (SLUICE_REDIS_SENTINEL_ADDRS, SLUICE_REDIS_SENTINEL_MASTER; see Get when unset).
//
// Tests of several packages share that setup and run at once, and one of them fails it over.
// So Sentinel holds a shared lock on the setup until the test ends (SentinelFailover takes it
// exclusively), and returns only once the setup is settled: every Sentinel names the same
// primary, that node answers ROLE as a master, and every replica Sentinel lists answers as a
// replica. A client made afterwards is not switched to another primary in mid-test.
func Sentinel(t testing.TB) (addrs []string, master string) {
	t.Helper()
	return sentinel(t, syscall.LOCK_SH)
}

// SentinelFailover is Sentinel for a test that fails the setup over: it holds the lock
// exclusively, so no other test uses the setup meanwhile, and at the test's end it waits for
// the setup to settle again before letting them in.
func SentinelFailover(t testing.TB) (addrs []string, master string) {
	t.Helper()
	return sentinel(t, syscall.LOCK_EX)
}

func sentinel(t testing.TB, how int) ([]string, string) {
	t.Helper()
	addrs := List(t, "SLUICE_REDIS_SENTINEL_ADDRS")
	master := Get(t, "SLUICE_REDIS_SENTINEL_MASTER")
	lock := filepath.Join(os.TempDir(), "sluice-sentinel-"+strings.ReplaceAll(addrs[0], ":", "-")+".lock")
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		_ = f.Close()
		t.Fatalf("lock %s: %v", lock, err)
	}
	t.Cleanup(func() {
		if how == syscall.LOCK_EX {
			waitSentinelSettled(t, addrs, master)
		}
		_ = f.Close() // releases the lock
	})
	waitSentinelSettled(t, addrs, master)
	return addrs, master
}

// waitSentinelSettled waits until the setup is settled (see Sentinel), failing the test after
// sentinelSettleTimeout.
func waitSentinelSettled(t testing.TB, addrs []string, master string) {
	t.Helper()
	deadline := time.Now().Add(sentinelSettleTimeout)
	var why string
	for {
		why = sentinelUnsettled(addrs, master)
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Sentinel setup did not settle within %v: %s", sentinelSettleTimeout, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sentinelUnsettled returns why the setup is not settled, or "" when it is.
func sentinelUnsettled(addrs []string, master string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var primary string
	var replicas []string
	for _, a := range addrs {
		sc := goredis.NewSentinelClient(&goredis.Options{Addr: a, MaxRetries: -1})
		p, err := sc.GetMasterAddrByName(ctx, master).Result()
		var rs []map[string]string
		if err == nil {
			rs, err = sc.Replicas(ctx, master).Result()
		}
		_ = sc.Close()
		if err != nil || len(p) != 2 {
			return "sentinel " + a + ": " + errText(err)
		}
		addr := net.JoinHostPort(p[0], p[1])
		if primary != "" && addr != primary {
			return "sentinels disagree: " + primary + " and " + addr
		}
		primary = addr
		if replicas == nil {
			for _, r := range rs {
				if !strings.Contains(r["flags"], "down") {
					replicas = append(replicas, net.JoinHostPort(r["ip"], r["port"]))
				}
			}
		}
	}
	if role := redisRole(ctx, primary); role != "master" {
		return "primary " + primary + " answers ROLE " + role
	}
	for _, r := range replicas {
		if role := redisRole(ctx, r); role != "slave" {
			return "replica " + r + " answers ROLE " + role
		}
	}
	return ""
}

func redisRole(ctx context.Context, addr string) string {
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	role, err := c.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) == 0 {
		return "error " + errText(err)
	}
	s, _ := role[0].(string)
	return s
}

func errText(err error) string {
	if err == nil {
		return "no answer"
	}
	return err.Error()
}
