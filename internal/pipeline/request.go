package pipeline

import (
	"sync"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/internal/inflight"
)

// Request is one request going through the pipeline: the keys the transport read, the checks
// and claims made of them, and, once decided, their outcome. Get one with Pipeline.Get, fill it
// (Begin, Add; Claim), Decide it, then Finish it after the handler and Put it back. It is not
// safe for concurrent use: it belongs to one request.
type Request struct {
	p       *Pipeline
	buf     []byte
	start   int   // where the key being written starts in buf (Begin)
	ends    []int // ends[i]: end of checks[i]'s key in buf
	checks  []sluice.Check
	which   []int // which[i]: the limit of checks[i]
	results []Result
	mask    uint64
	hot     hotkey.Batch     // the checks of hot keys, charged before the store decides
	claims  []inflight.Claim // the in-flight limits, taken once the checks allow
	refused int              // the claim refused or failed, -1 for none
	charged *sluice.Limiter  // the limiter that charged the checks, for Settle
	held    bool             // the claims hold their slots (Finish releases them)
	since   time.Time        // when the slots were taken (the pipeline's clock)
	// budgets (budget.go): the holds of the budget limits, which[i] their limits, and once
	// reserved their reservations
	holds     []sluice.Hold
	holdWhich []int
	holdSpans [][2]int // where each hold's key is in buf
	resv      sluice.Reservations
	reserved  bool
}

var requestPool = sync.Pool{New: func() any {
	return &Request{buf: make([]byte, 0, 256), ends: make([]int, 0, 4), checks: make([]sluice.Check, 0, 4),
		which: make([]int, 0, 4), results: make([]Result, 0, 4)}
}}

// Get returns an empty Request of p.
func (p *Pipeline) Get() *Request {
	q := requestPool.Get().(*Request)
	q.p, q.refused = p, -1
	return q
}

// Put empties q and returns it to the pool. q must not be used after.
func (q *Request) Put() {
	clear(q.checks) // drop the key strings, which may point into buf
	clear(q.claims)
	clear(q.results)
	q.buf, q.ends, q.checks, q.which, q.results, q.mask = q.buf[:0], q.ends[:0], q.checks[:0], q.which[:0], q.results[:0], 0
	q.claims, q.charged, q.held, q.p = q.claims[:0], nil, false, nil
	if len(q.holds) > 0 || q.reserved {
		clear(q.holds)
		q.holds, q.holdWhich, q.holdSpans = q.holds[:0], q.holdWhich[:0], q.holdSpans[:0]
		q.resv, q.reserved = sluice.Reservations{}, false
	}
	q.hot.Reset()
	if cap(q.buf) <= 64<<10 {
		requestPool.Put(q)
	}
}

// Done is Finish then Put: the end of a request that ran.
func (q *Request) Done() {
	q.Finish()
	q.Put()
}

// Begin starts the key of limit i: it appends the limit's key prefix to q's buffer and
// returns the buffer, for the transport to append the request's key to and pass to Add.
func (q *Request) Begin(i int) []byte {
	q.start = len(q.buf)
	return append(q.buf, q.p.limits[i].prefix...)
}

// Add takes the key the transport appended to Begin's buffer (buf) for limit i, the request's
// cost n under it and its criticality class c (read only by limits with Shares): a hot key
// still cold is admitted here without a store call; an in-flight limit gets a claim; a rated
// limit a check. A transport with no key for the limit calls neither Add nor anything else
// after Begin.
func (q *Request) Add(i int, buf []byte, n int64, c sluice.Criticality) {
	q.buf = buf
	l := &q.p.limits[i]
	if l.hot != nil && q.hot.Observe(l.hot, len(q.checks), string(q.buf[q.start:]), n).Cold {
		q.buf = q.buf[:q.start]
		return
	}
	if l.InFlight != nil {
		q.claims = append(q.claims, inflight.Claim{Name: l.Name, Key: string(q.buf[q.start:]), InFlight: *l.InFlight,
			Adaptive: l.Adaptive, Classed: l.Shares != nil, Class: c})
		if !l.Rated() {
			q.buf = q.buf[:q.start]
			return
		}
	}
	if l.Budget != nil {
		q.addHold(i, n)
		return
	}
	q.ends = append(q.ends, len(q.buf))
	q.checks = append(q.checks, sluice.Check{Rule: l.Rule, N: n})
	if l.Shares != nil {
		ch := &q.checks[len(q.checks)-1]
		ch.Criticality, ch.Holdback = c, l.Shares.Holdback(c, l.Rule.Capacity())
	}
	q.which = append(q.which, i)
	q.mask |= 1 << i
}

