package rls_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/rls"
)

// downStore fails every call, as an unreachable store does, with the context's error once the
// context ended.
type downStore struct{}

func (downStore) Take(ctx context.Context, _ sluice.Request) (sluice.Decision, error) {
	if err := ctx.Err(); err != nil {
		return sluice.Decision{}, err
	}
	return sluice.Decision{}, errors.New("connection refused")
}

// TestErrorKinds: a malformed request is KindInvalid before any store call, a failing store
// KindUnavailable, the caller's context ending KindCanceled; each is an *rls.Error.
func TestErrorKinds(t *testing.T) {
	e := newEngine(t, decideRules)
	var ans rls.Answer
	err := e.Decide(context.Background(), &rls.Request{Domain: "d"}, &ans)
	if rls.KindOf(err) != rls.KindInvalid || err.Error() != "sluice: descriptors: empty" {
		t.Errorf("no descriptors: %v (kind %v), want KindInvalid", err, rls.KindOf(err))
	}
	down, err := rls.New(rls.Config{Rules: e.Rules(), Store: downStore{}})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	req := &rls.Request{Domain: "d", Descriptors: []rls.Descriptor{desc("a", "1")}}
	err = down.Decide(context.Background(), req, &ans)
	var re *rls.Error
	if !errors.As(err, &re) || re.Kind != rls.KindUnavailable || re.Kind.String() != "Unavailable" {
		t.Errorf("store down: %v, want an *rls.Error of KindUnavailable", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := down.Decide(ctx, req, &ans); rls.KindOf(err) != rls.KindCanceled {
		t.Errorf("canceled: %v (kind %v), want KindCanceled", err, rls.KindOf(err))
	}
}
