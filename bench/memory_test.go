package bench

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
	"go.uber.org/ratelimit"
	"golang.org/x/time/rate"
)

// The memory-mode workloads: one key, 10k keys, 10k keys from parallel goroutines. Every
// limiter gets the same rule, 10^6 per second with a burst of 10^6 (the sliding log 1000 a
// second: it keeps a timestamp per unit), and peers keep one limiter per key in a sync.Map, as
// a service limiting many keys with them must. A tight loop on one key overruns that rate
// within a fraction of a second, so one-key runs are mostly denials for every contender alike;
// the 10k-key runs are mostly admissions.
//
// Run the whole benchmark several times rather than with -count, which repeats each
// contender back to back; compare medians. Each row also reports cpu-ns/op, the process's CPU
// time per decision (processCPU): on a machine shared with other work it is steadier than
// ns/op, which counts the time other processes held the CPU.
//
//	cd bench && for i in $(seq 8); do go test -run '^$' -bench 'Memory/' -benchmem; done | tee memory.txt

const perSecond = 1_000_000

var keys = func() []string {
	k := make([]string, 10_000)
	for i := range k {
		k[i] = fmt.Sprintf("user:%d", i)
	}
	return k
}()

// decider is one contender: decide(key) must make one rate-limit decision for key.
type decider struct {
	name   string
	decide func(key string) bool
}

func contenders() []decider {
	ctx := context.Background()
	out := []decider{}
	for _, a := range []sluice.Algorithm{sluice.AlgorithmTokenBucket, sluice.AlgorithmGCRA,
		sluice.AlgorithmLeakyBucket, sluice.AlgorithmFixedWindow, sluice.AlgorithmSlidingWindow, sluice.AlgorithmSlidingLog} {
		s, err := memory.New()
		if err != nil {
			panic(err)
		}
		l := sluice.New(s)
		rule := sluice.Rule{Algorithm: a, Limit: perSecond, Period: time.Second}
		if a == sluice.AlgorithmSlidingLog {
			rule.Limit = 1000 // one timestamp per admitted request: kept small
		}
		out = append(out, decider{"sluice_" + a.String(), func(key string) bool {
			d, _ := l.AllowN(ctx, key, rule, 1)
			return d.Allowed
		}})
	}
	var xm sync.Map
	out = append(out, decider{"x_time_rate", func(key string) bool {
		v, ok := xm.Load(key)
		if !ok {
			v, _ = xm.LoadOrStore(key, rate.NewLimiter(perSecond, perSecond))
		}
		return v.(*rate.Limiter).Allow()
	}})
	var um sync.Map
	out = append(out, decider{"uber_ratelimit", func(key string) bool {
		v, ok := um.Load(key)
		if !ok {
			v, _ = um.LoadOrStore(key, ratelimit.New(perSecond*1000, ratelimit.WithoutSlack))
		}
		v.(ratelimit.Limiter).Take() // blocks rather than deciding; set fast enough never to block
		return true
	}})
	return out
}

func BenchmarkMemory(b *testing.B) {
	for _, c := range contenders() {
		for _, k := range keys { // warm: every key exists, as in a running service
			c.decide(k)
		}
		// Collect the warm-up's garbage (outgrown index tables, the peers' sync.Map nodes) now:
		// cpu-ns/op counts the whole process, so a collection that started during a measured
		// row would be charged to whichever contender ran then.
		runtime.GC()
		b.Run("one_key/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b, processCPU())
			for i := 0; i < b.N; i++ {
				c.decide("user:1")
			}
		})
		b.Run("10k_keys/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b, processCPU())
			for i := 0; i < b.N; i++ {
				c.decide(keys[i%len(keys)])
			}
		})
		b.Run("10k_keys_parallel/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b, processCPU())
			var seed sync.Mutex
			next := 0
			b.RunParallel(func(pb *testing.PB) {
				seed.Lock()
				i := next * 7919
				next++
				seed.Unlock()
				for pb.Next() {
					i++
					c.decide(keys[i%len(keys)])
				}
			})
		})
	}
}

// TestContendersDecide checks the harness itself: every contender admits a first request.
func TestContendersDecide(t *testing.T) {
	for _, c := range contenders() {
		if !c.decide("probe") {
			t.Errorf("%s denied its first request", c.name)
		}
	}
}
