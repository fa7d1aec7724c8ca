package simulate

import (
	"container/heap"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/budget"
	"github.com/sluicehq/sluice/sluicetest"
)

// LLMBudgetScenario is the name of the LLM budget scenario (RunLLMBudget).
const LLMBudgetScenario = "llm_budget"

// LLMBudgetSummary and LLMBudgetDefinition describe the scenario as Scenario.Summary and
// Scenario.Definition do the others (`sluice simulate -list`).
const (
	LLMBudgetSummary    = "concurrent streamed LLM requests of heavy-tailed cost against a token budget: charge-after vs bounded vs strict"
	LLMBudgetDefinition = "1 budget of 100000 tokens (a fixed window of 1h: the run fits in one window); C concurrent clients (1, 10, 100, 1000), each sending streamed requests back to back after an exponential think time (mean 1s) until about 2 x the budget has been offered; a request's prompt is uniform in 50..1000 tokens, its max_tokens 2048, its output min(2048, Pareto(x_m 50, alpha 1.2)) tokens (mean about 300), streamed at 50 tokens a second, one token an event, its usage reported at the end. Policies: charge_after (Envoy AI Gateway's: admitted while the budget is not over, the cost charged when the stream ends); bounded and strict (Limiter.Reserve of the stated maximum, prompt + max_tokens, metered by budget.Meter, committed at the end); bounded_metered and strict_metered (a reservation of the prompt + 256, extended by a quarter of it as the stream flows, cut when the budget refuses)."
)

// BudgetRow is the outcome of one policy at one concurrency.
type BudgetRow struct {
	Policy      string
	Concurrency int
	Budget      int64
	// Offered, Admitted and Denied count requests; Needless the denied ones whose real cost
	// would have fitted what the budget had left (the final charges of the requests admitted
	// before them); Cut the admitted streams cut for want of budget.
	Offered, Admitted, Denied, Needless, Cut int64
	// Charged is what the budget was charged in all; Over how much of it is past the budget
	// (0 when within); MaxCost the largest cost a request could state (its maximum).
	Charged, Over, MaxCost int64
}

// LLMBudgetPolicies are the scenario's policies, in the order of its table.
var LLMBudgetPolicies = []string{"charge_after", "bounded", "strict", "bounded_metered", "strict_metered"}

// LLMBudgetConcurrency are the scenario's concurrency levels.
var LLMBudgetConcurrency = []int{1, 10, 100, 1000}

// llmBudget are the scenario's constants (LLMBudgetDefinition).
const (
	llmBudgetTokens   = 100_000
	llmMaxTokens      = 2048
	llmTokensPerSec   = 50
	llmMeteredOutput  = 256
	llmOfferedBudgets = 2
)

