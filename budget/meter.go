package budget

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// A Charge is what usage costs on one budget: its tokens (Tokens), or its price (Prices.Cost).
type Charge func(u Usage) (int64, error)

// Tokens is the Charge of a token budget: every token of u.
func Tokens(u Usage) (int64, error) { return u.Tokens(), nil }

// Counting is how a Meter counts a stream's output while its events report no usage.
type Counting uint8

const (
	// PerEvent counts TokensPerEvent output tokens for each event with data (a provider
	// sends about one token per event).
	PerEvent Counting = iota
	// PerByte counts a token for every BytesPerToken bytes of the events' data.
	PerByte
)

// Meter meters an LLM response against its reservation and commits what it cost. Build one per
// response; it is not safe for concurrent use.
//
// A streamed response (Stream) is metered as it flows, event by event: the usage an event
// reports (Extractor), else the events counted (Counting), priced by each budget's Charge,
// must stay within what the reservation holds. When the next event would take a budget past
// its hold, the Meter first extends the hold from the budget by a step (Step of what it first
// held, or what the event needs if more); when the budget refuses, the stream ends there,
// within one event: that event is not forwarded, the Extractor's error event is, and the
// upstream is closed. A response that reaches its end commits the usage it reported (or the
// metered usage); one cut commits what it held, a client that goes away (Close before the
// end) what the upstream produced up to then. Both are counted in the Result passed to Done.
type Meter struct {
	// Reservations are the response's reservations (sluice.Limiter.ReserveAll; a single
	// Reservation as Reservations{Holds: []sluice.Reservation{r}}).
	Reservations *sluice.Reservations
	// Charges price usage on each of the reservations, in order.
	Charges []Charge
	// Extractor reads the usage the response reports (OpenAI, Anthropic, the caller's); nil
	// counts output only.
	Extractor Extractor
	// Estimate is the request's estimate (Estimator): its Model prices the metered usage and
	// its InputTokens count from the start, until the response reports its own.
	Estimate Usage
	// Counting, TokensPerEvent (0 means 1) and BytesPerToken (0 means 4) count output between
	// reports.
	Counting       Counting
	TokensPerEvent int64
	BytesPerToken  int64
	// Step is the part of a hold's first size an extension asks for at least (0 means 1/4).
	Step float64
	// Clock times the renewal: a reservation not extended for half its TTL is renewed (an
	// extension of 0), so a long stream keeps it. Nil is sluice.SystemClock.
	Clock sluice.Clock
	// Message is the cut event's message (default "budget exhausted").
	Message string
	// Done, when set, is called once, when the response has ended and been committed.
	Done func(Result)
}

// Result is how a metered response ended and what it was charged.
type Result struct {
	// Usage is the usage committed: the response's own report when it reached its end with
	// one, else the metered usage.
	Usage Usage
	// Reported says whether the response reported its usage.
	Reported bool
	// Costs are what each hold was committed at.
	Costs []int64
	// Cut says the Meter ended the stream for want of budget; Disconnected that the client
	// went away before the end.
	Cut, Disconnected bool
	// Decision and Err are the commit's (Err also an extension's that failed).
	Decision sluice.Decision
	Err      error
}

// Body commits a response that is not streamed, whose whole body is body: at the usage it
// reports, or, when it reports none, at what the reservation holds (nothing is known of what
// it cost).
func (m *Meter) Body(ctx context.Context, body []byte) Result {
	var res Result
	if m.Extractor != nil {
		res.Usage, res.Reported = m.Extractor.Body(body)
	}
	if !res.Reported {
		return m.commitHeld(ctx, res)
	}
	return m.commit(ctx, res)
}

// Cancel ends the reservation at no cost (an upstream error that produced nothing).
func (m *Meter) Cancel(ctx context.Context) Result {
	res := Result{Costs: make([]int64, len(m.Reservations.Holds))}
	res.Decision, res.Err = m.Reservations.Cancel(ctx)
	m.done(res)
	return res
}

// commit commits res.Usage, priced by each Charge (the request's model when the reported one
// has no price).
func (m *Meter) commit(ctx context.Context, res Result) Result {
	res.Costs = m.costs(res.Usage)
	return m.commitCosts(ctx, res)
}

