package bench

import (
	"context"
	"net"
	"testing"
	"testing/fstest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/quota/rlqs"
	"github.com/sluicehq/sluice/store/memory"
)

// BenchmarkQuota compares one decision of the quota client (package quota: the key's
// assignment looked up, then a decision on its memory store under the assigned token
// bucket) with the same decision on a bare memory store, over 1000 keys (each its own
// bucket of 10^6 per second, all assigned to this one client by a quota server on
// loopback). Run it several times and compare medians:
//
//	cd bench && for i in $(seq 8); do go test -run '^$' -bench 'Quota/' -benchmem; done | tee quota.txt
func BenchmarkQuota(b *testing.B) {
	const n = 1000
	body := "domain: bench\nquota_buckets:\n  - bucket_id: {name: \"\"}\n    requests_per_unit: 1000000\n    unit: second\n    assignment_ttl: 1m\n"
	rules, err := config.LoadFS(fstest.MapFS{"rules.yaml": {Data: []byte(body)}}, "rules.yaml")
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g := grpc.NewServer()
	rlqs.New(rlqs.Config{Rules: func() *config.Config { return rules }}).Register(g)
	go func() { _ = g.Serve(lis) }()
	defer g.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()

	rule := sluice.TokenBucket(perSecond, time.Second, perSecond)
	ctx := context.Background()
	bare, _ := memory.New()
	defer bare.Close()
	inner, _ := memory.New()
	defer inner.Close()
	client, err := quota.New(inner, conn, "bench", quota.WithMaxBuckets(n))
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	for _, k := range keys[:n] {
		if _, err := client.Take(ctx, sluice.Request{Key: k, Rule: rule, N: 1}); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, k := range keys[:n] {
		for {
			if _, ok := client.Assignment(k); ok {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("no assignment for %s", k)
			}
			_ = client.Flush()
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, c := range []struct {
		name  string
		store sluice.Store
	}{{"memory_token_bucket", bare}, {"quota_client", client}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				if _, err := c.store.Take(ctx, sluice.Request{Key: keys[i%n], Rule: rule, N: 1}); err != nil {
					b.Fatal(err)
				}
			}
			// The process's CPU time per decision (both goroutines of the client, GC, and the
			// in-process quota server's answers to the reports every second), steadier than
			// wall time on a shared machine.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
