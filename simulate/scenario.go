package simulate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Epoch is the virtual instant every trace starts at: 2025-01-01T00:00:00Z, aligned to every
// whole minute and hour, so window edges fall at whole multiples of the period from it.
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// Event is one request of a trace.
type Event struct {
	// At is the request's instant, Unix ns.
	At int64
	// Client identifies the key the request is limited on (clients 0..Clients-1).
	Client int32
	// N is the request's cost.
	N int64
}

// Trace is a scenario's traffic: events in time order (ties keep generation order).
type Trace struct {
	// Events in non-decreasing At order.
	Events []Event
	// Clients is the number of distinct clients (keys).
	Clients int
	// Start and End bound the run (Unix ns); End is Start + the scenario's duration.
	Start, End int64
}

// Scenario is a named, seeded traffic pattern and the per-client limit it is judged against.
type Scenario struct {
	// Name is the snake_case name used by --scenario.
	Name string
	// Summary says in one line what the traffic is; Definition gives the exact rates, for
	// docs and independent reimplementations.
	Summary, Definition string
	// Limit units per Period is the rule every client is limited by.
	Limit  int64
	Period time.Duration
	// Duration is the default length of the run.
	Duration time.Duration
	// generate builds the events of [start, start+d) from rng.
	generate func(rng *rand.Rand, start, d int64, limit int64, period int64) ([]Event, int)
}

// Generate returns the scenario's trace for the given duration (0 means Duration) and seed.
// The same arguments always give the same trace.
func (s Scenario) Generate(d time.Duration, seed uint64) (Trace, error) {
	if d == 0 {
		d = s.Duration
	}
	if d < 0 {
		return Trace{}, fmt.Errorf("simulate: duration: must be positive, got %v", d)
	}
	if d > 7*24*time.Hour {
		return Trace{}, fmt.Errorf("simulate: duration: at most 168h, got %v", d)
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed5eed5eed5eed))
	start := Epoch.UnixNano()
	events, clients := s.generate(rng, start, int64(d), s.Limit, int64(s.Period))
	sort.SliceStable(events, func(i, j int) bool { return events[i].At < events[j].At })
	return Trace{Events: events, Clients: clients, Start: start, End: start + int64(d)}, nil
}

// Scenarios lists the built-in scenarios; the first is the default.
func Scenarios() []Scenario {
	return []Scenario{steady, bursty, diurnal, boundary, manyClients, cloudflare, flood}
}

// ScenarioByName returns the built-in scenario with the given name.
func ScenarioByName(name string) (Scenario, error) {
	var names []string
	for _, s := range Scenarios() {
		if s.Name == name {
			return s, nil
		}
		names = append(names, s.Name)
	}
	return Scenario{}, fmt.Errorf("simulate: scenario: unknown %q (want one of %s)", name, strings.Join(names, ", "))
}

var steady = Scenario{
	Name:    "steady",
	Summary: "one client, Poisson arrivals at 1.25x the limit",
	Definition: "1 client; limit 100 per 1m; Poisson arrivals at 125 per minute (1.25 x limit), " +
		"cost 1; 60m.",
	Limit: 100, Period: time.Minute, Duration: time.Hour,
	generate: func(rng *rand.Rand, start, d, limit, period int64) ([]Event, int) {
		return poisson(rng, nil, 0, start, start+d, constant(1.25*float64(limit)/float64(period))), 1
	},
}

var bursty = Scenario{
	Name:    "bursty",
	Summary: "one client, on/off: bursts at 6x the limit, idle in between",
	Definition: "1 client; limit 100 per 1m; alternating ON and OFF phases starting ON, lengths " +
		"exponential with mean 20s (ON) and 70s (OFF); Poisson arrivals at 600 per minute " +
		"(6 x limit) while ON, none while OFF; cost 1; 60m.",
	Limit: 100, Period: time.Minute, Duration: time.Hour,
	generate: func(rng *rand.Rand, start, d, limit, period int64) ([]Event, int) {
		var events []Event
		rate := 6 * float64(limit) / float64(period)
		on := true
		for t := start; t < start+d; {
			mean := 70 * float64(time.Second)
			if on {
				mean = 20 * float64(time.Second)
			}
			end := min(start+d, t+int64(rng.ExpFloat64()*mean)+1)
			if on {
				events = poisson(rng, events, 0, t, end, constant(rate))
			}
			t, on = end, !on
		}
		return events, 1
	},
}

