package grpclimit

import (
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	"github.com/sluicehq/sluice/internal/rpclimit"
)

// statusOf returns the status error of a call answered a (see Unary): nil (no answer) to run
// it.
func statusOf(a *rpclimit.Answer) error {
	if a == nil {
		return nil
	}
	st := status.New(codes.Code(a.Code), a.Message)
	if ds := a.Details(); ds != nil {
		details := make([]protoadapt.MessageV1, len(ds))
		for i, d := range ds {
			details[i] = protoadapt.MessageV1Of(d)
		}
		st, _ = st.WithDetails(details...)
	}
	return st.Err()
}

// header returns the binding limit's state as response metadata.
func (c *call) header() metadata.MD {
	d := c.o.Decision
	reset := rpclimit.Ceil(c.q.Reset(d), time.Second) / time.Second
	vals := &[3]string{strconv.FormatInt(d.Capacity, 10), strconv.FormatInt(max(d.Remaining, 0), 10),
		strconv.FormatInt(int64(reset), 10)}
	return metadata.MD{
		"x-ratelimit-limit":     vals[0:1:1],
		"x-ratelimit-remaining": vals[1:2:2],
		"x-ratelimit-reset":     vals[2:3:3],
	}
}
