package testenv

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ClusterNodeTimeout is the cluster-node-timeout of StartCluster's nodes: how long a primary
// may be unreachable before the others count it as failing (its replica's election follows).
const ClusterNodeTimeout = 2 * time.Second

// StartCluster starts a Redis Cluster of the test's own: primaries x (1 + replicas)
// redis-servers (each a StartRedis, node timeout ClusterNodeTimeout), joined with redis-cli --cluster create
// --cluster-replicas replicas; it returns once every node reports cluster_state:ok. Tests that reshard or kill nodes use it instead of the
// shared cluster of scripts/test.sh.
func StartCluster(t testing.TB, primaries, replicas int) []*RedisServer {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not found")
	}
	nodes := make([]*RedisServer, primaries*(1+replicas))
	addrs := make([]string, len(nodes))
	for i := range nodes {
		nodes[i] = StartRedis(t, "--cluster-enabled", "yes", "--cluster-node-timeout", strconv.FormatInt(ClusterNodeTimeout.Milliseconds(), 10),
			"--repl-diskless-sync-delay", "0") // a replica's sync at once
		addrs[i] = nodes[i].Addr()
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	if linked := WaitClusterOK(t, nodes); linked != primaries*replicas {
		t.Fatalf("%d replicas linked to their primary, want %d", linked, primaries*replicas)
	}
	return nodes
}

// WaitClusterOK waits, for up to 30 s, until every live node of nodes reports
// cluster_state:ok and, if it is a replica, that its link to its primary is up; it returns
// how many replicas there are.
func WaitClusterOK(t testing.TB, nodes []*RedisServer) (replicas int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range nodes {
		if n.cmd == nil { // killed
			continue
		}
		c := goredis.NewClient(&goredis.Options{Addr: n.Addr()})
		for {
			info, _ := c.ClusterInfo(context.Background()).Result()
			repl, _ := c.Info(context.Background(), "replication").Result()
			replica := strings.Contains(repl, "role:slave")
			if strings.Contains(info, "cluster_state:ok") && (!replica || strings.Contains(repl, "master_link_status:up")) {
				if replica {
					replicas++
				}
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				t.Fatalf("cluster node %s not ok within 30 s: %s", n.Addr(), info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return replicas
}

// SlotPrimary returns the address of slot's primary as the cluster node at addr names it in
// CLUSTER SLOTS ("" when it does not answer or serves no such slot).
func SlotPrimary(addr string, slot int64) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c := goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	//lint:ignore SA1019 CLUSTER SLOTS still answers on Redis 7 and names each range's primary first
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		return ""
	}
	for _, r := range slots {
		if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 {
			return r.Nodes[0].Addr
		}
	}
	return ""
}

// SlotFailover is the kill of a slot's primary in a cluster of StartCluster's (KillSlotPrimary).
type SlotFailover struct {
	Victim   *RedisServer // the killed primary
	From, To string       // the slot's primary before and after (To "" if none took over)
	Killed   time.Time    // when the SIGKILL was sent
	Promoted time.Time    // when a surviving node first named another primary (zero if none did)
}

// KillSlotPrimary sends SIGKILL to the node among nodes that serves slot as primary, then
// polls a surviving node every 5 ms until it names another primary for the slot (the
// cluster's own failover: node timeout and election) or timeout passes.
func KillSlotPrimary(t testing.TB, nodes []*RedisServer, slot int64, timeout time.Duration) SlotFailover {
	t.Helper()
	f := SlotFailover{From: SlotPrimary(nodes[0].Addr(), slot)}
	var survivor *RedisServer
	for _, n := range nodes {
		if n.Addr() == f.From {
			f.Victim = n
		} else {
			survivor = n
		}
	}
	if f.Victim == nil {
		t.Fatalf("slot %d's primary %q is not one of the nodes", slot, f.From)
	}
	f.Victim.Kill()
	f.Killed = time.Now()
	for deadline := f.Killed.Add(timeout); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if to := SlotPrimary(survivor.Addr(), slot); to != "" && to != f.From {
			f.To, f.Promoted = to, time.Now()
			break
		}
	}
	return f
}

// Redirections returns how many ASK, MOVED and TRYAGAIN replies the nodes that answer
// among nodes have sent since they started (INFO errorstats), for tests to report how
// often a client had to follow a slot.
func Redirections(nodes []*RedisServer) map[string]int64 {
	counts := map[string]int64{"ASK": 0, "MOVED": 0, "TRYAGAIN": 0}
	for _, n := range nodes {
		if n.cmd == nil { // killed
			continue
		}
		c := goredis.NewClient(&goredis.Options{Addr: n.Addr(), MaxRetries: -1})
		info, _ := c.Info(context.Background(), "errorstats").Result()
		_ = c.Close()
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "errorstat_"), ":count=")
			if _, want := counts[name]; ok && want {
				n, _ := strconv.ParseInt(rest, 10, 64)
				counts[name] += n
			}
		}
	}
	return counts
}
