package distributed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
)

// Circuit is the state of a Fallback's circuit breaker, in sony/gobreaker's terms: closed,
// decisions are the store's; open, they are made by policy while the store is probed. Its
// String forms, "store" and "fallback", are what metrics and the admin view show.
type Circuit uint8

// The circuit's states.
const (
	// CircuitClosed decides with the wrapped store.
	CircuitClosed Circuit = iota + 1
	// CircuitOpen decides by policy without calling the store, which is probed in the
	// background.
	CircuitOpen
)

// String returns "store" or "fallback".
func (s Circuit) String() string {
	switch s {
	case CircuitClosed:
		return "store"
	case CircuitOpen:
		return "fallback"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// breaker is a Fallback's circuit breaker: the circuit's state, the consecutive failures that
// open it, the number of the current outage, and the probes of an open circuit, at instants
// aligned to the probe interval on the clock (untilNextProbe). Two probes in a row must find
// the store back to close the circuit: the first also writes the outage back, and the circuit
// is recovering until the second.
//
// It knows nothing of what is decided while the circuit is open: check is the Fallback's
// probe (does the store answer, and is the outage written back to it), and opening and
// closing are the Fallback's, run under the breaker's lock just before the circuit opens or
// closes. It is safe for concurrent use once built.
type breaker struct {
	clock    sluice.Clock
	failures int64
	interval time.Duration // between probes of an open circuit
	manual   bool          // the caller probes (WithManualProbe): no probe loop
	check    func(ctx context.Context) error
	opening  func()
	closing  func()
	onChange func(from, to Circuit)
	stop     <-chan struct{} // closed by the Fallback's Close: the probe loop ends

	mu          sync.Mutex // serialises changes of state and halt
	halted      atomic.Bool
	state       atomic.Uint32
	outage      atomic.Uint64 // 1 + the number of times the circuit opened
	recovering  atomic.Bool   // a probe of the open circuit found the store back and wrote back
	consecutive atomic.Int64
	wg          sync.WaitGroup // the probe loop
}

// init readies a breaker built with its settings: closed, in outage 1 (decisions by policy
// before the circuit first opens belong to it).
func (b *breaker) init() {
	b.state.Store(uint32(CircuitClosed))
	b.outage.Store(1)
}

// circuit reports the circuit's state.
func (b *breaker) circuit() Circuit { return Circuit(b.state.Load()) }

// succeeded records a store call that answered.
func (b *breaker) succeeded() { b.consecutive.Store(0) }

// failed records a store call that failed as unavailable and reports whether it is the
// failures-th in a row: time to open.
func (b *breaker) failed() bool { return b.consecutive.Add(1) >= b.failures }

// open opens a closed circuit (unless halted): a new outage starts, opening runs, the state
// changes and the probe loop starts.
func (b *breaker) open() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.circuit() != CircuitClosed || b.halted.Load() {
		return
	}
	b.outage.Add(1)
	b.recovering.Store(false)
	b.opening()
	b.state.Store(uint32(CircuitOpen))
	if b.onChange != nil {
		b.onChange(CircuitClosed, CircuitOpen)
	}
	if !b.manual {
		b.wg.Add(1)
		go b.probeLoop()
	}
}

// reclose closes an open circuit after a successful probe: closing runs, then the state
// changes.
func (b *breaker) reclose() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.circuit() != CircuitOpen {
		return
	}
	b.consecutive.Store(0)
	b.closing()
	b.recovering.Store(false)
	b.state.Store(uint32(CircuitClosed))
	if b.onChange != nil {
		b.onChange(CircuitOpen, CircuitClosed)
	}
}

// halt stops the breaker for Close: it opens no more, so it starts no probe loop after it.
func (b *breaker) halt() {
	b.mu.Lock()
	b.halted.Store(true)
	b.mu.Unlock()
}

// probe checks the store once (check). When it answers, the circuit is recovering, and the
// next probe that finds it back too closes it (back is true). So an instance decides on the
// store again one probe interval after it wrote back, by when every instance of the fleet
// (probing at the same instants: untilNextProbe) has written back its own outage: none spends
// on the store a budget the others already spent locally. A failed check starts that over.
func (b *breaker) probe(ctx context.Context) (back bool, err error) {
	if err := b.check(ctx); err != nil {
		b.recovering.Store(false)
		return false, err
	}
	if !b.recovering.Swap(true) {
		return false, nil // written back; back on the store after one more probe interval
	}
	b.reclose()
	return true, nil
}

// probeLoop probes an open circuit at every multiple of the probe interval on the clock
// (untilNextProbe) until the store is back (or the Fallback closes).
func (b *breaker) probeLoop() {
	defer b.wg.Done()
	for {
		select {
		case <-b.stop:
			return
		case <-b.clock.After(b.untilNextProbe()):
		}
		back, err := b.probe(context.Background())
		if back || (errors.Is(err, sluice.ErrClosed) && b.halted.Load()) {
			return
		}
	}
}

// untilNextProbe is the time from now to the next multiple of the probe interval of the
// clock's Unix time. Instances of a fleet whose clocks agree (NTP) therefore probe at the same
// instants: they find the store back at the same probe, write back together and switch back
// together one interval later. Probing at intervals counted from each one's own outage, they
// would switch back one after another, and the first back would spend the store's refill
// while the others still spent their local shares (a bucket's key: up to the rate x the probe
// interval over the limit).
func (b *breaker) untilNextProbe() time.Duration {
	p := int64(b.interval)
	return time.Duration(p - (b.clock.Now().UnixNano()%p+p)%p)
}