// commitHeld commits what the reservation holds.
func (m *Meter) commitHeld(ctx context.Context, res Result) Result {
	res.Costs = make([]int64, len(m.Reservations.Holds))
	for i := range res.Costs {
		res.Costs[i] = m.Reservations.Holds[i].Held
	}
	return m.commitCosts(ctx, res)
}

// commitCosts commits res.Costs, joining its error to res.Err, and reports res to Done.
func (m *Meter) commitCosts(ctx context.Context, res Result) Result {
	d, err := m.Reservations.Commit(ctx, res.Costs...)
	res.Decision, res.Err = d, errors.Join(res.Err, err)
	m.done(res)
	return res
}

func (m *Meter) done(res Result) {
	if m.Done != nil {
		m.Done(res)
	}
}

// costs prices u on every hold, at most sluice.MaxLimit each; a model without a price is
// priced as the request's.
func (m *Meter) costs(u Usage) []int64 {
	out := make([]int64, len(m.Charges))
	for i, c := range m.Charges {
		v, err := c(u)
		if err != nil && u.Model != m.Estimate.Model {
			u2 := u
			u2.Model = m.Estimate.Model
			v, err = c(u2)
		}
		if err != nil {
			v = m.Reservations.Holds[i].Held // no price: what it held
		}
		out[i] = min(max(v, 0), sluice.MaxLimit)
	}
	return out
}

// Stream returns body, a server-sent event stream, metered (see Meter): read it instead of
// body, and close it (which closes body and commits, as a client going away when the stream
// has not ended).
func (m *Meter) Stream(ctx context.Context, body io.ReadCloser) io.ReadCloser {
	clock := m.Clock
	if clock == nil {
		clock = sluice.SystemClock{}
	}
	s := &stream{m: m, ctx: ctx, up: body, br: bufio.NewReaderSize(body, 4096), clock: clock}
	s.renewed = clock.Now()
	for i, r := range m.Reservations.Holds {
		if t := r.Budget.TTLFor(); i == 0 || t < s.ttl {
			s.ttl = t
		}
	}
	s.first = make([]int64, len(m.Reservations.Holds))
	for i := range s.first {
		s.first[i] = m.Reservations.Holds[i].Held
	}
	return s
}

// stream is a metered event stream.
type stream struct {
	m       *Meter
	ctx     context.Context
	up      io.ReadCloser
	br      *bufio.Reader
	clock   sluice.Clock
	renewed time.Time
	ttl     time.Duration
	first   []int64 // what each hold first held: the extension step's base

	out      []byte // bytes for the client
	ended    bool   // no more from the upstream (its end, or a cut)
	reported Usage  // the usage the events reported
	rep      bool
	counted  int64  // output tokens counted between reports
	last     string // the type of the last event forwarded
	res      Result
	once     sync.Once
	closeErr error
}

func (s *stream) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if s.ended {
			s.finish()
			return 0, io.EOF
		}
		s.next()
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// Close closes the upstream and commits: a client that goes away before the end is charged
// what the upstream produced.
func (s *stream) Close() error {
	if !s.ended {
		s.res.Disconnected = true
		s.ended = true
	}
	s.finish()
	return s.closeErr
}

// next reads the next event from the upstream and meters it, queueing it (or the cut event)
// for the client; at the upstream's end it commits.
func (s *stream) next() {
	raw, typ, data, err := s.readEvent()
	s.renew()
	if len(raw) > 0 {
		if !s.meter(typ, data) {
			s.out = nil
			if s.m.Extractor != nil {
				s.out = s.m.Extractor.CutEvent(s.last, s.message())
			}
			s.res.Cut = true
			s.ended = true
			s.finish()
			return
		}
		s.out = raw
		if typ != "" || len(data) > 0 {
			s.last = typ
		}
	}
	if err != nil {
		s.ended = true
		if len(s.out) == 0 {
			s.finish()
		}
	}
}

func (s *stream) message() string {
	if s.m.Message != "" {
		return s.m.Message
	}
	return "budget exhausted"
}

