package server

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rls"
)

const (
	codeOK   = rlsv3.RateLimitResponse_OK
	codeOver = rlsv3.RateLimitResponse_OVER_LIMIT
)

// call is the engine's side of one RLS request: the rls.Request read from the protobuf and
// the engine's answer. It is pooled, so that a call allocates nothing but its response.
type call struct {
	req       rls.Request
	descs     []rls.Descriptor
	entries   []rls.Entry
	overrides []rls.Override
	ans       rls.Answer
}

var callPool = sync.Pool{New: func() any { return new(call) }}

func getCall() *call { return callPool.Get().(*call) }

// release puts c back in the pool. The slices keep what they point to (the request's strings,
// the rules' limits) until the next call overwrites them or the pool drops c at a GC: clearing
// them here cost 5% of a decision in write barriers (BenchmarkDecide).
func (c *call) release() {
	c.entries, c.descs, c.overrides, c.ans.Verdicts = c.entries[:0], c.descs[:0], c.overrides[:0], c.ans.Verdicts[:0]
	c.req, c.ans.Rules = rls.Request{}, nil
	callPool.Put(c)
}

// read sets c.req to req; a descriptor or an entry that is nil is refused.
func (c *call) read(req *rlsv3.RateLimitRequest) error {
	n, o := 0, 0
	for i, d := range req.Descriptors {
		if d == nil {
			return invalid("descriptors[%d]: null", i)
		}
		n += len(d.Entries)
		if d.Limit != nil {
			o++
		}
	}
	if cap(c.entries) < n { // c.descs point into c.entries and c.overrides: sized once
		c.entries = make([]rls.Entry, 0, n)
	}
	if cap(c.overrides) < o {
		c.overrides = make([]rls.Override, 0, o)
	}
	for i, d := range req.Descriptors {
		first := len(c.entries)
		for j, e := range d.Entries {
			if e == nil {
				return invalid("descriptors[%d].entries[%d]: null", i, j)
			}
			c.entries = append(c.entries, rls.Entry{Key: e.Key, Value: e.Value})
		}
		rd := rls.Descriptor{Entries: c.entries[first:len(c.entries):len(c.entries)], IsNegativeHits: d.IsNegativeHits}
		if d.HitsAddend != nil {
			rd.HitsAddend = &d.HitsAddend.Value
		}
		if l := d.Limit; l != nil {
			c.overrides = append(c.overrides, rls.Override{RequestsPerUnit: l.RequestsPerUnit, Unit: config.Unit(l.Unit),
				UnitMultiplier: l.GetUnitMultiplier().GetValue()})
			rd.Limit = &c.overrides[len(c.overrides)-1]
		}
		c.descs = append(c.descs, rd)
	}
	c.req = rls.Request{Domain: req.Domain, Descriptors: c.descs, HitsAddend: req.HitsAddend}
	return nil
}

// decide answers one RLS request. Errors are gRPC status errors.
func (s *Server) decide(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	c := getCall()
	defer c.release()
	if err := s.decideCall(ctx, c, req); err != nil {
		return nil, err
	}
	resp := s.response(&c.ans)
	if s.cfg.ResponseDynamicMetadata {
		resp.DynamicMetadata = dynamicMetadata(req, &c.ans)
	}
	return resp, nil
}

// decideCall reads req into c and decides it into c.ans. Errors are gRPC status errors.
func (s *Server) decideCall(ctx context.Context, c *call, req *rlsv3.RateLimitRequest) error {
	if err := c.read(req); err != nil {
		return err
	}
	return statusError(s.eng.Decide(ctx, &c.req, &c.ans))
}

// grpcCodes are the gRPC codes of the rls error kinds.
var grpcCodes = [...]codes.Code{
	rls.KindInvalid:     codes.InvalidArgument,
	rls.KindUnavailable: codes.Unavailable,
	rls.KindCanceled:    codes.Canceled,
	rls.KindDeadline:    codes.DeadlineExceeded,
}

// statusError is the gRPC status error of an rls.Error (nil for nil; other errors as they are).
func statusError(err error) error {
	if err == nil {
		return nil // before errors.As, whose target escapes: no allocation per decision
	}
	return kindStatus(err)
}

func kindStatus(err error) error {
	var e *rls.Error
	if !errors.As(err, &e) {
		return err
	}
	code := codes.Unknown
	if int(e.Kind) < len(grpcCodes) {
		code = grpcCodes[e.Kind]
	}
	return status.Error(code, e.Msg)
}

// invalid returns an INVALID_ARGUMENT error whose message names the field.
func invalid(format string, args ...any) error {
	return statusError(rls.Invalidf(format, args...))
}

// response builds the RLS response of an answer.
func (s *Server) response(ans *rls.Answer) *rlsv3.RateLimitResponse {
	resp, block := newResponse(len(ans.Verdicts))
	resp.OverallCode = rlsv3.RateLimitResponse_Code(ans.Code)
	var current *currentLimits // of ans.Rules, loaded at the first limited verdict
	for i := range ans.Verdicts {
		v := &ans.Verdicts[i]
		ds := &block[i].status
		resp.Statuses[i] = ds
		ds.Code, ds.LimitRemaining = rlsv3.RateLimitResponse_Code(v.Code), v.Remaining
		if !v.Limited {
			continue
		}
		dur := &block[i].duration
		dur.Seconds = int64(v.Reset / time.Second)
		ds.DurationUntilReset = dur
		if current == nil && v.Override == nil {
			current = s.currentLimits(ans.Rules)
		}
		ds.CurrentLimit = current.of(v)
	}
	if s.cfg.ResponseHeaders && ans.Tightest >= 0 {
		resp.ResponseHeadersToAdd = s.rateLimitHeaders(resp.Statuses[ans.Tightest])
	}
	return resp
}

// statusBlock holds a descriptor's status and its duration_until_reset together.
type statusBlock struct {
	status   rlsv3.RateLimitResponse_DescriptorStatus
	duration durationpb.Duration
}

// oneResponse is the response to a request of one descriptor (the usual case) in a single
// allocation.
type oneResponse struct {
	resp     rlsv3.RateLimitResponse
	statuses [1]*rlsv3.RateLimitResponse_DescriptorStatus
	block    [1]statusBlock
}

// newResponse allocates a response and the statuses of n descriptors (one allocation for
// n == 1, three otherwise); resp.Statuses has length n and is filled by the caller.
func newResponse(n int) (*rlsv3.RateLimitResponse, []statusBlock) {
	if n == 1 {
		o := &oneResponse{}
		o.resp.OverallCode = codeOK
		o.resp.Statuses = o.statuses[:]
		return &o.resp, o.block[:]
	}
	return &rlsv3.RateLimitResponse{OverallCode: codeOK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)},
		make([]statusBlock, n)
}

// rateLimitHeaders are the RateLimit headers (names configurable, as envoyproxy/ratelimit's
// LIMIT_*_HEADER settings) of the tightest descriptor: its limit, remaining units and the
// seconds until its reset.
func (s *Server) rateLimitHeaders(ds *rlsv3.RateLimitResponse_DescriptorStatus) []*corev3.HeaderValue {
	return []*corev3.HeaderValue{
		{Key: s.headerNames[0], Value: strconv.FormatUint(uint64(ds.CurrentLimit.GetRequestsPerUnit()), 10)},
		{Key: s.headerNames[1], Value: strconv.FormatUint(uint64(ds.LimitRemaining), 10)},
		{Key: s.headerNames[2], Value: strconv.FormatInt(ds.DurationUntilReset.GetSeconds(), 10)},
	}
}
