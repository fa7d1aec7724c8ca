package quota_test

import (
	"context"
	"log"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/store/memory"
)

// A Go service spending its share of a fleet-wide limit that sluice serve's quota server
// assigns (the example rules cover the bucket {name: api}). Not run: it needs the server.
func ExampleNew() {
	conn, err := grpc.NewClient("127.0.0.1:8081", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	mem, err := memory.New()
	if err != nil {
		log.Fatal(err)
	}
	defer mem.Close()
	store, err := quota.New(mem, conn, "example", quota.WithInterval(time.Second))
	if err != nil {
		log.Fatal(err) // e.g. "quota: empty domain"
	}
	defer store.Close()
	limiter := sluice.New(store)
	// The rule is the request's own (OwnRule): it decides until the first assignment, and for ever when no
	// quota rule covers the bucket (store.Unassigned() counts those, and both sides log it).
	d, err := limiter.Allow(context.Background(), "api", sluice.TokenBucket(25, time.Second, 25))
	if err != nil {
		log.Fatal(err)
	}
	if !d.Allowed {
		log.Printf("429, retry after %v", d.RetryAfter)
	}
}
