package grpclimit

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice"
)

// resetOf is the reset a call decided d by checks is told: sluice.Decision.ResetIn, the
// longest of the denying checks' when denied (positive, a call that can never be admitted
// included).
func resetOf(checks []sluice.Check, d sluice.Decision) time.Duration {
	if d.Allowed {
		return d.ResetIn(0)
	}
	var wait time.Duration
	for _, c := range checks {
		if !c.Decision.Allowed {
			wait = max(wait, c.Decision.ResetIn(c.Rule.Period))
		}
	}
	return max(wait, d.ResetIn(0)) // the combined decision denies: positive
}

// denial returns the status of a call the limits refused (see Unary), to retry after reset.
// retry_delay is rounded up so that a client that waits that long is not refused again for
// being early; a call that costs more than a limit's capacity gets one too (until the limit's
// state is empty), so that a client does not retry it at once. The status holds copies of the
// checks' keys: it outlives the call's buffer.
func denial(checks []sluice.Check, d sluice.Decision, reset time.Duration) error {
	qf := &errdetails.QuotaFailure{}
	var names []string
	for _, c := range checks {
		if c.Decision.Allowed {
			continue
		}
		key := strings.Clone(c.Key) // c.Key may point into the call's buffer, reused once it ends
		name, _, _ := strings.Cut(key, ":")
		names = append(names, name)
		qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{
			Subject:     key,
			Description: fmt.Sprintf("limit %q (%s) exceeded", name, c.Rule),
			QuotaId:     name,
			QuotaValue:  c.Decision.Limit,
		})
	}
	msg := "grpclimit: rate limit exceeded (" + strings.Join(names, ", ") + ")"
	delay := ceil(reset, time.Millisecond)
	if d.RetryAfter < 0 {
		msg += ": the call costs more than the limit's capacity"
	} else {
		msg += "; retry in " + delay.String()
	}
	st, _ := status.New(codes.ResourceExhausted, msg).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}, qf)
	return st.Err()
}

// ceil rounds d up to a multiple of unit.
func ceil(d, unit time.Duration) time.Duration {
	if r := d % unit; r > 0 {
		d += unit - r
	}
	return d
}

// header returns the binding limit's state as response metadata.
func (c *call) header() metadata.MD {
	d := c.o.Decision
	reset := ceil(resetOf(c.q.Checks(), d), time.Second) / time.Second
	vals := &[3]string{strconv.FormatInt(d.Limit, 10), strconv.FormatInt(max(d.Remaining, 0), 10),
		strconv.FormatInt(int64(reset), 10)}
	return metadata.MD{
		"x-ratelimit-limit":     vals[0:1:1],
		"x-ratelimit-remaining": vals[1:2:2],
		"x-ratelimit-reset":     vals[2:3:3],
	}
}
