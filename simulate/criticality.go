package simulate

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

// CriticalityScenario is the name of the criticality scenario (RunCriticality).
const CriticalityScenario = "criticality"

// CriticalitySummary and CriticalityDefinition describe the criticality scenario as
// Scenario.Summary and Scenario.Definition do the others (`sluice simulate -list`).
const (
	CriticalitySummary    = "one key at 2x its limit, four criticality classes (admitted fraction per class)"
	CriticalityDefinition = "1 key; limit 100 per 1s; arrivals evenly spaced at 200 per second (2 x limit), each of class CRITICAL_PLUS 10%, CRITICAL 30%, SHEDDABLE_PLUS 30%, SHEDDABLE 30% (seeded draw), decided by Limiter.AllowClass with the default shares; cost 1; 60s."
)

// CriticalityMix is the share of the traffic of each class in RunCriticality: CRITICAL_PLUS
// 10%, CRITICAL 30%, SHEDDABLE_PLUS 30%, SHEDDABLE 30%.
var CriticalityMix = map[sluice.Criticality]float64{sluice.CriticalPlus: 0.1, sluice.Critical: 0.3,
	sluice.SheddablePlus: 0.3, sluice.Sheddable: 0.3}

// ClassRow is one class's outcome.
type ClassRow struct {
	Algorithm sluice.Algorithm
	Class     sluice.Criticality
	Offered   int64
	Admitted  int64
}

// RunCriticality replays, in virtual time, one key at overload x its rule's limit (100/s) for
// d, with the classes drawn by CriticalityMix and arrivals evenly spaced, through each
// algorithm with the default shares (Limiter.AllowClass on the memory store), and returns the
// admitted requests per algorithm and class.
func RunCriticality(ctx context.Context, algorithms []sluice.Algorithm, overload float64, d time.Duration, seed uint64) ([]ClassRow, error) {
	return RunCriticalityOn(ctx, nil, algorithms, overload, d, seed)
}

// RunCriticalityOn is RunCriticality on the stores open returns, one per algorithm, deciding
// on the virtual clock it is given (as Config.Store); nil open is the memory store.
func RunCriticalityOn(ctx context.Context, open func(clock sluice.Clock) (sluice.Store, io.Closer, error), algorithms []sluice.Algorithm, overload float64, d time.Duration, seed uint64) ([]ClassRow, error) {
	const limit = 100
	rate := overload * limit
	n := int(rate * d.Seconds())
	if open == nil {
		open = openMemory
	}
	var rows []ClassRow
	for _, a := range algorithms {
		clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		st, mem, err := open(clock)
		if err != nil {
			return nil, err
		}
		l := sluice.New(st)
		rule := sluice.Rule{Algorithm: a, Limit: limit, Period: time.Second}
		rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
		offered, admitted := map[sluice.Criticality]int64{}, map[sluice.Criticality]int64{}
		step := time.Duration(float64(time.Second) / rate)
		for i := 0; i < n; i++ {
			if ctx.Err() != nil {
				mem.Close()
				return nil, ctx.Err()
			}
			c := drawClass(rng.Float64())
			dec, err := l.AllowClass(ctx, "k", rule, 1, c)
			if err != nil {
				mem.Close()
				return nil, err
			}
			offered[c]++
			if dec.Allowed {
				admitted[c]++
			}
			clock.Advance(step)
		}
		mem.Close()
		for _, c := range sluice.Criticalities() {
			rows = append(rows, ClassRow{Algorithm: a, Class: c, Offered: offered[c], Admitted: admitted[c]})
		}
	}
	return rows, nil
}

// openMemory is a memory store on clock, with no sweeper: RunCriticality's store.
func openMemory(clock sluice.Clock) (sluice.Store, io.Closer, error) {
	mem, err := memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
	return mem, mem, err
}

func drawClass(u float64) sluice.Criticality {
	for _, c := range sluice.Criticalities() {
		if u < CriticalityMix[c] {
			return c
		}
		u -= CriticalityMix[c]
	}
	return sluice.Sheddable
}

// WriteClassTable writes the rows as a Markdown table with the admitted fraction per class.
func WriteClassTable(w io.Writer, rows []ClassRow) error {
	if _, err := fmt.Fprintln(w, "| algorithm | class | offered | admitted | admitted fraction |\n|---|---|---|---|---|"); err != nil {
		return err
	}
	for _, r := range rows {
		frac := 0.0
		if r.Offered > 0 {
			frac = float64(r.Admitted) / float64(r.Offered)
		}
		if _, err := fmt.Fprintf(w, "| %s | %s | %d | %d | %.3f |\n", r.Algorithm, r.Class, r.Offered, r.Admitted, frac); err != nil {
			return err
		}
	}
	return nil
}
