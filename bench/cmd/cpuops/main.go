// Command cpuops measures CPU time (not wall time) per decision for the memory-mode
// contenders on one key, single goroutine. On a busy machine CPU time is steadier than the
// wall-clock ns/op of go test -bench; docs/BENCHMARKS.md reports both.
//
//	cd bench && go run ./cmd/cpuops
package main

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/store/memory"
	"golang.org/x/time/rate"
)

func cpu() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func measure(name string, f func(string)) {
	const n = 20_000_000
	f("user:1")
	best := time.Duration(1 << 62)
	for r := 0; r < 3; r++ {
		start := cpu()
		for i := 0; i < n; i++ {
			f("user:1")
		}
		best = min(best, cpu()-start)
	}
	fmt.Printf("%-28s %6.1f ns/op (CPU)\n", name, float64(best)/n)
}

func main() {
	ctx := context.Background()
	for _, coarse := range []bool{false, true} {
		for _, a := range []sluice.Algorithm{sluice.AlgorithmTokenBucket, sluice.AlgorithmGCRA, sluice.AlgorithmFixedWindow} {
			name := "sluice_" + a.String()
			if coarse {
				name += "_coarse"
			}
			s, _ := memory.New(memory.WithCoarseClock(coarse))
			l := sluice.New(s)
			rule := sluice.Rule{Algorithm: a, Limit: 1_000_000, Period: time.Second}
			measure(name, func(k string) { l.AllowN(ctx, k, rule, 1) })
		}
	}
	var m sync.Map
	measure("x_time_rate", func(k string) {
		v, ok := m.Load(k)
		if !ok {
			v, _ = m.LoadOrStore(k, rate.NewLimiter(1_000_000, 1_000_000))
		}
		v.(*rate.Limiter).Allow()
	})
}
