package sluice

import (
	"context"
	"time"
)

// DefaultMaxKeyLength is the longest key accepted unless configured otherwise: 1 KiB.
const DefaultMaxKeyLength = 1024

// Request is one decision asked of a Store.
type Request struct {
	// Key names the state the decision reads and updates. Non-empty.
	Key string
	// Rule is enforced on the key. A different rule than last time changes the key's limit
	// from this decision on, keeping the consumed state where the algorithm allows.
	Rule Rule
	// N is the cost. 0 peeks without consuming; a negative N refunds -N units (for example
	// to undo a take when a layered check fails).
	N int64
	// MaxDelay, when positive, asks a bucket algorithm to schedule the request in a future slot instead of
	// denying: the request is admitted if it can start within MaxDelay, and Decision.Delay says
	// when. Window algorithms ignore it and decide as usual.
	MaxDelay time.Duration
	// Settle applies N whatever the limit, for a cost known only after the fact (Limiter.Settle):
	// a positive N is charged even past the limit, so the key goes into debt that later
	// requests pay before they are admitted again; a negative N refunds as usual; 0 reports.
	// The Decision is Allowed, with Remaining 0 while the key is in debt and RetryAfter how
	// long until the debt is paid (0 when there is none). Each algorithm's debt, and its bound,
	// is described in package algorithm (State.Settle, MaxDebt). A settle cannot
	// wait: MaxDelay must be 0.
	Settle bool
	// Criticality is the request's class (the zero value is Critical, the default). Stores
	// decide by Holdback, which the caller derives from the class and the rule's shares
	// (Limiter.AllowClass); a decorator that needs the class itself reads it here: the quota
	// client (package quota, WithCriticalityKey) reports each class's demand apart, so the
	// quota server serves the most important first.
	Criticality Criticality
	// Holdback, when positive, is how many units must remain after the request for it to be
	// admitted (criticality: Shares.Holdback): it is decided as a take of N + Holdback of which
	// Holdback is given back at once, in one atomic step, so it consumes N and its RetryAfter
	// is when N + Holdback fit (Never when they exceed the capacity). Remaining is what is left
	// above the holdback. It cannot be combined with Settle or MaxDelay, and N must be positive.
	Holdback int64
	// Budget, when its Op is set, makes the request one step of a budget reservation
	// (Limiter.Reserve): reserve, extend or commit reservation Budget.ID, N being the units
	// held or the real cost. A store keeps the key's open reservations beside its state and
	// decides each step on both in one atomic operation (package algorithm's Apply; the Redis
	// scripts' budget variant). It cannot be combined with Settle, Holdback or MaxDelay.
	Budget BudgetStep
}

// Store makes rate-limit decisions on shared state: one atomic operation per decision, with
// the key passed on every call. Implementations must be safe for concurrent use, must reject
// invalid requests (see Request.Validate) before touching state, must decide each kind of
// request (Request.Kind) as package algorithm's Apply does (a store that keeps algorithm
// states calls it), must consume nothing for a denied request, and must give every key they
// write a TTL.
//
// Errors are for infrastructure and bad input only; a denial is a Decision with Allowed false.
// Transport failures wrap ErrStoreUnavailable.
type Store interface {
	Take(ctx context.Context, req Request) (Decision, error)
}

// Validate checks the request's key (non-empty, at most maxKeyLen bytes; 0 means
// DefaultMaxKeyLength), cost, delay and rule, and that its fields make one kind of request
// (Kind): a settle has no MaxDelay nor Holdback, a take with a Holdback no MaxDelay. Stores call
// it before any state is touched. The error is a *FieldError naming the field.
func (req *Request) Validate(maxKeyLen int) error {
	if err := req.ValidateArgs(maxKeyLen); err != nil {
		return err
	}
	return req.Rule.Validate()
}

// ValidateArgs is Validate without the rule check, for stores that cache rules they have
// already validated.
func (req *Request) ValidateArgs(maxKeyLen int) error {
	if err := validateKey(req.Key, maxKeyLen); err != nil {
		return err
	}
	if req.N < -MaxLimit {
		return fieldError(ErrInvalidN, "n", "refund of %d is below the minimum of %d", -req.N, -int64(MaxLimit))
	}
	if req.MaxDelay < 0 {
		return fieldError(ErrInvalidN, "max_delay", "negative (%v)", req.MaxDelay)
	}
	if req.Budget.Op != BudgetNone {
		return req.validateBudget()
	}
	if req.Settle && req.Holdback != 0 {
		return fieldError(ErrInvalidN, "holdback", "a settle applies whatever the limit: no holdback (got %d)", req.Holdback)
	}
	if req.Settle {
		return req.validateSettle()
	}
	if req.Holdback != 0 {
		return req.validateHoldback()
	}
	return nil
}

// validateHoldback checks a criticality holdback: 0 to MaxLimit, on a plain take.
func (req *Request) validateHoldback() error {
	switch {
	case req.Holdback < 0 || req.Holdback > MaxLimit:
		return fieldError(ErrInvalidN, "holdback", "must be between 0 and %d, got %d", int64(MaxLimit), req.Holdback)
	case req.MaxDelay != 0:
		return fieldError(ErrInvalidN, "max_delay", "a request with a holdback cannot wait for a slot (got %v)", req.MaxDelay)
	case req.N <= 0:
		return fieldError(ErrInvalidN, "n", "a request with a holdback takes units, got %d", req.N)
	}
	return nil
}

// validateKey checks a key: non-empty, at most maxKeyLen bytes (0 means DefaultMaxKeyLength).
// It inlines into the stores' decision paths; keyError builds the error.
func validateKey(key string, maxKeyLen int) error {
	if maxKeyLen <= 0 {
		maxKeyLen = DefaultMaxKeyLength
	}
	if key == "" || len(key) > maxKeyLen {
		return keyError(key, maxKeyLen)
	}
	return nil
}

func keyError(key string, maxKeyLen int) error {
	if key == "" {
		return fieldError(ErrInvalidKey, "key", "empty")
	}
	return fieldError(ErrInvalidKey, "key", "%d bytes, longer than the maximum of %d", len(key), maxKeyLen)
}

// validateSettle checks what a settle adds: a charge of at most MaxLimit, no wait.
func (req *Request) validateSettle() error {
	if req.N > MaxLimit {
		return fieldError(ErrInvalidN, "n", "settle of %d is above the maximum of %d", req.N, int64(MaxLimit))
	}
	if req.MaxDelay != 0 {
		return fieldError(ErrInvalidN, "max_delay", "a settle cannot wait (got %v)", req.MaxDelay)
	}
	return nil
}
