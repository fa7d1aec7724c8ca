package quota_test

import (
	"context"
	"net"
	"testing"
	"testing/fstest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/quota"
	"github.com/sluicehq/sluice/quota/rlqs"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/store/memory"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const rulesYAML = `domain: go
quota_buckets:
  - bucket_id: {name: "api*"}
    requests_per_unit: 100
    unit: second
    assignment_ttl: 2s
  - bucket_id: {name: closed}
    strategy: deny_all
`

type env struct {
	clock *sluicetest.ManualClock
	svc   *rlqs.Service
	grpc  *grpc.Server
	conn  *grpc.ClientConn
}

func newEnv(t *testing.T) *env { return newEnvOver(t, rulesYAML) }

// newEnvOver starts a quota server over the rules body on the env's clock.
func newEnvOver(t *testing.T, body string) *env {
	t.Helper()
	rules, err := config.LoadFS(fstest.MapFS{"rules.yaml": {Data: []byte(body)}}, "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{clock: sluicetest.NewManualClock(t0)}
	e.svc = rlqs.New(rlqs.Config{Rules: func() *config.Config { return rules }, Clock: e.clock})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.grpc = grpc.NewServer()
	e.svc.Register(e.grpc)
	go func() { _ = e.grpc.Serve(lis) }()
	t.Cleanup(e.grpc.Stop)
	e.conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.conn.Close() })
	return e
}

// client returns a quota client over a memory store, both on the env's clock; it reports
// only when the test calls Flush (the interval is an hour).
func (e *env) client(t *testing.T, opts ...quota.Option) *quota.Client {
	t.Helper()
	mem, err := memory.New(memory.WithClock(e.clock), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	c, err := quota.New(mem, e.conn, "go", append([]quota.Option{quota.WithClock(e.clock), quota.WithInterval(time.Hour)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// unreachableClient is a client of the env's clock whose quota server never answers (nothing
// listens at its address).
func unreachableClient(t *testing.T, e *env) *quota.Client {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	mem, err := memory.New(memory.WithClock(e.clock), memory.WithSweepInterval(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	c, err := quota.New(mem, conn, "go", quota.WithClock(e.clock), quota.WithInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// flush reports now and waits (bounded real time) for the answer, returning key's
// assignment.
func flush(t *testing.T, c *quota.Client, key string) quota.Assignment {
	t.Helper()
	_, m0 := quota.Counts(c)
	if err := c.Flush(); err != nil {
		t.Fatalf("flush: %v", err)
	}
	// Done when every report is answered, the key is assigned, a message arrived after this
	// report (a push the server sent earlier counts as a message received too, and would let
	// Answered hold before this report's answer arrives), and nothing more arrived for 20 ms:
	// a pushed assignment makes the client report again at once, and the answer to that must
	// land before the test goes on with its takes.
	settled := func() (bool, uint64) {
		r, m := quota.Counts(c)
		return m >= r && m > m0 && assigned(c, key), m
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if ok, m := settled(); ok {
			time.Sleep(20 * time.Millisecond)
			if ok2, m2 := settled(); ok2 && m2 == m {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer for %s (answered %v, assigned %v)", key, quota.Answered(c), assigned(c, key))
		}
		time.Sleep(time.Millisecond)
	}
	a, _ := c.Assignment(key)
	return a
}

// assigned reports whether key has an assignment of some class.
func assigned(c *quota.Client, key string) bool {
	for _, class := range sluice.Criticalities() {
		if _, ok := c.ClassAssignment(key, class); ok {
			return true
		}
	}
	return false
}

// take makes n decisions on key with the own rule own and returns how many were admitted.
func take(t *testing.T, c *quota.Client, key string, own sluice.Rule, n int) int {
	t.Helper()
	ok := 0
	for i := 0; i < n; i++ {
		d, err := c.Take(context.Background(), sluice.Request{Key: key, Rule: own, N: 1})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			ok++
		}
	}
	return ok
}

var own = sluice.TokenBucket(10, time.Second, 10) // the own rule: limit / instances, say

func TestClientSpendsItsShare(t *testing.T) {
	e := newEnv(t)
	// No assignment yet: the request's own rule (10 per second). A client whose server cannot
	// be reached, as a new bucket's first report is sent at once and its answer would race
	// the takes.
	if got := take(t, unreachableClient(t, e), "api", own, 50); got != 10 {
		t.Fatalf("before any assignment: %d admitted, want the own rule's 10", got)
	}
	a, b := e.client(t), e.client(t)
	take(t, a, "api", own, 50)
	as := flush(t, a, "api")
	if as.Rule.Limit != 100 || !as.Expires.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("alone: %+v, want the whole 100 per second for 2s", as)
	}
	e.clock.Advance(time.Second)
	if got := take(t, a, "api", own, 200); got != 100 {
		t.Fatalf("with the whole limit: %d admitted, want 100", got)
	}
	// b joins; a's 100 is held until it expires, then both get 50.
	take(t, b, "api", own, 1)
	flush(t, b, "api")
	for i := 0; i < 3; i++ {
		e.clock.Advance(time.Second)
		take(t, a, "api", own, 100)
		take(t, b, "api", own, 100)
		flush(t, a, "api")
		flush(t, b, "api")
	}
	sa, _ := a.Assignment("api")
	sb, _ := b.Assignment("api")
	if sa.Rule.Limit != 50 || sb.Rule.Limit != 50 {
		t.Fatalf("shares %d and %d, want 50 each", sa.Rule.Limit, sb.Rule.Limit)
	}
	e.clock.Advance(time.Second)
	if got := take(t, a, "api", own, 100) + take(t, b, "api", own, 100); got != 100 {
		t.Fatalf("together: %d admitted in one second, want 100", got)
	}
	// A blanket deny.
	take(t, a, "closed", own, 1)
	if d := flush(t, a, "closed"); !d.Deny {
		t.Fatalf("closed bucket: %+v", d)
	}
	if got := take(t, a, "closed", own, 5); got != 0 {
		t.Fatalf("deny_all admitted %d", got)
	}
}

func TestClientExpiredBehaviours(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []quota.Option
		want int // admitted in the second after the assignment expired
	}{
		{"own rule", nil, 10},
		{"deny", []quota.Option{quota.WithExpired(quota.Deny)}, 0},
		{"allow", []quota.Option{quota.WithExpired(quota.Allow)}, 500},
		{"reuse last", []quota.Option{quota.WithExpired(quota.ReuseLast), quota.WithReuseFor(5 * time.Second)}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			c := e.client(t, tc.opts...)
			take(t, c, "api", own, 1)
			flush(t, c, "api")
			e.grpc.Stop() // the server is gone; the assignment lives 2s
			e.clock.Advance(3 * time.Second)
			if got := take(t, c, "api", own, 500); got != tc.want {
				t.Fatalf("after expiry: %d admitted, want %d", got, tc.want)
			}
			if tc.name == "reuse last" {
				// Past the reuse bound: the own rule, once the 100 just spent have drained at
				// its 10 per second (a rule change keeps the consumed state).
				e.clock.Advance(10 * time.Second)
				if got := take(t, c, "api", own, 500); got != 10 {
					t.Fatalf("past reuse: %d admitted, want 10", got)
				}
			}
		})
	}
}

// TestServerKilledStaysWithinBudget: two clients share 100 per second; the server dies
// halfway. They spend their assignments until they expire, then fall back to 10 per second
// each (their own rule). Over the run, the total admitted stays within limit × duration
// plus the burst plus one TTL of the limit (the slack docs/OPERATIONS.md documents).
func TestServerKilledStaysWithinBudget(t *testing.T) {
	e := newEnv(t)
	cs := []*quota.Client{e.client(t), e.client(t)}
	const seconds = 10
	total := 0
	for s := 0; s < seconds; s++ {
		for _, c := range cs {
			for ms := 0; ms < 10; ms++ {
				total += take(t, c, "api", own, 30)
			}
		}
		if s == seconds/2 {
			e.grpc.Stop()
		}
		if s < seconds/2 {
			for _, c := range cs {
				flush(t, c, "api")
			}
		} else {
			for _, c := range cs {
				_ = c.Flush() // fails: the server is gone
			}
		}
		e.clock.Advance(time.Second)
	}
	bound := 100*seconds + 100 + 100*2
	if total > bound {
		t.Fatalf("admitted %d over %ds, more than %d", total, seconds, bound)
	}
	if total < 2*10*seconds {
		t.Fatalf("admitted only %d: the own rule did not serve", total)
	}
}

func TestClientAllocatesNothing(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	take(t, c, "api", own, 1)
	flush(t, c, "api")
	req := sluice.Request{Key: "api", Rule: own, N: 1}
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() { _, _ = c.Take(ctx, req) }); n != 0 {
		t.Fatalf("Take allocates %v times", n)
	}
}

func TestClientBadInput(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	if _, err := c.Take(context.Background(), sluice.Request{Key: "", Rule: own, N: 1}); err == nil {
		t.Fatal("empty key accepted")
	}
	if _, err := c.Take(context.Background(), sluice.Request{Key: "x", Rule: sluice.Rule{}, N: 1}); err == nil {
		t.Fatal("invalid rule accepted")
	}
	for _, opt := range []quota.Option{quota.WithInterval(0), quota.WithMaxBuckets(-1), quota.WithNoAssignment(quota.ReuseLast), quota.WithReuseFor(-1)} {
		if _, err := quota.New(newMem(t), e.conn, "go", opt); err == nil {
			t.Errorf("option accepted")
		}
	}
}

func newMem(t *testing.T) sluice.Store {
	mem, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	return mem
}

const classRulesYAML = `domain: go
quota_buckets:
  - bucket_id: {name: "api*"}
    requests_per_unit: 100
    unit: second
    assignment_ttl: 2s
    criticality_key: criticality
`

// takeClass makes n decisions of class on key through a Limiter's AllowClass (the class
// reaches the client as Request.Criticality) and returns how many were admitted.
func takeClass(t *testing.T, l *sluice.Limiter, key string, class sluice.Criticality, n int) int {
	t.Helper()
	ok := 0
	for i := 0; i < n; i++ {
		d, err := l.AllowClass(context.Background(), key, own, 1, class)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			ok++
		}
	}
	return ok
}

// TestClientReportsClasses: with WithCriticalityKey, a Go service's critical and sheddable
// traffic on one key are two buckets with their own shares; above the limit the server
// serves critical_plus first, and the sheddable traffic gets what is left.
func TestClientReportsClasses(t *testing.T) {
	e := newEnvOver(t, classRulesYAML)
	a, b := e.client(t, quota.WithCriticalityKey("criticality")), e.client(t, quota.WithCriticalityKey("criticality"))
	la, lb := sluice.New(a), sluice.New(b)
	demand := map[sluice.Criticality]int{sluice.CriticalPlus: 70, sluice.Sheddable: 200}
	// Each bucket assigned before the rounds: a new bucket's first report is sent at once,
	// and its answer would otherwise land in the middle of the first round's takes.
	takeClass(t, la, "api", sluice.CriticalPlus, 1)
	takeClass(t, lb, "api", sluice.Sheddable, 1)
	flush(t, a, "api")
	flush(t, b, "api")
	for round := 0; round < 3; round++ {
		if round > 0 {
			e.clock.Advance(time.Second)
		}
		takeClass(t, la, "api", sluice.CriticalPlus, demand[sluice.CriticalPlus])
		takeClass(t, lb, "api", sluice.Sheddable, demand[sluice.Sheddable])
		flush(t, a, "api")
		flush(t, b, "api")
	}
	cp, ok1 := a.ClassAssignment("api", sluice.CriticalPlus)
	sh, ok2 := b.ClassAssignment("api", sluice.Sheddable)
	if !ok1 || !ok2 || cp.Rule.Limit != 70 || sh.Rule.Limit != 30 {
		t.Fatalf("critical_plus %+v %v, sheddable %+v %v: want 70 and the 30 left", cp, ok1, sh, ok2)
	}
	if _, ok := a.ClassAssignment("api", sluice.Sheddable); ok {
		t.Fatal("a sheddable assignment on the client that sent no sheddable traffic")
	}
	// Each class spends its own share, whatever the other does.
	e.clock.Advance(time.Second)
	if got := takeClass(t, la, "api", sluice.CriticalPlus, 200); got != 70 {
		t.Fatalf("critical_plus admitted %d, want its 70", got)
	}
	if got := takeClass(t, lb, "api", sluice.Sheddable, 200); got != 30 {
		sh2, _ := b.ClassAssignment("api", sluice.Sheddable)
		t.Fatalf("sheddable admitted %d, want its 30 (%+v, before %+v)", got, sh2, sh)
	}
	// Without the option the class is not reported: one bucket for every class.
	c := e.client(t)
	lc := sluice.New(c)
	takeClass(t, lc, "api", sluice.Sheddable, 1)
	flush(t, c, "api")
	if x, ok := c.ClassAssignment("api", sluice.CriticalPlus); !ok || x != must(c.Assignment("api")) {
		t.Fatalf("without WithCriticalityKey: %+v %v", x, ok)
	}
}

func must(a quota.Assignment, ok bool) quota.Assignment {
	if !ok {
		panic("no assignment")
	}
	return a
}

// TestClientClassAllocatesNothing: deciding a class's request allocates nothing once its
// bucket exists.
func TestClientClassAllocatesNothing(t *testing.T) {
	e := newEnvOver(t, classRulesYAML)
	c := e.client(t, quota.WithCriticalityKey("criticality"))
	req := sluice.Request{Key: "api", Rule: own, N: 1, Criticality: sluice.Sheddable}
	ctx := context.Background()
	if _, err := c.Take(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() { _, _ = c.Take(ctx, req) }); n != 0 {
		t.Fatalf("Take allocates %v times", n)
	}
	if _, err := quota.New(newMem(t), e.conn, "go", quota.WithCriticalityKey("")); err == nil {
		t.Fatal("an empty criticality key accepted")
	}
}

// TestClientScalesHoldback: without WithCriticalityKey every class spends the key's one
// share, and a class's holdback (a part of the request's own rule) is the same part of the
// assigned capacity: SHEDDABLE (default share 50%) gets half of the assignment.
func TestClientScalesHoldback(t *testing.T) {
	e := newEnv(t)
	c := e.client(t)
	l := sluice.New(c)
	takeClass(t, l, "api", sluice.Sheddable, 1)
	if a := flush(t, c, "api"); a.Rule.Limit != 100 {
		t.Fatalf("alone: %+v", a)
	}
	e.clock.Advance(time.Second)
	if got := takeClass(t, l, "api", sluice.Sheddable, 200); got != 50 {
		t.Fatalf("sheddable admitted %d of a share of 100, want 50", got)
	}
	if got := takeClass(t, l, "api", sluice.CriticalPlus, 200); got != 50 {
		t.Fatalf("critical_plus admitted %d, want the 50 left", got)
	}
}
