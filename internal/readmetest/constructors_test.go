package readmetest

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/connectlimit"
	"github.com/sluicehq/sluice/distributed"
	"github.com/sluicehq/sluice/distributed/regions"
	"github.com/sluicehq/sluice/grpclimit"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/quota/rlqs"
	"github.com/sluicehq/sluice/store"
	"github.com/sluicehq/sluice/store/memcached"
	"github.com/sluicehq/sluice/store/memory"
	"github.com/sluicehq/sluice/store/redis"
)

// oddInts and oddDurations are the zero and invalid values the constructors' options are
// given.
var (
	oddInts      = []int{0, -1, 1, -1 << 31, 1 << 40}
	oddDurations = []time.Duration{0, -1, 1, -time.Hour, 1 << 62}
)

func pickInt(r *rand.Rand) int                { return oddInts[r.IntN(len(oddInts))] }
func pickDuration(r *rand.Rand) time.Duration { return oddDurations[r.IntN(len(oddDurations))] }

// exercise uses what a constructor returned without an error as a snippet would: a Store
// decides once and closes, a middleware serves one request. It must not panic.
func exercise(t *testing.T, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	switch v := v.(type) {
	case sluice.Store:
		_, _ = sluice.New(v).Allow(ctx, "k", sluice.PerSecond(10))
	case func(http.Handler) http.Handler:
		v(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	case *grpclimit.Interceptor:
		_ = v.Unary()
	case *connectlimit.Interceptor:
		_, _ = v.WrapUnary(func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) { return nil, nil })(ctx, connect.NewRequest(&emptypb.Empty{}))
	case *clientip.Resolver:
		_ = v.Resolve("192.0.2.1:1", []string{"198.51.100.1"}, nil)
	case *rlqs.Service:
		_ = v.Streams()
	case *hotkey.Param:
	}
	if c, ok := v.(io.Closer); ok {
		_ = c.Close()
	}
}

