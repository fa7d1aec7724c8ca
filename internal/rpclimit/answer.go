package rpclimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/inflight"
	"github.com/sluicehq/sluice/internal/redact"
)

// Code is a google.rpc.Code: the same numbers in gRPC (codes.Code) and Connect (connect.Code).
type Code uint32

// The codes of a door's answers.
const (
	Canceled          Code = 1
	Unknown           Code = 2
	InvalidArgument   Code = 3
	DeadlineExceeded  Code = 4
	ResourceExhausted Code = 8
	Internal          Code = 13
	Unavailable       Code = 14
)

// Answer is a refused call's answer in google.rpc's terms, for a transport to write in its
// protocol: the code, the message and, for a limit's refusal
// (ResourceExhausted, or Unavailable from an adaptive in-flight limit: the service is
// overloaded), the details: a google.rpc.RetryInfo (nil when the call can never pass) and a
// google.rpc.QuotaFailure.
type Answer struct {
	Code    Code
	Message string
	Retry   *errdetails.RetryInfo
	Quota   *errdetails.QuotaFailure
}

// Details returns the answer's details in the order they are sent: RetryInfo (when there is
// one), then QuotaFailure; none when the answer has no QuotaFailure.
func (a *Answer) Details() []proto.Message {
	switch {
	case a.Quota == nil:
		return nil
	case a.Retry == nil:
		return []proto.Message{a.Quota}
	}
	return []proto.Message{a.Retry, a.Quota}
}

// RetryAfter returns the answer's retry delay in whole seconds, rounded up, at least 1 (an
// HTTP Retry-After value), and false when it has none.
func (a *Answer) RetryAfter() (int64, bool) {
	if a.Retry == nil {
		return 0, false
	}
	return max(int64(Ceil(a.Retry.GetRetryDelay().AsDuration(), time.Second)/time.Second), 1), true
}

// contextAnswer is the answer to a call whose own context ended (err, its error): Canceled or
// DeadlineExceeded, as gRPC's status.FromContextError.
func contextAnswer(err error) Answer {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return Answer{Code: DeadlineExceeded, Message: err.Error()}
	case errors.Is(err, context.Canceled):
		return Answer{Code: Canceled, Message: err.Error()}
	}
	return Answer{Code: Unknown, Message: err.Error()}
}

// denial is the answer to a call the rate limits refused, decided d by checks, to retry after
// reset (pipeline.Request.Reset), its message starting with transport ("grpclimit"):
// ResourceExhausted with a QuotaFailure with one violation per limit that refused it (subject: the limit's
// name and the key's hash, "name:hash:<12 hex>": the key may be the caller's API key; quota_id: the limit's name; quota_value: its capacity) and a RetryInfo whose
// retry_delay is reset rounded up to the millisecond, so that a client that waits that long is
// not refused again for being early; a call that costs more than a limit's capacity gets one
// too (until the limit's state is empty), so that a client does not retry it at once. The
// answer holds copies of the limits' names and hashes of the checks' keys: it outlives the
// call's buffer.
func denial(transport string, checks []sluice.Check, d sluice.Decision, reset time.Duration) Answer {
	qf := &errdetails.QuotaFailure{}
	var names []string
	for _, c := range checks {
		if c.Decision.Allowed {
			continue
		}
		name, key, _ := strings.Cut(c.Key, ":")
		name = strings.Clone(name) // c.Key may point into the call's buffer, reused once it ends
		names = append(names, name)
		qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{
			Subject:     name + ":" + redact.Hash(key), // the key hashed: it may be the caller's API key
			Description: fmt.Sprintf("limit %q (%s) exceeded", name, c.Rule),
			QuotaId:     name,
			QuotaValue:  c.Decision.Capacity,
		})
	}
	msg := transport + ": rate limit exceeded (" + strings.Join(names, ", ") + ")"
	delay := Ceil(reset, time.Millisecond)
	if d.RetryAfter < 0 {
		msg += ": the call costs more than the limit's capacity"
	} else {
		msg += "; retry in " + delay.String()
	}
	return Answer{Code: ResourceExhausted, Message: msg, Retry: &errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}, Quota: qf}
}

// refusal is the answer to a call refused a slot of c (an in-flight limit): ResourceExhausted,
// or Unavailable for an adaptive limit, with a QuotaFailure (quota_value: the limit) and, unless
// the call's class can never be admitted, a RetryInfo. The subject is the limit's name: the key
// may be a client's secret.
func refusal(transport string, c *inflight.Claim) Answer {
	d := c.Decision()
	a := Answer{Code: ResourceExhausted, Message: fmt.Sprintf("%s: in-flight limit reached (%s: %d in flight)", transport, c.Name, c.Slot.InFlight)}
	if c.Overload() {
		a.Code, a.Message = Unavailable, fmt.Sprintf("%s: at the adaptive in-flight limit (%s: %d)", transport, c.Name, d.Capacity)
	}
	a.Quota = &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: c.Name,
		Description: fmt.Sprintf("limit %q (%d in flight) reached", c.Name, d.Capacity), QuotaId: c.Name, QuotaValue: d.Capacity}}}
	if d.RetryAfter < 0 {
		a.Message += ": the call's class can never be admitted"
		return a
	}
	delay := Ceil(d.RetryAfter, time.Millisecond)
	a.Message += "; retry in " + delay.String()
	a.Retry = &errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}
	return a
}

// Ceil rounds d up to a multiple of unit.
func Ceil(d, unit time.Duration) time.Duration {
	if r := d % unit; r > 0 {
		d += unit - r
	}
	return d
}
