package testenv

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// StartCluster starts a Redis Cluster of the test's own: primaries redis-servers (each a
// StartRedis), joined with redis-cli --cluster create, no replicas; it returns once every
// node reports cluster_state:ok. Tests that reshard or kill nodes use it instead of the
// shared cluster of scripts/test.sh.
func StartCluster(t testing.TB, primaries int) []*RedisServer {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not found")
	}
	nodes := make([]*RedisServer, primaries)
	addrs := make([]string, primaries)
	for i := range nodes {
		nodes[i] = StartRedis(t, "--cluster-enabled", "yes", "--cluster-node-timeout", "2000")
		addrs[i] = nodes[i].Addr()
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	if out, err := exec.Command(cli, append(args, "--cluster-yes")...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range nodes {
		c := goredis.NewClient(&goredis.Options{Addr: n.Addr()})
		for {
			info, _ := c.ClusterInfo(context.Background()).Result()
			if strings.Contains(info, "cluster_state:ok") {
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
	return nodes
}
