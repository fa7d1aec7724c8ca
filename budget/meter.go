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
	return &readStream{flow: m.flow(ctx, body.Close), br: bufio.NewReaderSize(body, 4096)}
}

// Writer returns w metered as Stream meters a body, for a handler that writes a stream of
// events itself: each event is written to w (and flushed, when w is an http.Flusher) once it
// is whole and metered; when the budget refuses, the cut event is written in its place and
// every later Write fails with ErrCut. Close commits (as a client gone away when the stream
// has not ended with End). A Writer is not safe for concurrent use.
func (m *Meter) Writer(ctx context.Context, w io.Writer) *Writer {
	return &Writer{flow: m.flow(ctx, nil), w: w}
}

// flow returns the metering state of one response; closeUp closes its upstream (nil: none).
func (m *Meter) flow(ctx context.Context, closeUp func() error) *flow {
	clock := m.Clock
	if clock == nil {
		clock = sluice.SystemClock{}
	}
	f := &flow{m: m, ctx: ctx, clock: clock, closeUp: closeUp, renewed: clock.Now()}
	for i, r := range m.Reservations.Holds {
		if t := r.Budget.TTLFor(); i == 0 || t < f.ttl {
			f.ttl = t
		}
		f.first = append(f.first, r.Held)
	}
	return f
}

// flow is the metering of one response's events.
type flow struct {
	m       *Meter
	ctx     context.Context
	clock   sluice.Clock
	closeUp func() error
	renewed time.Time
	ttl     time.Duration
	first   []int64 // what each hold first held: the extension step's base

	ended    bool  // no more events (the end, or a cut)
	reported Usage // the usage the events reported
	rep      bool
	counted  int64  // output tokens counted between reports
	last     string // the type of the last event forwarded
	res      Result
	once     sync.Once
	closeErr error
}

// event meters one whole event (its bytes as sent, type and data) and returns what to pass
// on: the event, or the cut event when the budget refuses it (the flow has then ended and
// committed).
func (f *flow) event(raw []byte, typ string, data []byte) []byte {
	f.renew()
	if !f.meter(typ, data) {
		f.res.Cut = true
		f.ended = true
		f.finish()
		if f.m.Extractor == nil {
			return nil
		}
		return f.m.Extractor.CutEvent(f.last, f.message())
	}
	if typ != "" || len(data) > 0 {
		f.last = typ
	}
	return raw
}

// parser splits lines into events.
type parser struct {
	raw  []byte
	typ  string
	data []byte
	has  bool // data or a type seen: a blank line ends the event
}

// line takes one line (with its newline, if any) and reports whether it ended an event
// (raw, typ and data then hold it; reset before the next).
func (p *parser) line(line []byte) bool {
	p.raw = append(p.raw, line...)
	l := bytes.TrimRight(line, "\r\n")
	switch {
	case len(l) == 0 && len(line) > 0:
		return p.has
	case bytes.HasPrefix(l, []byte("event:")):
		p.typ, p.has = string(bytes.TrimSpace(l[len("event:"):])), true
	case bytes.HasPrefix(l, []byte("data:")):
		v := l[len("data:"):]
		if len(v) > 0 && v[0] == ' ' {
			v = v[1:]
		}
		if p.data != nil {
			p.data = append(p.data, '\n')
		}
		p.data, p.has = append(p.data, v...), true
	default:
		p.has = p.has || len(l) > 0
	}
	return false
}

func (p *parser) reset() { p.raw, p.typ, p.data, p.has = nil, "", nil, false }

// readStream is a metered event stream read from an upstream.
type readStream struct {
	*flow
	br  *bufio.Reader
	p   parser
	out []byte // bytes for the client
}

func (s *readStream) Read(b []byte) (int, error) {
	for len(s.out) == 0 {
		if s.ended {
			s.finish()
			return 0, io.EOF
		}
		s.next()
	}
	n := copy(b, s.out)
	s.out = s.out[n:]
	return n, nil
}

// Close closes the upstream and commits: a client that goes away before the end is charged
// what the upstream produced.
func (s *readStream) Close() error {
	if !s.ended {
		s.res.Disconnected = true
		s.ended = true
	}
	s.finish()
	return s.closeErr
}

