package simulate

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/sluicetest"
)

// LatencyScenario is the name of the latency-spike scenario (RunLatency).
const LatencyScenario = "latency_spike"

// LatencySummary and LatencyDefinition describe the latency-spike scenario as Scenario.Summary
// and Scenario.Definition do the others (`sluice simulate -list`).
const (
	LatencySummary    = "a backend slows down 5x for the middle third: rate limit alone, fixed max_in_flight, adaptive limit (queueing, admitted, latency)"
	LatencyDefinition = "1 key; Poisson arrivals at 400 per second (seeded); backend of 40 workers with a FIFO queue, 50 ms per request (800/s of room), 250 ms (160/s) for requests started in the middle third of the run; each arrival decided by a GCRA rate limit of 500 per 1s (Limiter.Allow on the memory store), then by its in-flight limit: none, 40 (max_in_flight: Leases.Acquire on the memory store), or adaptive.Gradient (floor 5, ceiling 200, other settings default) through adaptive.Local; latency from arrival to the end of the response; 60s."
)

// Latency-spike constants (LatencyDefinition).
const (
	latencyRate      = 400.0
	latencyWorkers   = 40
	latencyService   = 50 * time.Millisecond
	latencySlow      = 250 * time.Millisecond
	latencyRateLimit = 500
)

// LatencyLimits are the in-flight limits RunLatency compares, in its rows' order.
var LatencyLimits = []string{"rate_limit_only", "max_in_flight_40", "adaptive"}

// LatencyPhases are the thirds of the run, in its rows' order.
var LatencyPhases = []string{"before", "spike", "after"}

// LatencyRow is one in-flight limit's outcome over one third of the run. Latencies are those of
// the admitted requests that arrived in the phase, including the time they waited in the
// backend's queue (the run goes on until every admitted request is answered).
type LatencyRow struct {
	Limit, Phase string
	Offered      int64
	Admitted     int64
	// MaxQueued is the most requests waiting in the backend's queue at once, MaxInFlight the
	// most admitted and not yet answered (in service or queued).
	MaxQueued, MaxInFlight int
	// P50, P99 and Max are latency percentiles of the admitted requests.
	P50, P99, Max time.Duration
	// LimitMin and LimitMax bound the in-flight limit over the phase (0 when there is none).
	LimitMin, LimitMax int
}

// inFlightGate is one of the compared in-flight limits. acquire admits p or not (filling in
// what release needs); release ends an admitted p.
type inFlightGate interface {
	acquire(ctx context.Context, p *pending) (bool, error)
	release(p *pending)
	limit() int
}

type noGate struct{}

func (noGate) acquire(context.Context, *pending) (bool, error) { return true, nil }
func (noGate) release(*pending)                                {}
func (noGate) limit() int                                      { return 0 }

// fixedGate is max_in_flight: the library's concurrency limit, Leases.Acquire on the memory
// store (on the run's virtual clock).
type fixedGate struct {
	l   *sluice.Leases
	max sluice.InFlight
}

func (g *fixedGate) acquire(ctx context.Context, p *pending) (bool, error) {
	s, err := g.l.Acquire(ctx, "k", g.max)
	p.slot = s
	return s.Admitted, err
}
func (g *fixedGate) release(p *pending) { _ = p.slot.Release() }
func (g *fixedGate) limit() int         { return int(g.max.Limit) }

type adaptiveGate struct{ l *adaptive.Local }

func (g adaptiveGate) acquire(context.Context, *pending) (bool, error) {
	_, ok := g.l.Acquire()
	return ok, nil
}
func (g adaptiveGate) release(p *pending) { g.l.Release(p.arrived) } // admitted on arrival: the limits do not queue
func (g adaptiveGate) limit() int         { return g.l.Limit() }

