package testenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// sentinelSettleTimeout bounds the wait for a Sentinel setup to agree on its primary (a
// failover's reconfiguration of the old primary takes Sentinel several seconds).
const sentinelSettleTimeout = 60 * time.Second

// SentinelSetup is a Sentinel setup of the test's own (StartSentinel): a primary, one
// replica and three Sentinels (quorum 2), each a redis-server on a free port that the test
// may kill by its PID, and that its cleanup kills.
type SentinelSetup struct {
	Master    string         // the master name the Sentinels monitor
	Redis     []*RedisServer // the primary as started, then its replica
	Sentinels []*RedisServer
}

// StartSentinel starts a Sentinel setup of the test's own, its Sentinels with
// down-after-milliseconds downAfter and failover-timeout failoverTimeout, and returns once it
// is settled (see Sentinel). Tests that kill its processes use it instead of the shared setup
// of scripts/test.sh.
func StartSentinel(t testing.TB, downAfter, failoverTimeout time.Duration) *SentinelSetup {
	t.Helper()
	// Either may be the primary after a failover: each starts a replica's sync at once.
	primary := StartRedis(t, "--repl-diskless-sync-delay", "0")
	replica := StartRedis(t, "--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", strconv.Itoa(primary.port))
	s := &SentinelSetup{Master: "sluice", Redis: []*RedisServer{primary, replica}}
	for range 3 {
		s.Sentinels = append(s.Sentinels, startRedis(t, func(dir string) string {
			// Sentinel rewrites its config file: one each, in its own directory.
			conf := filepath.Join(dir, "sentinel.conf")
			text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 2\nsentinel down-after-milliseconds %[1]s %[3]d\nsentinel failover-timeout %[1]s %[4]d\nsentinel parallel-syncs %[1]s 1\n",
				s.Master, primary.port, downAfter.Milliseconds(), failoverTimeout.Milliseconds())
			if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			return conf
		}, "--sentinel"))
	}
	waitSentinelSettled(t, s.Addrs(), s.Master)
	return s
}

// WaitSettled waits until the setup is settled again (see Sentinel), after a failover.
func (s *SentinelSetup) WaitSettled(t testing.TB) {
	t.Helper()
	waitSentinelSettled(t, s.Addrs(), s.Master)
}

// Addrs returns the Sentinels' addresses.
func (s *SentinelSetup) Addrs() []string {
	addrs := make([]string, len(s.Sentinels))
	for i, n := range s.Sentinels {
		addrs[i] = n.Addr()
	}
	return addrs
}

// URL returns the setup's redis-sentinel:// store URL.
func (s *SentinelSetup) URL() string {
	return "redis-sentinel://" + strings.Join(s.Addrs(), ",") + "/" + s.Master
}

// Primary returns the redis-server the first Sentinel names as the primary (nil if it names
// none of the setup's servers or does not answer).
func (s *SentinelSetup) Primary() *RedisServer {
	addr := s.PrimaryAddr(s.Sentinels[0].Addr())
	for _, r := range s.Redis {
		if r.Addr() == addr {
			return r
		}
	}
	return nil
}

// PrimaryAddr returns the primary's address as the Sentinel at sentinel names it ("" if it
// does not answer).
func (s *SentinelSetup) PrimaryAddr(sentinel string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	sc := goredis.NewSentinelClient(&goredis.Options{Addr: sentinel, MaxRetries: -1})
	defer sc.Close()
	p, err := sc.GetMasterAddrByName(ctx, s.Master).Result()
	if err != nil || len(p) != 2 {
		return ""
	}
	return net.JoinHostPort(p[0], p[1])
}

// Sentinel returns the addresses and master name of the Sentinel setup scripts/test.sh
// starts (SLUICE_REDIS_SENTINEL_ADDRS, SLUICE_REDIS_SENTINEL_MASTER; see Get when unset).
//
// Tests of several packages share that setup and run at once, and one of them fails it over.
// So Sentinel holds a shared lock on the setup until the test ends (SentinelFailover takes it
// exclusively), and returns only once the setup is settled: every Sentinel names the same
// primary, that node answers ROLE as a master, every Sentinel knows the others and a live
// replica, and every replica Sentinel lists answers as a replica in sync. A client made afterwards is not switched to another primary in mid-test.
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
		var peers []map[string]string
		if err == nil {
			peers, err = sc.Sentinels(ctx, master).Result()
		}
		_ = sc.Close()
		if err != nil || len(p) != 2 {
			return "sentinel " + a + ": " + errText(err)
		}
		// Each Sentinel must know the others (for the quorum and the election of a failover)
		// and a replica it could promote.
		if len(peers) < len(addrs)-1 {
			return "sentinel " + a + " knows " + strconv.Itoa(len(peers)) + " other sentinels"
		}
		if !slices.ContainsFunc(rs, func(r map[string]string) bool { return !strings.Contains(r["flags"], "down") }) {
			return "sentinel " + a + " knows no live replica"
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
	if state, _ := role[min(3, len(role)-1)].(string); s == "slave" && state != "connected" {
		// A replica still connecting or syncing has none of the primary's writes yet.
		return s + " " + state
	}
	return s
}

func errText(err error) string {
	if err == nil {
		return "no answer"
	}
	return err.Error()
}

// Announced polls the setup's Sentinels every 5 ms, for up to 20 s after since, until one
// names a primary other than from, and returns it and when (zero if none did).
func (s *SentinelSetup) Announced(from string, since time.Time) (string, time.Time) {
	var clients []*goredis.SentinelClient
	for _, a := range s.Addrs() {
		c := goredis.NewSentinelClient(&goredis.Options{Addr: a, MaxRetries: -1})
		defer c.Close()
		clients = append(clients, c)
	}
	for deadline := since.Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, c := range clients {
			p, err := c.GetMasterAddrByName(context.Background(), s.Master).Result()
			if a := strings.Join(p, ":"); err == nil && len(p) == 2 && a != from {
				return a, time.Now()
			}
		}
	}
	return "", time.Time{}
}
