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
	"github.com/sluicehq/sluice/internal/redact"
)

// denial returns the status of a call the limits refused (see Unary). retry_delay is rounded
// up so that a client that waits that long is not refused again for being early.
func denial(checks []sluice.Check, d sluice.Decision) error {
	qf := &errdetails.QuotaFailure{}
	var names []string
	for _, c := range checks {
		if c.Decision.Allowed {
			continue
		}
		name, key, _ := strings.Cut(c.Key, ":")
		names = append(names, name)
		qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{
			Subject:     name + ":" + redact.Hash(key), // the key hashed: it may be the caller's API key
			Description: fmt.Sprintf("limit %q (%s) exceeded", name, c.Rule),
			QuotaId:     name,
			QuotaValue:  c.Decision.Limit,
		})
	}
	msg := "grpclimit: rate limit exceeded (" + strings.Join(names, ", ") + ")"
	if d.RetryAfter < 0 {
		st, _ := status.New(codes.ResourceExhausted, msg+": the call costs more than the limit's capacity").WithDetails(qf)
		return st.Err()
	}
	delay := ceil(d.RetryAfter, time.Millisecond)
	st, _ := status.New(codes.ResourceExhausted, msg+"; retry in "+delay.String()).
		WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}, qf)
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
func (v *verdict) header() metadata.MD {
	reset := ceil(v.decision.ResetAfter, time.Second) / time.Second
	vals := &[3]string{strconv.FormatInt(v.decision.Limit, 10), strconv.FormatInt(max(v.decision.Remaining, 0), 10),
		strconv.FormatInt(int64(reset), 10)}
	return metadata.MD{
		"x-ratelimit-limit":     vals[0:1:1],
		"x-ratelimit-remaining": vals[1:2:2],
		"x-ratelimit-reset":     vals[2:3:3],
	}
}
