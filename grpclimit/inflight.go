package grpclimit

import (
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/internal/inflight"
)

// refusal is the status of a call refused a slot of c: ResourceExhausted with a QuotaFailure
// (quota_value: the limit) and a RetryInfo, or Unavailable for an adaptive limit (the
// service is overloaded). The subject is the limit's name: the key may be a client's secret.
func refusal(c *inflight.Claim) error {
	d := c.Decision()
	code, msg := codes.ResourceExhausted, fmt.Sprintf("grpclimit: in-flight limit reached (%s: %d in flight)", c.Name, c.Slot.InFlight)
	if c.Overload() {
		code, msg = codes.Unavailable, fmt.Sprintf("grpclimit: at the adaptive in-flight limit (%s: %d)", c.Name, d.Limit)
	}
	qf := &errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: c.Name,
		Description: fmt.Sprintf("limit %q (%d in flight) reached", c.Name, d.Limit), QuotaId: c.Name, QuotaValue: d.Limit}}}
	if d.RetryAfter < 0 {
		st, _ := status.New(code, msg+": the call's class can never be admitted").WithDetails(qf)
		return st.Err()
	}
	delay := ceil(d.RetryAfter, time.Millisecond)
	st, _ := status.New(code, msg+"; retry in "+delay.String()).WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(delay)}, qf)
	return st.Err()
}