// Claim adds an in-flight claim made by the transport itself (a descriptor's max_in_flight
// read from rls's verdicts, say).
func (q *Request) Claim(c inflight.Claim) { q.claims = append(q.claims, c) }

// Classed reports whether limit i reads the request's class (it has Shares): a transport
// reads the class only when one does.
func (q *Request) Classed(i int) bool { return q.p.limits[i].Shares != nil }

// Empty reports whether no limit applies to the request: no check, no budget and no claim.
func (q *Request) Empty() bool { return len(q.checks) == 0 && len(q.claims) == 0 && len(q.holds) == 0 }

// cutKeys sets the checks' keys, cut from the buffer now that it no longer grows. The keys
// lie one after the other in it, with the budgets' between them (holdSpans, skipped).
func (q *Request) cutKeys() {
	start, h := 0, 0
	for i, end := range q.ends {
		for h < len(q.holdSpans) && q.holdSpans[h][0] == start {
			start = q.holdSpans[h][1]
			h++
		}
		if q.checks[i].Key == "" {
			if q.p.borrowKeys {
				q.checks[i].Key = unsafe.String(&q.buf[start], end-start)
			} else {
				q.checks[i].Key = string(q.buf[start:end])
			}
		}
		start = end
	}
}

// Checks returns the request's rate checks, decided once Decide returned: their keys, rules,
// costs and decisions, in the order the transport added them.
func (q *Request) Checks() []sluice.Check { return q.checks }

// Result is the outcome of one rate limit for a request: the limit's name (as the answer's
// rate-limit headers and denial show it), its rule and the decision.
type Result struct {
	// Name identifies the limit to clients. Characters outside printable ASCII are replaced
	// by "_" where it is written; an empty name is shown as "default".
	Name     string
	Rule     sluice.Rule
	Decision sluice.Decision
}

// Results returns the result of each check once Decide returned, in the checks' order, then
// of each budget reserved (its reservation's decision, or after the handler its commit's): what
// the answer's rate-limit headers and denial are written from. The slice is q's: valid until
// Put.
func (q *Request) Results() []Result {
	if len(q.results) != len(q.checks)+len(q.resv.Holds) {
		q.results = q.results[:0]
		for i := range q.checks {
			c := &q.checks[i]
			q.results = append(q.results, Result{Name: q.p.limits[q.which[i]].Name, Rule: c.Rule, Decision: c.Decision})
		}
		q.results = q.budgetResults(q.results)
	}
	return q.results
}

// Reset returns the reset a request decided d (its Outcome's Decision) is told:
// sluice.Decision.ResetIn; when denied, the longest of the denying checks' and budgets'
// (positive, for a request that can never be admitted too): how long until it would pass.
func (q *Request) Reset(d sluice.Decision) time.Duration {
	if d.Allowed {
		return d.ResetIn(0)
	}
	var wait time.Duration
	for _, c := range q.checks {
		if !c.Decision.Allowed {
			wait = max(wait, c.Decision.ResetIn(c.Rule.Period))
		}
	}
	for i := range q.resv.Holds {
		if r := &q.resv.Holds[i]; !r.Decision.Allowed {
			wait = max(wait, r.Decision.ResetIn(r.Budget.Rule.Period))
		}
	}
	return max(wait, d.ResetIn(0)) // the combined decision denies: positive
}

// Mask returns the set of limits with a check (bit i for limit i < 64): the same set, the same
// rate-limit policy header.
func (q *Request) Mask() uint64 { return q.mask }

// Refused returns the claim refused, or whose acquire failed, and nil when there is none.
func (q *Request) Refused() *inflight.Claim {
	if q.refused < 0 {
		return nil
	}
	return &q.claims[q.refused]
}