// RunLLMBudget runs the scenario (LLMBudgetDefinition) in virtual time for every policy and
// concurrency, on the memory store, and returns a row for each.
func RunLLMBudget(ctx context.Context, policies []string, concurrency []int, seed uint64) ([]BudgetRow, error) {
	var rows []BudgetRow
	for _, c := range concurrency {
		for _, p := range policies {
			row, err := runLLMBudget(ctx, p, c, seed)
			if err != nil {
				return nil, err
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// LLMRequestCost draws one request of the scenario (LLMBudgetDefinition): its prompt, uniform in
// 50..1000 tokens, and its output, min(LLMMaxTokens, Pareto(x_m 50, alpha 1.2)) tokens.
func LLMRequestCost(rng *rand.Rand) (prompt, output int64) {
	return 50 + rng.Int64N(951), min(LLMMaxTokens, int64(50/math.Pow(1-rng.Float64(), 1/1.2)))
}

// LLMMaxTokens is the max_tokens of the scenario's requests.
const LLMMaxTokens = llmMaxTokens

// llmRequest is one request of the scenario: its prompt and output tokens (its real cost is
// their sum), drawn the same for every policy.
type llmRequest struct {
	prompt, output int64
}

// llmEvent is a simulation event: a client's next request, or a stream's next token.
type llmEvent struct {
	at     time.Duration
	client int
	s      *llmStream // nil: the client sends its next request
	seq    int64
}

type llmEvents []llmEvent

func (h llmEvents) Len() int { return len(h) }
func (h llmEvents) Less(i, j int) bool {
	return h[i].at < h[j].at || h[i].at == h[j].at && h[i].seq < h[j].seq
}
func (h llmEvents) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *llmEvents) Push(x any)   { *h = append(*h, x.(llmEvent)) }
func (h *llmEvents) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// llmStream is a response being streamed: the metered body (or, charged after, the tokens
// left to produce).
type llmStream struct {
	req    llmRequest
	body   io.ReadCloser // metered (nil: charged after)
	up     *tokenSource
	left   int64 // charge_after: tokens still to stream
	client int
}

// tokenSource is an upstream that yields one event per Read: a Chat Completions chunk of one
// token, then the usage chunk, then [DONE].
type tokenSource struct {
	req  llmRequest
	sent int64
	done int
}

func (t *tokenSource) Read(p []byte) (int, error) {
	var ev string
	switch {
	case t.sent < t.req.output:
		t.sent++
		ev = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t\"}}]}\n\n"
	case t.done == 0:
		t.done++
		ev = fmt.Sprintf("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d}}\n\n", t.req.prompt, t.req.output)
	case t.done == 1:
		t.done++
		ev = "data: [DONE]\n\n"
	default:
		return 0, io.EOF
	}
	return copy(p, ev), nil
}

func (t *tokenSource) Close() error { return nil }

// runLLMBudget runs one policy at one concurrency.
func runLLMBudget(ctx context.Context, policy string, clients int, seed uint64) (BudgetRow, error) {
	row := BudgetRow{Policy: policy, Concurrency: clients, Budget: llmBudgetTokens, MaxCost: 1000 + llmMaxTokens}
	clock := sluicetest.NewManualClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	start := clock.Now()
	st, closer, err := openMemory(clock)
	if err != nil {
		return row, err
	}
	defer closer.Close()
	l := sluice.New(st)
	rule := sluice.FixedWindow(llmBudgetTokens, time.Hour)
	mode := sluice.Bounded
	if policy == "strict" || policy == "strict_metered" {
		mode = sluice.Strict
	}
	b := sluice.Budget{Rule: rule, Mode: mode}
	metered := policy == "bounded_metered" || policy == "strict_metered"

	rng := rand.New(rand.NewPCG(seed, uint64(clients)))
	var offered int64
	perClient := make([][]llmRequest, clients)
	for c := 0; offered < llmOfferedBudgets*llmBudgetTokens; c = (c + 1) % clients {
		prompt, output := LLMRequestCost(rng)
		r := llmRequest{prompt: prompt, output: output}
		perClient[c] = append(perClient[c], r)
		offered += r.prompt + r.output
	}
	think := rand.New(rand.NewPCG(seed, 0x7417))

	var h llmEvents
	var seq int64
	push := func(e llmEvent) {
		seq++
		e.seq = seq
		heap.Push(&h, e)
	}
	next := make([]int, clients)
	thinkTime := func() time.Duration { return time.Duration(think.ExpFloat64() * float64(time.Second)) }
	for c := range clients {
		push(llmEvent{at: thinkTime(), client: c})
	}
	// the final charges of the admitted requests, in admission order, and the denials to
	// judge against them at the end
	type denial struct {
		admittedBefore int
		cost           int64
	}
	var charges []*int64
	var denials []denial
	tokenGap := time.Second / llmTokensPerSec
	for h.Len() > 0 {
		if ctx.Err() != nil {
			return row, ctx.Err()
		}
		e := heap.Pop(&h).(llmEvent)
		clock.Set(start.Add(e.at))
		if e.s == nil { // a request
			c := e.client
			if next[c] >= len(perClient[c]) {
				continue
			}
			req := perClient[c][next[c]]
			next[c]++
			row.Offered++
			s, charge, err := admitLLM(ctx, l, clock, b, policy, metered, req, &row)
			if err != nil {
				return row, err
			}
			if s == nil {
				row.Denied++
				denials = append(denials, denial{admittedBefore: len(charges), cost: req.prompt + req.output})
				push(llmEvent{at: e.at + thinkTime(), client: c})
				continue
			}
			row.Admitted++
			charges = append(charges, charge)
			s.client = c
			push(llmEvent{at: e.at + tokenGap, client: c, s: s})
			continue
		}
		// a stream's next event
		s := e.s
		ended := false
		if s.body == nil {
			s.left--
			if ended = s.left <= 0; ended {
				if _, err := l.Settle(ctx, "budget", rule, s.req.prompt+s.req.output); err != nil {
					return row, err
				}
			}
		} else {
			var buf [256]byte
			if _, err := s.body.Read(buf[:]); err != nil {
				ended = true
				s.body.Close()
			}
		}
		if ended {
			push(llmEvent{at: e.at + thinkTime(), client: s.client})
		} else {
			push(llmEvent{at: e.at + tokenGap, client: s.client, s: s})
		}
	}
	for _, c := range charges {
		row.Charged += *c
	}
	row.Over = max(0, row.Charged-llmBudgetTokens)
	// a denial was needless when its real cost fitted what the requests admitted before it
	// were finally charged
	prefix := make([]int64, len(charges)+1)
	for i, c := range charges {
		prefix[i+1] = prefix[i] + *c
	}
	for _, d := range denials {
		if prefix[d.admittedBefore]+d.cost <= llmBudgetTokens {
			row.Needless++
		}
	}
	return row, nil
}

// admitLLM decides one request under policy; nil stream when denied. charge is where its
// final charge is written (when its stream ends).
func admitLLM(ctx context.Context, l *sluice.Limiter, clock sluice.Clock, b sluice.Budget, policy string, metered bool, req llmRequest, row *BudgetRow) (*llmStream, *int64, error) {
	charge := new(int64)
	if policy == "charge_after" {
		d, err := l.Peek(ctx, "budget", b.Rule)
		if err != nil || !d.Allowed {
			return nil, nil, err
		}
		*charge = req.prompt + req.output
		return &llmStream{req: req, left: req.output}, charge, nil
	}
	n := req.prompt + llmMaxTokens // the stated maximum
	if metered {
		n = req.prompt + llmMeteredOutput
	}
	r, err := l.Reserve(ctx, "budget", b, n)
	if err != nil || !r.Decision.Allowed {
		return nil, nil, err
	}
	up := &tokenSource{req: req}
	m := &budget.Meter{Reservations: &sluice.Reservations{Denied: -1, Holds: []sluice.Reservation{r}}, Charges: []budget.Charge{budget.Tokens}, Extractor: budget.OpenAI,
		Estimate: budget.Usage{InputTokens: req.prompt}, Clock: clock,
		Done: func(res budget.Result) {
			if len(res.Costs) > 0 {
				*charge = res.Costs[0]
			}
			if res.Cut {
				row.Cut++
			}
		}}
	return &llmStream{req: req, body: m.Stream(ctx, up), up: up}, charge, nil
}

// WriteBudgetTable writes the rows as a Markdown table.
func WriteBudgetTable(w io.Writer, rows []BudgetRow) error {
	if _, err := fmt.Fprintln(w, "| policy | concurrency | requests | admitted | denied | needless denials | streams cut | tokens charged | over the budget | over, in max requests |\n|---|---|---|---|---|---|---|---|---|---|"); err != nil {
		return err
	}
	for _, r := range rows {
		needless := "-"
		if r.Denied > 0 {
			needless = fmt.Sprintf("%d (%.0f%%)", r.Needless, 100*float64(r.Needless)/float64(r.Denied))
		}
		if _, err := fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %s | %d | %d | %d (%.1f%%) | %.2f |\n", r.Policy, r.Concurrency,
			r.Offered, r.Admitted, r.Denied, needless, r.Cut, r.Charged, r.Over, 100*float64(r.Over)/float64(r.Budget),
			float64(r.Over)/float64(r.MaxCost)); err != nil {
			return err
		}
	}
	return nil
}