var diurnal = Scenario{
	Name:    "diurnal",
	Summary: "one client, a compressed day: rate ramps from 0.2x to 2x the limit and back",
	Definition: "1 client; limit 100 per 1m; Poisson arrivals (by thinning) at rate " +
		"100 x (0.2 + 1.8 x (1 - cos(2 pi t / D)) / 2) per minute, t from 0 to D = the run " +
		"(120m): 20 per minute at both ends, 200 per minute at the middle; cost 1.",
	Limit: 100, Period: time.Minute, Duration: 2 * time.Hour,
	generate: func(rng *rand.Rand, start, d, limit, period int64) ([]Event, int) {
		base := float64(limit) / float64(period)
		rate := func(t int64) float64 {
			x := float64(t-start) / float64(d)
			return base * (0.2 + 1.8*(1-math.Cos(2*math.Pi*x))/2)
		}
		return poisson(rng, nil, 0, start, start+d, thinned{rate: rate, max: 2 * base}), 1
	},
}

var boundary = Scenario{
	Name:    "boundary",
	Summary: "one client: a full limit just before a window edge and another just after",
	Definition: "1 client; limit 100 per 1m; at every window edge E = Epoch + (3k+1) minutes " +
		"inside the run: 100 requests evenly spaced over [E-100ms, E) (at E-100ms+i x 1ms) and " +
		"100 over [E, E+100ms) (at E+i x 1ms), i = 0..99; cost 1; 60m (20 attacks). No randomness.",
	Limit: 100, Period: time.Minute, Duration: time.Hour,
	generate: func(_ *rand.Rand, start, d, limit, period int64) ([]Event, int) {
		var events []Event
		const span = int64(100 * time.Millisecond)
		for e := start + period; e+span <= start+d; e += 3 * period {
			for _, from := range []int64{e - span, e} {
				for i := int64(0); i < limit; i++ {
					events = append(events, Event{At: from + i*span/limit, N: 1})
				}
			}
		}
		return events, 1
	},
}

var manyClients = Scenario{
	Name:    "many_clients",
	Summary: "1000 clients with heavy-tailed (Pareto) rates",
	Definition: "1000 clients, each limited to 100 per 1m on its own key; client i's rate is " +
		"Pareto with alpha 1.16 and minimum 5 per minute, capped at 2000 per minute (drawn in " +
		"client order from the seeded generator); Poisson arrivals per client; cost 1; 20m.",
	Limit: 100, Period: time.Minute, Duration: 20 * time.Minute,
	generate: func(rng *rand.Rand, start, d, limit, period int64) ([]Event, int) {
		const clients = 1000
		perMin := float64(limit) / 100 / float64(period) // 1 per minute when limit is 100/min
		rates := make([]float64, clients)
		for i := range rates {
			u := 1 - rng.Float64() // (0, 1]
			rates[i] = min(2000, 5*math.Pow(u, -1/1.16)) * perMin
		}
		var events []Event
		for i, r := range rates {
			events = poisson(rng, events, int32(i), start, start+d, constant(r))
		}
		return events, clients
	},
}

var cloudflare = Scenario{
	Name:    "cloudflare",
	Summary: "2000 clients, most well under the limit (a Cloudflare-like mix)",
	Definition: "2000 clients, each limited to 100 per 1m on its own key; rates log-uniform: " +
		"clients 0..1939 (97%) in [1, 30] per minute, 1940..1979 (2%) in [30, 300], " +
		"1980..1999 (1%) in [300, 3000]; Poisson arrivals per client; cost 1; 20m.",
	Limit: 100, Period: time.Minute, Duration: 20 * time.Minute,
	generate: func(rng *rand.Rand, start, d, limit, period int64) ([]Event, int) {
		const clients = 2000
		perMin := float64(limit) / 100 / float64(period)
		var events []Event
		for i := 0; i < clients; i++ {
			lo, hi := 1.0, 30.0
			switch {
			case i >= 1980:
				lo, hi = 300, 3000
			case i >= 1940:
				lo, hi = 30, 300
			}
			r := lo * math.Pow(hi/lo, rng.Float64()) * perMin
			events = poisson(rng, events, int32(i), start, start+d, constant(r))
		}
		return events, clients
	},
}

var flood = Scenario{
	Name:    "flood",
	Summary: "one client hammering at 10x the limit (stresses async counters)",
	Definition: "1 client; limit 100 per 1m; Poisson arrivals at 1000 per minute (10 x limit), " +
		"cost 1; 10m.",
	Limit: 100, Period: time.Minute, Duration: 10 * time.Minute,
	generate: func(rng *rand.Rand, start, d, limit, period int64) ([]Event, int) {
		return poisson(rng, nil, 0, start, start+d, constant(10*float64(limit)/float64(period))), 1
	},
}