// next reads the next event from the upstream and meters it; at the upstream's end the rest
// (a last event without its blank line) is passed on as it is.
func (s *readStream) next() {
	for {
		line, err := s.br.ReadBytes('\n')
		if s.p.line(line) {
			s.out = s.event(s.p.raw, s.p.typ, s.p.data)
			s.p.reset()
			return
		}
		if err != nil {
			if s.p.has {
				s.out = s.event(s.p.raw, s.p.typ, s.p.data)
			} else {
				s.out = s.p.raw
			}
			s.p.reset()
			s.ended = true
			return
		}
	}
}

// ErrCut is what a metered Writer's Write returns once the stream was cut for want of budget:
// the handler should stop writing.
var ErrCut = errors.New("budget: the stream was cut: the budget is spent")

// Writer is a metered stream a handler writes (Meter.Writer).
type Writer struct {
	*flow
	w       io.Writer
	p       parser
	pending []byte // bytes of a line not yet whole
}

// Write meters the events p completes and writes them on; it returns ErrCut once the stream
// was cut (the bytes of p after the cut are dropped).
func (w *Writer) Write(p []byte) (int, error) {
	if w.ended {
		return 0, ErrCut
	}
	w.pending = append(w.pending, p...)
	for {
		i := bytes.IndexByte(w.pending, '\n')
		if i < 0 {
			break
		}
		line := w.pending[:i+1]
		whole := w.p.line(line)
		w.pending = w.pending[i+1:]
		if !whole {
			continue
		}
		out := w.event(w.p.raw, w.p.typ, w.p.data)
		w.p.reset()
		if err := w.send(out); err != nil {
			return len(p), err
		}
		if w.ended {
			w.pending = nil
			return len(p), ErrCut
		}
	}
	if len(w.pending) == 0 {
		w.pending = nil
	}
	return len(p), nil
}

// send writes out and flushes it.
func (w *Writer) send(out []byte) error {
	if len(out) == 0 {
		return nil
	}
	if _, err := w.w.Write(out); err != nil {
		return err
	}
	if fl, ok := w.w.(interface{ Flush() }); ok {
		fl.Flush()
	}
	return nil
}

// End commits a stream the handler wrote to its end: what the events reported (or the metered
// usage). A half-written last event is metered and sent first.
func (w *Writer) End() {
	if !w.ended {
		if len(w.pending) > 0 {
			w.p.line(w.pending)
			w.pending = nil
		}
		if w.p.has {
			_ = w.send(w.event(w.p.raw, w.p.typ, w.p.data))
		} else {
			_ = w.send(w.p.raw)
		}
		w.p.reset()
		w.ended = true
	}
	w.finish()
}

// Close commits a stream that did not reach its end (the client went away, the handler
// failed) as a client gone away: what was produced until then. After End it does nothing.
func (w *Writer) Close() error {
	if !w.ended {
		w.res.Disconnected = true
		w.ended = true
	}
	w.finish()
	return nil
}

// Result returns how the stream ended, once it has (End, Close, or a cut).
func (w *Writer) Result() Result { return w.res }

func (f *flow) message() string {
	if f.m.Message != "" {
		return f.m.Message
	}
	return "budget exhausted"
}

// meter counts an event and extends the reservation as it needs; false: the budget refuses,
// cut the stream before this event.
func (f *flow) meter(typ string, data []byte) bool {
	if len(data) == 0 || bytes.Equal(data, []byte("[DONE]")) {
		return true
	}
	if f.m.Extractor != nil && f.m.Extractor.Event(typ, data, &f.reported) {
		f.rep = true
	} else {
		f.counted += f.count(data)
	}
	need := f.m.costs(f.current())
	for i, n := range need {
		held := f.m.Reservations.Holds[i].Held
		if n <= held {
			continue
		}
		if !f.extend(i, n-held) {
			return false
		}
	}
	return true
}

// count is the output an event without usage counts.
func (f *flow) count(data []byte) int64 {
	if f.m.Counting == PerByte {
		bpt := f.m.BytesPerToken
		if bpt <= 0 {
			bpt = 4
		}
		return (int64(len(data)) + bpt - 1) / bpt
	}
	if f.m.TokensPerEvent > 0 {
		return f.m.TokensPerEvent
	}
	return 1
}

