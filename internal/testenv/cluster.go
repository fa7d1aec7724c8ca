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

// StartCluster starts a Redis Cluster of the test's own: primaries x (1 + replicas)
// redis-servers (each a StartRedis, node timeout 2 s), joined with redis-cli --cluster create
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
		nodes[i] = StartRedis(t, "--cluster-enabled", "yes", "--cluster-node-timeout", "2000")
		addrs[i] = nodes[i].Addr()
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	linked := 0 // replicas whose link to their primary is up
	for _, n := range nodes {
		c := goredis.NewClient(&goredis.Options{Addr: n.Addr()})
		for {
			info, _ := c.ClusterInfo(context.Background()).Result()
			repl, _ := c.Info(context.Background(), "replication").Result()
			replica := strings.Contains(repl, "role:slave")
			if strings.Contains(info, "cluster_state:ok") && (!replica || strings.Contains(repl, "master_link_status:up")) {
				if replica {
					linked++
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
	if linked != primaries*replicas {
		t.Fatalf("%d replicas linked to their primary, want %d", linked, primaries*replicas)
	}
	return nodes
}
