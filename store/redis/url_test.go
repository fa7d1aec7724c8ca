package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/store/redis"
)

func TestNewFromURLErrors(t *testing.T) {
	for _, tc := range []struct{ url, part string }{
		{"http://localhost:6379", "scheme"},
		{"redis://", "host"},
		{"redis://localhost", "host"},
		{"redis://localhost:0", "port"},
		{"redis://a:1,b:2", "host"},
		{"redis://localhost:6379/x", "path"},
		{"redis://localhost:6379?db=-1", "db"},
		{"redis://localhost:6379?pool_size=0", "pool_size"},
		{"redis://localhost:6379?dial_timeout=soon", "dial_timeout"},
		{"redis://localhost:6379?colour=red", "unknown query parameter"}, // unnamed: it may be part of a password holding a raw &
		{"redis://localhost:6379?counters=yes please", "counters"},
		{"redis-cluster://a:1,b:2?counters=true", "WithCounters"}, // the server's clock on a Cluster
		{"redis-sentinel://a:1,b:2", "path"},
		{"redis-cluster://a:1,b:2/3", "path"},
		{"redis://%zz", "url"},
	} {
		s, err := redis.NewFromURL(tc.url)
		if err == nil {
			_ = s.Close()
			t.Errorf("%s: no error", tc.url)
			continue
		}
		if !strings.Contains(err.Error(), tc.part) {
			t.Errorf("%s: %v does not name %q", tc.url, err, tc.part)
		}
	}
}

func TestNewFromURL(t *testing.T) {
	urls := map[string]func(t *testing.T) string{
		"standalone": func(t *testing.T) string { return "redis://" + testenv.RedisAddr(t) + "/0?dial_timeout=1s" },
		"sentinel": func(t *testing.T) string {
			addrs, master := testenv.Sentinel(t)
			return "redis-sentinel://" + strings.Join(addrs, ",") + "/" + master
		},
		"cluster": func(t *testing.T) string {
			return "redis-cluster://" + strings.Join(testenv.List(t, "SLUICE_REDIS_CLUSTER_ADDRS"), ",")
		},
	}
	for name, u := range urls {
		t.Run(name, func(t *testing.T) {
			s, err := redis.NewFromURL(u(t), redis.WithTimeout(2*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			key := "url-" + name
			rule := sluice.SlidingLog(1, time.Hour)
			d, err := s.Take(context.Background(), sluice.Request{Key: key, Rule: rule, N: 1})
			if err != nil || !d.Allowed {
				t.Fatalf("first take: %+v, %v", d, err)
			}
			d, err = s.Take(context.Background(), sluice.Request{Key: key, Rule: rule, N: -1})
			if err != nil || !d.Allowed || d.Remaining != 1 {
				t.Fatalf("refund: %+v, %v", d, err)
			}
		})
	}
}