// current is the metered usage: the report so far, the input estimate until the response
// reports its own, and the output counted if more than reported.
func (f *flow) current() Usage {
	u := f.reported
	u.Model = f.m.Estimate.Model
	if u.InputTokens == 0 {
		u.InputTokens = f.m.Estimate.InputTokens
	}
	u.OutputTokens = max(u.OutputTokens, f.counted)
	return u
}

// extend holds at least more units more on hold i: a step (Step of what it first held) when
// that is more, else exactly what is needed; false when the budget refuses even that.
func (f *flow) extend(i int, more int64) bool {
	frac := f.m.Step
	if frac <= 0 {
		frac = 0.25
	}
	step := max(more, int64(math.Ceil(frac*float64(f.first[i]))))
	for _, n := range []int64{step, more} {
		d, err := f.m.Reservations.Holds[i].Extend(f.ctx, n)
		if err != nil {
			f.res.Err = err
			return false
		}
		if d.Allowed {
			f.renewed = f.clock.Now()
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
func (f *flow) renew() {
	if f.ttl <= 0 || f.clock.Now().Sub(f.renewed) < f.ttl/2 {
		return
	}
	for i := range f.first {
		if _, err := f.m.Reservations.Holds[i].Extend(f.ctx, 0); err != nil {
			f.res.Err = err
		}
	}
	f.renewed = f.clock.Now()
}

// finish closes the upstream and commits, once: the response's own usage when it reached its
// end with a report, else the metered usage (what the upstream produced), which for a cut
// stream is at most what each hold held (the event that did not fit was not forwarded).
func (f *flow) finish() {
	f.once.Do(func() {
		if f.closeUp != nil {
			f.closeErr = f.closeUp()
		}
		res := f.res
		res.Reported = f.rep
		ctx := context.WithoutCancel(f.ctx) // the commit outlives a client gone away
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		res.Usage = f.current()
		if f.rep && !res.Cut && !res.Disconnected {
			res.Usage = f.reported
			if res.Usage.Model == "" {
				res.Usage.Model = f.m.Estimate.Model
			}
		}
		res.Costs = f.m.costs(res.Usage)
		if res.Cut {
			for i := range res.Costs {
				res.Costs[i] = min(res.Costs[i], f.m.Reservations.Holds[i].Held)
			}
		}
		f.res = f.m.commitCosts(ctx, res)
	})
}

// JSON returns body, a whole JSON response (not streamed) of length bytes (-1 when unknown),
// read through as it is: its first max bytes (0 means 1 MiB) are kept, and at its end (or
// Close) the Meter commits the usage they report (Meter.Body), or what the reservation holds
// when they report none (or the body was longer). With a length, the commit is made as the
// last byte is read, before it is returned: a client that has the whole response sees the
// budget charged.
func (m *Meter) JSON(ctx context.Context, body io.ReadCloser, length int64, max int) io.ReadCloser {
	if max <= 0 {
		max = 1 << 20
	}
	return &jsonBody{m: m, ctx: ctx, up: body, left: length, max: max}
}

type jsonBody struct {
	m    *Meter
	ctx  context.Context
	up   io.ReadCloser
	left int64 // bytes still to come; -1 unknown
	max  int
	buf  []byte
	over bool
	once sync.Once
}

func (j *jsonBody) Read(p []byte) (int, error) {
	n, err := j.up.Read(p)
	if !j.over {
		if len(j.buf)+n > j.max {
			j.over, j.buf = true, nil
		} else {
			j.buf = append(j.buf, p[:n]...)
		}
	}
	if j.left >= 0 {
		j.left -= int64(n)
	}
	if err != nil || j.left == 0 {
		j.commit()
	}
	return n, err
}

func (j *jsonBody) Close() error {
	err := j.up.Close()
	j.commit()
	return err
}

func (j *jsonBody) commit() {
	j.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(j.ctx), 5*time.Second)
		defer cancel()
		if j.over {
			j.m.commitHeld(ctx, Result{})
			return
		}
		j.m.Body(ctx, j.buf)
	})
}
