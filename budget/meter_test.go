package budget_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/budget"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// chatStream is a Chat Completions stream of n content chunks of one token each and, when
// usage, the usage chunk of include_usage (prompt tokens, n completion tokens), then [DONE].
func chatStream(n int, prompt int64, usage bool) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d\"}}],\"usage\":null}\n\n", i)
	}
	if usage {
		fmt.Fprintf(&b, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o\",\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n", prompt, n, prompt+int64(n))
	}
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

// upstream is a response body that records its Close.
type upstream struct {
	io.Reader
	closed atomic.Bool
}

func (u *upstream) Close() error { u.closed.Store(true); return nil }

type fixtureLimiter struct {
	l     *sluice.Limiter
	clock *sluicetest.ManualClock
}

func newFixture(t testing.TB) fixtureLimiter {
	t.Helper()
	clock := sluicetest.NewManualClock(t0)
	s, err := memory.New(memory.WithClock(clock), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return fixtureLimiter{sluice.New(s), clock}
}

// remaining peeks the budget of key.
func (f fixtureLimiter) remaining(t testing.TB, key string, r sluice.Rule) int64 {
	t.Helper()
	d, err := f.l.Peek(context.Background(), key, r)
	if err != nil {
		t.Fatal(err)
	}
	return d.Remaining
}

func (f fixtureLimiter) reserve(t testing.TB, key string, b sluice.Budget, n int64) *sluice.Reservations {
	t.Helper()
	r, err := f.l.ReserveAll(context.Background(), []sluice.Hold{{Key: key, Budget: b, N: n}})
	if err != nil || !r.Decision.Allowed {
		t.Fatalf("reserve %d: %+v %v", n, r, err)
	}
	return &r
}

// TestMeterWithinItsReservation: a stream that fits its reservation passes byte for byte and
// commits the usage it reports (OpenAI's Responses example: 37 + 11 tokens).
func TestMeterWithinItsReservation(t *testing.T) {
	f := newFixture(t)
	b := sluice.Budget{Rule: sluice.FixedWindow(1000, time.Minute), Mode: sluice.Strict}
	stream := fixture(t, "openai_responses.sse")
	var res budget.Result
	m := &budget.Meter{Reservations: f.reserve(t, "k", b, 137), Charges: []budget.Charge{budget.Tokens}, Extractor: budget.OpenAI,
		Estimate: budget.Usage{Model: "gpt-5.4", InputTokens: 37}, Done: func(r budget.Result) { res = r }}
	up := &upstream{Reader: bytes.NewReader(stream)}
	body := m.Stream(context.Background(), up)
	got, err := io.ReadAll(body)
	if err != nil || !bytes.Equal(got, stream) {
		t.Fatalf("the stream changed (%v)", err)
	}
	body.Close()
	if !up.closed.Load() || res.Cut || res.Disconnected || !res.Reported || res.Costs[0] != 48 || res.Err != nil {
		t.Fatalf("result %+v", res)
	}
	if rem := f.remaining(t, "k", b.Rule); rem != 952 {
		t.Fatalf("remaining %d, want 952", rem)
	}
}

// TestMeterExtendsInSteps: a stream longer than its reservation is extended from the budget as
// it flows, and commits what it reported.
func TestMeterExtendsInSteps(t *testing.T) {
	f := newFixture(t)
	b := sluice.Budget{Rule: sluice.FixedWindow(1000, time.Minute), Mode: sluice.Strict}
	r := f.reserve(t, "k", b, 30)
	var res budget.Result
	m := &budget.Meter{Reservations: r, Charges: []budget.Charge{budget.Tokens}, Extractor: budget.OpenAI,
		Estimate: budget.Usage{Model: "gpt-4o", InputTokens: 10}, Done: func(x budget.Result) { res = x }}
	body := m.Stream(context.Background(), &upstream{Reader: bytes.NewReader(chatStream(100, 10, true))})
	got, _ := io.ReadAll(body)
	body.Close()
	if n := len(events(got)); n != 102 {
		t.Fatalf("%d events forwarded, want 102", n)
	}
	if res.Cut || res.Costs[0] != 110 || r.Holds[0].Held != 0 {
		t.Fatalf("result %+v, held %d after the commit", res, r.Holds[0].Held)
	}
	if rem := f.remaining(t, "k", b.Rule); rem != 890 {
		t.Fatalf("remaining %d, want 890", rem)
	}
}

// TestMeterCutsWithinOneEvent: when the budget runs out mid-stream, the stream ends there: the
// events that fit are forwarded, the next one is not, the provider's error event and the end
// follow, the upstream is closed, and the budget is spent exactly (strict: never over).
func TestMeterCutsWithinOneEvent(t *testing.T) {
	f := newFixture(t)
	b := sluice.Budget{Rule: sluice.FixedWindow(50, time.Minute), Mode: sluice.Strict}
	var res budget.Result
	m := &budget.Meter{Reservations: f.reserve(t, "k", b, 30), Charges: []budget.Charge{budget.Tokens}, Extractor: budget.OpenAI,
		Estimate: budget.Usage{Model: "gpt-4o", InputTokens: 10}, Done: func(x budget.Result) { res = x }}
	up := &upstream{Reader: bytes.NewReader(chatStream(100, 10, true))}
	body := m.Stream(context.Background(), up)
	got, _ := io.ReadAll(body)
	evs := events(got)
	// 10 input tokens and 40 content events fit the 50; the 41st is cut
	if len(evs) != 42 || evs[39].data != strings.TrimPrefix(strings.SplitN(string(chatStream(40, 0, false)), "\n\n", 41)[39], "data: ") {
		t.Fatalf("%d events forwarded, want 40 content events, the error and [DONE]", len(evs))
	}
	if !strings.Contains(evs[40].data, `"error"`) || evs[41].data != "[DONE]" {
		t.Fatalf("the stream ends with %+v", evs[40:])
	}
	if !up.closed.Load() || !res.Cut || res.Costs[0] != 50 {
		t.Fatalf("result %+v, upstream closed %v", res, up.closed.Load())
	}
	body.Close()
	if rem := f.remaining(t, "k", b.Rule); rem != 0 {
		t.Fatalf("remaining %d", rem)
	}
	if r, _ := f.l.Reserve(context.Background(), "k", b, 1); r.Decision.Allowed {
		t.Fatal("the budget is spent, yet a reservation of 1 was admitted: over by the cut event")
	}
}

// TestMeterChargesADisconnectedClient: a client that goes away mid-stream is charged what the
// upstream produced until then, not its reservation nor nothing.
func TestMeterChargesADisconnectedClient(t *testing.T) {
	f := newFixture(t)
	b := sluice.Budget{Rule: sluice.FixedWindow(1000, time.Minute), Mode: sluice.Strict}
	var res budget.Result
	m := &budget.Meter{Reservations: f.reserve(t, "k", b, 500), Charges: []budget.Charge{budget.Tokens}, Extractor: budget.OpenAI,
		Estimate: budget.Usage{Model: "gpt-4o", InputTokens: 10}, Done: func(x budget.Result) { res = x }}
	up := &upstream{Reader: bytes.NewReader(chatStream(100, 10, true))}
	body := m.Stream(context.Background(), up)
	one := make([]byte, 1)
	for seen := 0; seen < 25; {
		if _, err := body.Read(one); err != nil {
			t.Fatal(err)
		}
		if one[0] == '\n' {
			seen++ // two newlines an event: 12 events and a half
		}
	}
	body.Close()
	if !up.closed.Load() || !res.Disconnected || res.Costs[0] != 10+13 {
		t.Fatalf("result %+v: want 10 input and the 13 events read from the upstream", res)
	}
	if rem := f.remaining(t, "k", b.Rule); rem != 1000-23 {
		t.Fatalf("remaining %d", rem)
	}
}

// TestMeterAnthropicStream: Anthropic's recorded stream: message_start's usage replaces the
// input estimate, the deltas are counted until message_delta's totals, which are committed.
func TestMeterAnthropicStream(t *testing.T) {
	f := newFixture(t)
	b := sluice.Budget{Rule: sluice.FixedWindow(10_000, time.Minute), Mode: sluice.Strict}
	var res budget.Result
	m := &budget.Meter{Reservations: f.reserve(t, "k", b, 100), Charges: []budget.Charge{budget.Tokens}, Extractor: budget.Anthropic,
		Estimate: budget.Usage{Model: "claude-3-7-sonnet", InputTokens: 50}, Done: func(x budget.Result) { res = x }}
	stream := fixture(t, "anthropic_messages.sse")
	body := m.Stream(context.Background(), &upstream{Reader: bytes.NewReader(stream)})
	got, _ := io.ReadAll(body)
	body.Close()
	if !bytes.Equal(got, stream) || res.Costs[0] != 394+79 || !res.Reported {
		t.Fatalf("result %+v", res)
	}
}

// TestMeterRenewsALongStream: a stream slower than its reservation's TTL keeps it, renewed at
// half the TTL, and commits at its end.
func TestMeterRenewsALongStream(t *testing.T) {
	f := newFixture(t)
	b := sluice.Budget{Rule: sluice.FixedWindow(1000, time.Hour), Mode: sluice.Strict, TTL: time.Second}
	var res budget.Result
	m := &budget.Meter{Reservations: f.reserve(t, "k", b, 100), Charges: []budget.Charge{budget.Tokens}, Extractor: budget.OpenAI,
		Estimate: budget.Usage{Model: "gpt-4o", InputTokens: 10}, Clock: f.clock, Done: func(x budget.Result) { res = x }}
	body := m.Stream(context.Background(), &upstream{Reader: bytes.NewReader(chatStream(10, 10, true))})
	buf := make([]byte, 64<<10)
	for {
		f.clock.Advance(600 * time.Millisecond) // 6 s in all, the TTL 1 s
		if _, err := body.Read(buf); err != nil {
			break
		}
	}
	body.Close()
	if res.Err != nil || res.Costs[0] != 20 {
		t.Fatalf("result %+v", res)
	}
}

// TestMeterBody: a response that is not streamed commits its usage, or, reporting none, what
// its reservation holds.
func TestMeterBody(t *testing.T) {
	f := newFixture(t)
	b := sluice.Budget{Rule: sluice.FixedWindow(1000, time.Minute), Mode: sluice.Strict}
	p := prices(t)
	dollars := sluice.Budget{Rule: sluice.FixedWindow(1_000_000, time.Hour)}
	r, err := f.l.ReserveAll(context.Background(), []sluice.Hold{{Key: "tok", Budget: b, N: 200}, {Key: "usd", Budget: dollars, N: 5000}})
	if err != nil || !r.Decision.Allowed {
		t.Fatal(r, err)
	}
	m := &budget.Meter{Reservations: &r, Charges: []budget.Charge{budget.Tokens, p.Cost}, Extractor: budget.Anthropic,
		Estimate: budget.Usage{Model: "claude-3-7-sonnet"}}
	res := m.Body(context.Background(), fixture(t, "anthropic_messages.json"))
	if res.Err != nil || res.Costs[0] != 491 || res.Costs[1] != 2541 {
		t.Fatalf("result %+v", res)
	}
	r2 := f.reserve(t, "tok", b, 100)
	m = &budget.Meter{Reservations: r2, Charges: []budget.Charge{budget.Tokens}, Extractor: budget.OpenAI}
	if res := m.Body(context.Background(), []byte(`{"id":"no usage"}`)); res.Costs[0] != 100 || res.Reported {
		t.Fatalf("no usage: %+v", res)
	}
}

// TestMeterJSON: a JSON response read through passes byte for byte (read in small pieces)
// and commits the usage it reports (OpenAI's Chat Completions example: 19 + 10 tokens):
// with its length known, before its last byte is returned, so that a client holding the
// whole response sees the budget charged; without, at its end. One longer than the bytes
// kept commits what its reservation holds; Close before the end commits too, once.
func TestMeterJSON(t *testing.T) {
	f := newFixture(t)
	b := sluice.Budget{Rule: sluice.FixedWindow(1000, time.Minute), Mode: sluice.Strict}
	body := fixture(t, "openai_chat.json")
	for _, c := range []struct {
		name   string
		length int64
		max    int
		want   int64 // committed
	}{
		{"length", int64(len(body)), 0, 29},
		{"no length", -1, 0, 29},
		{"longer than kept", int64(len(body)), 64, 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := "json " + c.name
			var committed atomic.Int64
			committed.Store(-1)
			m := &budget.Meter{Reservations: f.reserve(t, key, b, 300), Charges: []budget.Charge{budget.Tokens}, Extractor: budget.OpenAI,
				Done: func(res budget.Result) { committed.Store(res.Costs[0]) }}
			up := &upstream{Reader: bytes.NewReader(body)}
			rc := m.JSON(context.Background(), up, c.length, c.max)
			var got []byte
			buf := make([]byte, 7)
			for {
				n, err := rc.Read(buf)
				if c.length >= 0 && len(got)+n == len(body) && committed.Load() != c.want {
					t.Fatalf("the last byte returned before the commit (%d)", committed.Load())
				}
				got = append(got, buf[:n]...)
				if err != nil {
					break
				}
			}
			if err := rc.Close(); err != nil || !up.closed.Load() {
				t.Fatalf("close: %v, upstream closed %v", err, up.closed.Load())
			}
			if !bytes.Equal(got, body) || committed.Load() != c.want {
				t.Fatalf("passed %d of %d bytes, committed %d, want %d", len(got), len(body), committed.Load(), c.want)
			}
			if left := f.remaining(t, key, b.Rule); left != 1000-c.want {
				t.Fatalf("remaining %d, want %d", left, 1000-c.want)
			}
		})
	}
	// a client gone before the end: Close commits (the usage is unknown: what it held)
	m := &budget.Meter{Reservations: f.reserve(t, "json gone", b, 300), Charges: []budget.Charge{budget.Tokens}, Extractor: budget.OpenAI}
	rc := m.JSON(context.Background(), &upstream{Reader: bytes.NewReader(body)}, int64(len(body)), 0)
	_, _ = rc.Read(make([]byte, 10))
	_ = rc.Close()
	_ = rc.Close()
	if left := f.remaining(t, "json gone", b.Rule); left != 700 {
		t.Fatalf("a client gone before the end: remaining %d, want 700", left)
	}
}