// RunLatency replays, in virtual time, the latency-spike scenario (LatencyDefinition) for d
// (0: 60 s) through each of LatencyLimits and returns a row per limit and phase.
func RunLatency(ctx context.Context, d time.Duration, seed uint64) ([]LatencyRow, error) {
	if d == 0 {
		d = 60 * time.Second
	}
	if d < 0 {
		return nil, fmt.Errorf("simulate: duration: must be positive, got %v", d)
	}
	var rows []LatencyRow
	for _, name := range LatencyLimits {
		r, err := runLatencyOne(ctx, name, d, seed)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// latencyRun is the state of one replay: a virtual clock, the backend's workers and queue,
// and the outcome per phase.
type latencyRun struct {
	clock    *sluicetest.ManualClock
	start    time.Time
	third    time.Duration
	gate     inFlightGate
	busy     int
	queue    []pending // FIFO of admitted requests waiting for a worker
	done     completions
	inFlight int
	rows     [3]LatencyRow
	lat      [3][]time.Duration
}

// pending is an admitted request: when it arrived and in which phase.
type pending struct {
	arrived time.Time
	phase   int
	slot    sluice.Slot // its slot of max_in_flight
}

func runLatencyOne(ctx context.Context, name string, d time.Duration, seed uint64) ([]LatencyRow, error) {
	r := &latencyRun{clock: sluicetest.NewManualClock(Epoch), start: Epoch, third: d / 3}
	st, closer, err := openMemory(r.clock)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	l := sluice.New(st, sluice.WithClock(r.clock))
	leases := sluice.NewLeases(st, sluice.WithClock(r.clock))
	defer leases.Close()
	switch name {
	case "max_in_flight_40":
		r.gate = &fixedGate{l: leases, max: sluice.InFlight{Limit: latencyWorkers, Lease: time.Hour}}
	case "adaptive":
		g, err := adaptive.NewGradient(adaptive.Settings{Floor: 5, Ceiling: 200})
		if err != nil {
			return nil, err
		}
		r.gate = adaptiveGate{adaptive.NewLocal(g, r.clock)}
	default:
		r.gate = noGate{}
	}
	for i := range r.rows {
		r.rows[i] = LatencyRow{Limit: name, Phase: LatencyPhases[i], LimitMin: r.gate.limit(), LimitMax: r.gate.limit()}
	}
	rule := sluice.GCRA(latencyRateLimit, time.Second, 0)
	rng := rand.New(rand.NewPCG(seed, seed^0x1a7e))
	end := r.start.Add(d)
	at := r.start.Add(time.Duration(rng.ExpFloat64() / latencyRate * float64(time.Second)))
	for at.Before(end) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.completeUntil(at)
		r.clock.Set(at)
		phase := r.phase(at)
		r.rows[phase].Offered++
		dec, err := l.Allow(ctx, "k", rule)
		if err != nil {
			return nil, err
		}
		if dec.Allowed {
			p := pending{arrived: at, phase: phase}
			ok, err := r.gate.acquire(ctx, &p)
			if err != nil {
				return nil, err
			}
			if ok {
				r.rows[phase].Admitted++
				r.admit(p)
			}
		}
		r.noteLimit(phase)
		at = at.Add(time.Duration(rng.ExpFloat64() / latencyRate * float64(time.Second)))
	}
	r.completeUntil(time.Time{})
	rows := r.rows[:]
	for i := range rows {
		rows[i].P50, rows[i].P99, rows[i].Max = percentiles(r.lat[i])
	}
	return rows, nil
}

// phase returns the third of the run t falls in.
func (r *latencyRun) phase(t time.Time) int {
	return min(2, int(t.Sub(r.start)/r.third))
}

// service returns how long a request that starts at t takes: slow in the middle third.
func (r *latencyRun) service(t time.Time) time.Duration {
	if r.phase(t) == 1 {
		return latencySlow
	}
	return latencyService
}

// admit hands a request to the backend: to a free worker, or to the queue.
func (r *latencyRun) admit(p pending) {
	r.inFlight++
	ph := &r.rows[p.phase]
	ph.MaxInFlight = max(ph.MaxInFlight, r.inFlight)
	now := r.clock.Now()
	if r.busy < latencyWorkers {
		r.busy++
		heap.Push(&r.done, completion{at: now.Add(r.service(now)), req: p})
		return
	}
	r.queue = append(r.queue, p)
	cur := &r.rows[r.phase(now)]
	cur.MaxQueued = max(cur.MaxQueued, len(r.queue))
}

// completeUntil answers every request whose service ends by t (all of them when t is zero):
// it frees its in-flight slot, records its latency and gives its worker to the next in queue.
func (r *latencyRun) completeUntil(t time.Time) {
	for r.done.Len() > 0 && (t.IsZero() || !r.done[0].at.After(t)) {
		c := heap.Pop(&r.done).(completion)
		r.clock.Set(c.at)
		r.inFlight--
		r.gate.release(&c.req)
		r.lat[c.req.phase] = append(r.lat[c.req.phase], c.at.Sub(c.req.arrived))
		if len(r.queue) > 0 {
			next := r.queue[0]
			r.queue = r.queue[1:]
			heap.Push(&r.done, completion{at: c.at.Add(r.service(c.at)), req: next})
		} else {
			r.busy--
		}
		if c.at.Before(r.start.Add(3 * r.third)) {
			r.noteLimit(r.phase(c.at))
		}
	}
}

// noteLimit widens the phase's range of the in-flight limit to its current value.
func (r *latencyRun) noteLimit(phase int) {
	if l := r.gate.limit(); l > 0 {
		row := &r.rows[phase]
		row.LimitMin, row.LimitMax = min(row.LimitMin, l), max(row.LimitMax, l)
	}
}

type completion struct {
	at  time.Time
	req pending
}

// completions is a min-heap of completions by time.
type completions []completion

func (c completions) Len() int           { return len(c) }
func (c completions) Less(i, j int) bool { return c[i].at.Before(c[j].at) }
func (c completions) Swap(i, j int)      { c[i], c[j] = c[j], c[i] }
func (c *completions) Push(x any)        { *c = append(*c, x.(completion)) }
func (c *completions) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}

// percentiles returns the median, 99th percentile and maximum of d (zeros when empty).
func percentiles(d []time.Duration) (p50, p99, top time.Duration) {
	if len(d) == 0 {
		return 0, 0, 0
	}
	slices.Sort(d)
	at := func(q float64) time.Duration { return d[min(len(d)-1, int(q*float64(len(d))))] }
	return at(0.5), at(0.99), d[len(d)-1]
}

// WriteLatencyTable writes the rows as a Markdown table.
func WriteLatencyTable(w io.Writer, rows []LatencyRow) error {
	if _, err := fmt.Fprintln(w, "| in-flight limit | phase | offered | admitted | p50 latency | p99 latency | max latency | max in flight | max queued | limit (min-max) |\n|---|---|---|---|---|---|---|---|---|---|"); err != nil {
		return err
	}
	for _, r := range rows {
		limit := "-"
		if r.LimitMax > 0 {
			limit = fmt.Sprintf("%d-%d", r.LimitMin, r.LimitMax)
		}
		if _, err := fmt.Fprintf(w, "| %s | %s | %d | %d | %v | %v | %v | %d | %d | %s |\n", r.Limit, r.Phase, r.Offered, r.Admitted,
			r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond), r.Max.Round(time.Millisecond), r.MaxInFlight, r.MaxQueued, limit); err != nil {
			return err
		}
	}
	return nil
}