// readEvent reads one event: its bytes as sent (through its blank line), its type and its data
// (data lines joined by "\n"). err is the upstream's error or io.EOF after the last event.
func (s *stream) readEvent() (raw []byte, typ string, data []byte, err error) {
	for {
		line, err := s.br.ReadBytes('\n')
		raw = append(raw, line...)
		l := bytes.TrimRight(line, "\r\n")
		switch {
		case len(l) == 0 && len(line) > 0: // the blank line ending the event
			if len(raw) == len(line) {
				continue // blank lines between events: forwarded with the next one
			}
			return raw, typ, data, err
		case bytes.HasPrefix(l, []byte("event:")):
			typ = string(bytes.TrimSpace(l[len("event:"):]))
		case bytes.HasPrefix(l, []byte("data:")):
			v := l[len("data:"):]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, v...)
		}
		if err != nil {
			return raw, typ, data, err
		}
	}
}

// meter counts an event and extends the reservation as it needs; false: the budget refuses,
// cut the stream before this event.
func (s *stream) meter(typ string, data []byte) bool {
	if len(data) == 0 || bytes.Equal(data, []byte("[DONE]")) {
		return true
	}
	if s.m.Extractor != nil && s.m.Extractor.Event(typ, data, &s.reported) {
		s.rep = true
	} else {
		s.counted += s.count(data)
	}
	need := s.m.costs(s.current())
	for i, n := range need {
		held := s.m.Reservations.Holds[i].Held
		if n <= held {
			continue
		}
		if !s.extend(i, n-held) {
			return false
		}
	}
	return true
}

// count is the output an event without usage counts.
func (s *stream) count(data []byte) int64 {
	if s.m.Counting == PerByte {
		bpt := s.m.BytesPerToken
		if bpt <= 0 {
			bpt = 4
		}
		return (int64(len(data)) + bpt - 1) / bpt
	}
	if s.m.TokensPerEvent > 0 {
		return s.m.TokensPerEvent
	}
	return 1
}

// current is the metered usage: the report so far, the input estimate until the response
// reports its own, and the output counted if more than reported.
func (s *stream) current() Usage {
	u := s.reported
	u.Model = s.m.Estimate.Model
	if u.InputTokens == 0 {
		u.InputTokens = s.m.Estimate.InputTokens
	}
	u.OutputTokens = max(u.OutputTokens, s.counted)
	return u
}

// extend holds at least more units more on hold i: a step (Step of what it first held) when
// that is more, else exactly what is needed; false when the budget refuses even that.
func (s *stream) extend(i int, more int64) bool {
	frac := s.m.Step
	if frac <= 0 {
		frac = 0.25
	}
	step := max(more, int64(math.Ceil(frac*float64(s.first[i]))))
	for _, n := range []int64{step, more} {
		d, err := s.m.Reservations.Holds[i].Extend(s.ctx, n)
		if err != nil {
			s.res.Err = err
			return false
		}
		if d.Allowed {
			s.renewed = s.clock.Now()
			return true
		}
		if n == more {
			break
		}
	}
	return false
}

// renew extends every hold by nothing once half the reservation's TTL has passed since it was
// last extended, so that it outlives a long stream.
func (s *stream) renew() {
	if s.ttl <= 0 || s.clock.Now().Sub(s.renewed) < s.ttl/2 {
		return
	}
	for i := range s.first {
		if _, err := s.m.Reservations.Holds[i].Extend(s.ctx, 0); err != nil {
			s.res.Err = err
		}
	}
	s.renewed = s.clock.Now()
}

// finish closes the upstream and commits, once: the response's own usage when it reached its
// end with a report, else the metered usage (what the upstream produced), which for a cut
// stream is at most what each hold held (the event that did not fit was not forwarded).
func (s *stream) finish() {
	s.once.Do(func() {
		s.closeErr = s.up.Close()
		res := s.res
		res.Reported = s.rep
		ctx := context.WithoutCancel(s.ctx) // the commit outlives a client gone away
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		res.Usage = s.current()
		if s.rep && !res.Cut && !res.Disconnected {
			res.Usage = s.reported
			if res.Usage.Model == "" {
				res.Usage.Model = s.m.Estimate.Model
			}
		}
		res.Costs = s.m.costs(res.Usage)
		if res.Cut {
			for i := range res.Costs {
				res.Costs[i] = min(res.Costs[i], s.m.Reservations.Holds[i].Held)
			}
		}
		s.m.commitCosts(ctx, res)
	})
}