// TestPropertyMeteredStreamsHoldTheBudget: many concurrent streams of random lengths, each
// reserving its estimate and metered as it flows, on one budget: what they deliver and what
// the budget is charged never exceed it in strict mode, nor it plus one extension in bounded
// mode; the budget is run out (to within one reservation), the streams that would overspend
// cut.
func TestPropertyMeteredStreamsHoldTheBudget(t *testing.T) {
	for _, mode := range []sluice.BudgetMode{sluice.Strict, sluice.Bounded} {
		t.Run(mode.String(), func(t *testing.T) {
			f := newFixture(t)
			const limit, streams = 2000, 60
			b := sluice.Budget{Rule: sluice.FixedWindow(limit, time.Hour), Mode: mode}
			var delivered, charged, cut, refused atomic.Int64
			var wg, reserved sync.WaitGroup
			reserved.Add(streams)
			for i := range streams {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n := 5 + (i*37)%150 // 5 to 154 tokens
					r, err := f.l.ReserveAll(context.Background(), []sluice.Hold{{Key: "k", Budget: b, N: 10 + 20}})
					// every stream reserves (60 x 30 fit the 2,000) before any flows: they
					// want about 5,400 in all, so some must be cut however they are scheduled
					reserved.Done()
					reserved.Wait()
					if err != nil {
						t.Error(err)
						return
					}
					if !r.Decision.Allowed {
						refused.Add(1)
						return
					}
					m := &budget.Meter{Reservations: &r, Charges: []budget.Charge{budget.Tokens}, Extractor: budget.OpenAI,
						Estimate: budget.Usage{Model: "gpt-4o", InputTokens: 10},
						Done: func(x budget.Result) {
							charged.Add(x.Costs[0])
							if x.Cut {
								cut.Add(1)
							}
						}}
					body := m.Stream(context.Background(), &upstream{Reader: bytes.NewReader(chatStream(n, 10, true))})
					got, _ := io.ReadAll(body)
					body.Close()
					content := 0
					for _, e := range events(got) {
						if strings.Contains(e.data, `"content"`) {
							content++
						}
					}
					delivered.Add(10 + int64(content))
				}()
			}
			wg.Wait()
			bound := int64(limit)
			if mode == sluice.Bounded {
				bound += 30 // one extension step of ~1/4 of 30, or a reservation of 30
			}
			if charged.Load() > bound || delivered.Load() > bound {
				t.Fatalf("%s: charged %d, delivered %d, over %d", mode, charged.Load(), delivered.Load(), bound)
			}
			if cut.Load() == 0 || charged.Load() < limit-30 {
				t.Fatalf("%s: %d cut, %d charged of %d: the budget was not run out", mode, cut.Load(), charged.Load(), limit)
			}
			t.Logf("%s: %d tokens charged, %d delivered, %d streams cut, %d refused", mode, charged.Load(), delivered.Load(), cut.Load(), refused.Load())
		})
	}
}
