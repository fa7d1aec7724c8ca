package pipeline

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/hotkey"
	"github.com/sluicehq/sluice/internal/inflight"
)

// Limit is one limit, without how a transport reads its key: what the pipeline decides. The
// transports' public Limit types (httplimit.Limit, grpclimit.Limit) carry these fields under
// the same names, and their own ways to key and match a request.
type Limit struct {
	// Name names the limit in keys, headers, denials and logs: required, at most 64
	// printable ASCII characters without '"', '\' or ':'.
	Name string
	// Rule is the rate limit; the zero Rule, with InFlight, is none.
	Rule sluice.Rule
	// Shares, when not nil, share the capacity between criticality classes: the rate by
	// Shares, the in-flight slots by the Leases' shares.
	Shares *sluice.Shares
	// Hot, when not nil, makes the limit a hot parameter; limits sharing a Name share one
	// sketch.
	Hot *hotkey.Config
	// InFlight and Adaptive: the concurrency limit (package internal/inflight).
	InFlight *sluice.InFlight
	Adaptive *adaptive.Gradient
	// OwnCost says the limit counts in units of its own (httplimit's Limit.Cost): a settled
	// cost (Request.Settle) leaves it out.
	OwnCost bool
	// Budget, when not nil, makes the limit a budget (sluice.Limiter.ReserveAll): the
	// request's cost under it is an estimate, reserved once the rate limits admit it, and
	// committed at the real cost after the handler (Request.Commit, or a metered response).
	// Budget.Rule is ignored: the limit's Rule is the budget. Not with Hot nor InFlight.
	Budget *sluice.Budget
}

// Rated reports whether l has a rate limit (a Limit with InFlight alone has none).
func (l *Limit) Rated() bool { return l.InFlight == nil || l.Rule != (sluice.Rule{}) }

// MaxNameLen is the longest limit name.
const MaxNameLen = 64

// LimitError is a problem of one limit: the limit's path as the transport's users know it
// ("policies[2]", "routes[1].limits[0]"), its name, the field at fault ("name", "rule",
// "in_flight", "shares", "hot", or a transport's own such as "key") and the error, which wraps
// a *sluice.FieldError naming the field inside it (errors.As finds it).
type LimitError struct {
	Path, Name, Field string
	Err               error
}

// Error returns "PATH (NAME).FIELD: ERR", or "PATH.FIELD: ERR" when the name is the problem
// or the error names the limit itself.
func (e *LimitError) Error() string {
	if e.Field == "name" || e.Name == "" {
		return e.Path + "." + e.Field + ": " + e.Err.Error()
	}
	return e.Path + " (" + strconv.Quote(e.Name) + ")." + e.Field + ": " + e.Err.Error()
}

// Unwrap returns the error.
func (e *LimitError) Unwrap() error { return e.Err }

// invalid returns a LimitError of l at path on field, wrapping a *sluice.FieldError.
func invalid(path string, l *Limit, field, fieldErr, format string, args ...any) *LimitError {
	return &LimitError{Path: path, Name: l.Name, Field: field,
		Err: &sluice.FieldError{Field: fieldErr, Reason: fmt.Sprintf(format, args...), Err: sluice.ErrInvalidRule}}
}

// Validate checks l alone, at path: its name, rule (when rated), in-flight limit and shares.
func (l *Limit) Validate(path string) error {
	switch {
	case l.Name == "":
		return invalid(path, l, "name", "name", "empty")
	case len(l.Name) > MaxNameLen:
		return invalid(path, l, "name", "name", "%d bytes, more than %d", len(l.Name), MaxNameLen)
	case strings.ContainsFunc(l.Name, func(c rune) bool { return c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == ':' }):
		return invalid(path, l, "name", "name", "%q has a character outside printable ASCII, or '\"', '\\' or ':'", l.Name)
	}
	if l.Shares != nil {
		if err := l.Shares.Validate(); err != nil {
			return &LimitError{Path: path, Name: l.Name, Field: "shares", Err: err}
		}
	}
	if err := inflight.Validate(l.InFlight, l.Adaptive, l.Hot != nil); err != nil {
		return &LimitError{Path: path, Name: l.Name, Field: "in_flight", Err: err}
	}
	if l.Rated() {
		if err := l.Rule.Validate(); err != nil {
			return &LimitError{Path: path, Name: l.Name, Field: "rule", Err: err}
		}
	}
	if b := l.Budget; b != nil {
		switch {
		case l.Hot != nil || l.InFlight != nil:
			return invalid(path, l, "budget", "budget", "a budget cannot be a hot parameter nor an in-flight limit")
		case b.Mode > sluice.Strict:
			return invalid(path, l, "budget", "mode", "unknown budget mode %d", b.Mode)
		case b.TTL != 0 && (b.TTL < sluice.MinReservationTTL || b.TTL > l.Rule.Period):
			return invalid(path, l, "budget", "ttl", "must be between %v and the rule's period %v (0 for the period), got %v", sluice.MinReservationTTL, l.Rule.Period, b.TTL)
		}
	}
	return nil
}

// validate checks limits at paths: each alone, then together: in each group (limits that
// apply to one request together) a name once, then anywhere one rule per name (one name, one
// budget). It reports which limits are valid, and every problem.
func validate(limits []Limit, paths []string, groups [][]int) ([]bool, []error) {
	ok := make([]bool, len(limits))
	var errs []error
	for i := range limits {
		if err := limits[i].Validate(paths[i]); err != nil {
			errs = append(errs, err)
			continue
		}
		ok[i] = true
	}
	for _, g := range groups {
		seen := map[string]bool{}
		for _, i := range g {
			l := &limits[i]
			if !ok[i] {
				continue
			}
			if seen[l.Name] {
				errs = append(errs, invalid(paths[i], l, "name", "name", "%q is used by another limit that applies with it", l.Name))
				ok[i] = false
				continue
			}
			seen[l.Name] = true
		}
	}
	first := map[string]int{}
	for i := range limits {
		l := &limits[i]
		if !ok[i] {
			continue
		}
		if j, seen := first[l.Name]; seen && limits[j].Rule != l.Rule {
			errs = append(errs, &LimitError{Path: paths[i], Field: "rule", Err: &sluice.FieldError{Field: "rule",
				Reason: fmt.Sprintf("limit %q has rule %s here and %s at %s (one name, one budget, one rule)", l.Name, l.Rule, limits[j].Rule, paths[j]),
				Err:    sluice.ErrInvalidRule}})
			ok[i] = false
			continue
		}
		if _, seen := first[l.Name]; !seen {
			first[l.Name] = i
		}
	}
	return ok, errs
}