// TestConstructorsRefuseOrWork is a property: every exported constructor a snippet uses,
// given zero or invalid input (nil stores, clients and connections, empty strings, zero,
// negative and huge options, in random combinations), returns an error that names its
// package, or a value that works; never a value that panics later.
func TestConstructorsRefuseOrWork(t *testing.T) {
	conn, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	mem, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	unreachable := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:1", DialTimeout: 50 * time.Millisecond})
	defer unreachable.Close()
	r := rand.New(rand.NewPCG(1, 2))
	type build func(r *rand.Rand) (any, error)
	constructors := map[string]build{
		"memory.New": func(r *rand.Rand) (any, error) {
			return memory.New(memory.WithMaxKeys(pickInt(r)), memory.WithMaxBytes(int64(pickInt(r))), memory.WithShards(pickInt(r)),
				memory.WithSweepInterval(pickDuration(r)), memory.WithMaxKeyLength(pickInt(r)))
		},
		"redis.New": func(r *rand.Rand) (any, error) {
			var c goredis.UniversalClient
			if r.IntN(2) == 0 {
				c = unreachable
			}
			return redis.New(c, redis.WithTimeout(pickDuration(r)), redis.WithMaxBatch(pickInt(r)), redis.WithMaxBatchDelay(pickDuration(r)),
				redis.WithMaxInFlight(pickInt(r)), redis.WithMaxKeyLength(pickInt(r)))
		},
		"redis.NewFromURL": func(r *rand.Rand) (any, error) {
			return redis.NewFromURL([]string{"", "redis://", "nosuch://x", "redis-cluster://", "redis-sentinel://h:1"}[r.IntN(5)])
		},
		"memcached.New": func(r *rand.Rand) (any, error) {
			return memcached.New(nil, memcached.WithMaxAttempts(pickInt(r)), memcached.WithBackoff(pickDuration(r)), memcached.WithMaxBatch(pickInt(r)))
		},
		"memcached.NewFromURL": func(r *rand.Rand) (any, error) {
			return memcached.NewFromURL([]string{"", "memcached://", "x://y"}[r.IntN(3)], memcached.WithTimeout(pickDuration(r)))
		},
		"memcached.NewFromServers": func(r *rand.Rand) (any, error) {
			return memcached.NewFromServers([][]string{nil, {""}, {"nohost"}}[r.IntN(3)])
		},
		"distributed.NewAsync": func(r *rand.Rand) (any, error) {
			var s sluice.Store
			if r.IntN(2) == 0 {
				s = mem
			}
			return distributed.NewAsync(s, distributed.WithInterval(pickDuration(r)), distributed.WithMaxKeys(pickInt(r)), distributed.WithMaxStaleness(pickDuration(r)))
		},
		"distributed.NewOverLimit": func(r *rand.Rand) (any, error) {
			var s sluice.Store
			if r.IntN(2) == 0 {
				s = mem
			}
			return distributed.NewOverLimit(s, distributed.WithMaxKeys(pickInt(r)))
		},
		"distributed.NewFallback": func(r *rand.Rand) (any, error) {
			var s sluice.Store
			if r.IntN(2) == 0 {
				s = mem
			}
			return distributed.NewFallback(s, distributed.WithTimeout(pickDuration(r)), distributed.WithFailures(pickInt(r)),
				distributed.WithProbeInterval(pickDuration(r)), distributed.WithHeartbeat(pickDuration(r)), distributed.WithInstances(pickInt(r)),
				distributed.WithSafeCapacity([]float64{0, -1, 2, 0.5}[r.IntN(4)]))
		},
		"quota.New": func(r *rand.Rand) (any, error) {
			var s sluice.Store
			var c grpc.ClientConnInterface
			if r.IntN(3) > 0 {
				s = mem
			}
			if r.IntN(3) > 0 {
				c = conn
			}
			return quota.New(s, c, []string{"", "example"}[r.IntN(2)], quota.WithInterval(pickDuration(r)), quota.WithReuseFor(pickDuration(r)),
				quota.WithMaxBuckets(pickInt(r)), quota.WithMaxKeyLength(pickInt(r)))
		},
		"httplimit.New": func(r *rand.Rand) (any, error) {
			var l *sluice.Limiter
			if r.IntN(2) == 0 {
				l = sluice.New(mem)
			}
			return httplimit.New(l, httplimit.WithLimits(httplimit.Limit{Name: []string{"", "a"}[r.IntN(2)],
				Rule: sluice.Rule{Limit: int64(pickInt(r)), Period: pickDuration(r)}}))
		},
		"grpclimit.New": func(r *rand.Rand) (any, error) {
			var l *sluice.Limiter
			if r.IntN(2) == 0 {
				l = sluice.New(mem)
			}
			return grpclimit.New(l, []grpclimit.Route{{Limits: []grpclimit.Limit{{Name: []string{"", "a"}[r.IntN(2)],
				Rule: sluice.Rule{Limit: int64(pickInt(r)), Period: pickDuration(r)}}}}})
		},
		"connectlimit.New": func(r *rand.Rand) (any, error) {
			var l *sluice.Limiter
			if r.IntN(2) == 0 {
				l = sluice.New(mem)
			}
			return connectlimit.New(l, []connectlimit.Route{{Procedure: []string{"", "/a.S/", "nonsense"}[r.IntN(3)], Limits: []connectlimit.Limit{{Name: []string{"", "a"}[r.IntN(2)],
				Rule: sluice.Rule{Limit: int64(pickInt(r)), Period: pickDuration(r)}}}}}, connectlimit.WithWait(pickDuration(r)))
		},
		"clientip.New": func(r *rand.Rand) (any, error) {
			return clientip.New([][]string{nil, {""}, {"10.0.0.0/33"}, {"nonsense"}}[r.IntN(4)])
		},
		"store.Open": func(r *rand.Rand) (any, error) {
			st, closer, err := store.Open(context.Background(), store.Config{Backend: store.Backend{URL: []string{"", "memory", "nosuch://"}[r.IntN(3)], Timeout: pickDuration(r)}, Decorators: store.Decorators{Mode: []string{"", "psychic", "async"}[r.IntN(3)], Fallback: []string{"", "nope", "local"}[r.IntN(3)]}})
			if err == nil {
				defer closer.Close()
			}
			return st, err
		},
		"rlqs.New": func(r *rand.Rand) (any, error) { return rlqs.New(rlqs.Config{MaxBuckets: pickInt(r)}), nil },
		"regions.New": func(r *rand.Rand) (any, error) {
			var st sluice.Store
			if r.IntN(3) > 0 {
				st = mem
			}
			var coord regions.Coordinator
			if r.IntN(2) == 0 {
				coord = regions.NewMemoryCoordinator()
			}
			return regions.New(regions.Config{Region: []string{"", "eu"}[r.IntN(2)],
				Regions: []regions.Region{{Name: []string{"", "eu", "a b"}[r.IntN(3)], Store: st}}, Mode: regions.Mode(r.IntN(3)),
				Coordinator: coord, Interval: pickDuration(r), Epoch: pickDuration(r), MaxClockSkew: pickDuration(r), MaxKeys: pickInt(r)})
		},
		"hotkey.New": func(r *rand.Rand) (any, error) {
			return hotkey.New(sluice.Rule{Limit: int64(pickInt(r)), Period: pickDuration(r)}, hotkey.Config{TopK: pickInt(r)})
		},
	}
	for name, b := range constructors {
		for i := range 20 {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s (case %d): panic: %v", name, i, p)
					}
				}()
				v, err := b(r)
				if err != nil && name == "quota.New" {
					// The README's quota snippet once dropped this error: the nil Client
					// it returns must answer with an error, not a nil pointer panic.
					exercise(t, v)
				}
				if err != nil {
					pkg, _, _ := strings.Cut(strings.ToLower(name), ".")
					var fe *sluice.FieldError
					if !strings.Contains(err.Error(), pkg) && !errors.As(err, &fe) {
						t.Errorf("%s: error %q names neither its package nor a field", name, err)
					}
					return
				}
				exercise(t, v)
			}()
		}
	}

}
