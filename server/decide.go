package server

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

const (
	codeOK   = rlsv3.RateLimitResponse_OK
	codeOver = rlsv3.RateLimitResponse_OVER_LIMIT
)

// item is one descriptor of a request being decided.
type item struct {
	limit    *config.Limit // configured limit, or nil
	override sluice.Rule   // request-supplied limit when overridden
	desc     *rlcommon.RateLimitDescriptor
	key      string
	hits     int64
	first, n int // the item's checks in the main group
	over     bool
	decided  bool
	decision sluice.Decision
	binding  int // index of the rule with the least remaining
}

func (it *item) overridden() bool { return it.override.Limit > 0 }

// limited reports whether the item needs a store call.
func (it *item) limited() bool {
	return it.overridden() || (it.limit != nil && !it.limit.Unlimited && len(it.limit.Rules) > 0)
}

func (it *item) rule(i int) sluice.Rule {
	if it.overridden() {
		return it.override
	}
	return it.limit.Rules[i]
}

func (it *item) rules() int {
	if it.overridden() {
		return 1
	}
	return len(it.limit.Rules)
}

func (it *item) shadow() bool { return !it.overridden() && it.limit != nil && it.limit.ShadowMode }

type scratch struct {
	items  []item
	checks []sluice.Check
	own    []sluice.Check
}

var scratchPool = sync.Pool{New: func() any { return &scratch{} }}

func (sc *scratch) release() {
	clear(sc.items)
	clear(sc.checks)
	clear(sc.own)
	sc.items, sc.checks, sc.own = sc.items[:0], sc.checks[:0], sc.own[:0]
	scratchPool.Put(sc)
}

// maxHits bounds a cost: anything above every rule's capacity is simply denied.
const maxHits = sluice.MaxLimit + 1

// decide answers one RLS request. Errors are gRPC status errors.
func (s *Server) decide(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	st := s.rules.Load()
	dom, err := s.validate(st, req)
	if err != nil {
		return nil, err
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release()

	base := int64(req.HitsAddend)
	if base == 0 {
		base = 1
	}
	for _, d := range req.Descriptors {
		it := item{desc: d, hits: base}
		if d.HitsAddend != nil {
			it.hits = int64(min(d.HitsAddend.Value, maxHits))
		}
		if d.Limit != nil {
			it.override, _ = overrideRule(d.Limit) // validated
		} else {
			it.limit = config.Lookup(dom, d.Entries)
		}
		if it.limited() {
			it.key = descriptorKey(req.Domain, d.Entries)
		}
		sc.items = append(sc.items, it)
	}
	applyReplaces(sc.items)

	// The main group: every limit of every enforced descriptor, all or nothing.
	for i := range sc.items {
		it := &sc.items[i]
		if !it.limited() || it.shadow() || it.hits == 0 || it.desc.IsNegativeHits {
			continue
		}
		it.first = len(sc.checks)
		for j := range it.rules() {
			sc.checks = append(sc.checks, sluice.Check{Key: ruleKey(it.key, j), Rule: it.rule(j), N: it.hits})
		}
		it.n = it.rules()
	}
	if len(sc.checks) > 0 {
		if _, err := s.limiter.AllowAll(ctx, sc.checks); err != nil {
			return nil, s.storeError(ctx, err)
		}
		denied := len(sc.checks)
		for j := range sc.checks {
			if !sc.checks[j].Decision.Allowed {
				denied = j
				break
			}
		}
		for i := range sc.items {
			if it := &sc.items[i]; it.n > 0 {
				it.settle(sc.checks[it.first:it.first+it.n], denied-it.first)
			}
		}
	}
	// Shadow-mode, peeking (hits 0) and refunding (is_negative_hits) descriptors, each on its own.
	for i := range sc.items {
		it := &sc.items[i]
		if !it.limited() || it.decided {
			continue
		}
		if err := s.decideAlone(ctx, sc, it); err != nil {
			return nil, err
		}
	}
	return s.respond(st, req.Domain, sc.items), nil
}

// settle sets the item's outcome from its checks of the main group. denied is the index
// (relative to checks) of the check that denied the group, or >= len(checks) if it lies
// after them or nothing was denied; checks after it were only peeked, so they are over
// their limit when fewer units remain than the request needs.
func (it *item) settle(checks []sluice.Check, denied int) {
	it.decided = true
	for j := range checks {
		c := &checks[j]
		over := j == denied || (j > denied && (!c.Decision.Allowed || c.Decision.Remaining < c.N))
		it.merge(j, c.Decision, over)
	}
}

func (it *item) merge(j int, d sluice.Decision, over bool) {
	if j == 0 {
		it.decision, it.binding = d, 0
	} else {
		if d.Remaining < it.decision.Remaining {
			it.decision.Limit, it.decision.Remaining, it.binding = d.Limit, d.Remaining, j
		}
		it.decision.ResetAfter = max(it.decision.ResetAfter, d.ResetAfter)
		if d.RetryAfter < 0 || it.decision.RetryAfter < 0 {
			it.decision.RetryAfter = sluice.Never
		} else {
			it.decision.RetryAfter = max(it.decision.RetryAfter, d.RetryAfter)
		}
	}
	it.over = it.over || over
}

// decideAlone decides a descriptor outside the main group.
func (s *Server) decideAlone(ctx context.Context, sc *scratch, it *item) error {
	it.decided = true
	if it.hits == 0 || it.desc.IsNegativeHits {
		n := int64(0)
		if it.desc.IsNegativeHits {
			n = -it.hits
		}
		for j := range it.rules() {
			d, err := s.limiter.AllowN(ctx, ruleKey(it.key, j), it.rule(j), n)
			if err != nil {
				return s.storeError(ctx, err)
			}
			it.merge(j, d, !d.Allowed && n == 0)
		}
		return nil
	}
	sc.own = sc.own[:0]
	for j := range it.rules() {
		sc.own = append(sc.own, sluice.Check{Key: ruleKey(it.key, j), Rule: it.rule(j), N: it.hits})
	}
	if _, err := s.limiter.AllowAll(ctx, sc.own); err != nil {
		return s.storeError(ctx, err)
	}
	denied := len(sc.own)
	for j := range sc.own {
		if !sc.own[j].Decision.Allowed {
			denied = j
			break
		}
	}
	it.settle(sc.own, denied)
	return nil
}

// applyReplaces drops the limits that another limit of the request replaces.
func applyReplaces(items []item) {
	for i := range items {
		l := items[i].limit
		if l == nil || len(l.Replaces) == 0 {
			continue
		}
		for _, name := range l.Replaces {
			for j := range items {
				if o := items[j].limit; j != i && o != nil && o.Name == name {
					items[j].limit, items[j].key = nil, ""
				}
			}
		}
	}
}

// storeError maps a store failure to a gRPC status and counts it. Only the caller's own
// context ending is CANCELLED / DEADLINE_EXCEEDED; a store that timed out on its own
// deadline is unavailable like any other store failure (counted and logged).
func (s *Server) storeError(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, sluice.ErrInvalidRule), errors.Is(err, sluice.ErrInvalidKey), errors.Is(err, sluice.ErrInvalidN):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	s.metrics.storeErrors.Inc()
	s.logStoreError(err)
	return status.Error(codes.Unavailable, "sluice: store unavailable: "+err.Error())
}

// logStoreError logs at most one store error per second, so an outage does not flood logs.
func (s *Server) logStoreError(err error) {
	now := time.Now().UnixNano()
	last := s.lastStoreLog.Load()
	if now-last < int64(time.Second) || !s.lastStoreLog.CompareAndSwap(last, now) {
		return
	}
	s.log.Error("store error", "err", err)
}

// respond builds the RLS response and counts the decisions.
func (s *Server) respond(st *rules, domain string, items []item) *rlsv3.RateLimitResponse {
	resp, block := newResponse(len(items))
	dc := st.domains[domain]
	tightest := -1
	for i := range items {
		it := &items[i]
		ds := &block[i].status
		resp.Statuses[i] = ds
		ds.Code = codeOK
		if !it.limited() {
			if it.limit != nil && it.limit.Unlimited {
				st.limits[it.limit.Index].counters.unlimited.Inc()
			} else {
				dc.noRule.Inc()
			}
			continue
		}
		d := it.decision
		if it.over && !it.shadow() {
			ds.Code = codeOver
			resp.OverallCode = codeOver
		}
		ds.LimitRemaining = clampU32(d.Remaining)
		wait := d.ResetAfter
		if it.over && d.RetryAfter > 0 {
			wait = d.RetryAfter
		}
		dur := &block[i].duration
		dur.Seconds, dur.Nanos = int64(wait/time.Second), int32(wait%time.Second)
		ds.DurationUntilReset = dur
		s.count(st, dc, it, ds)
		if tightest < 0 || d.Remaining < items[tightest].decision.Remaining {
			tightest = i
		}
	}
	if s.responseHeaders && tightest >= 0 {
		resp.ResponseHeadersToAdd = rateLimitHeaders(&items[tightest], resp.Statuses[tightest])
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

// count sets the status's current_limit and counts the decision.
func (s *Server) count(st *rules, dc *domainCounters, it *item, ds *rlsv3.RateLimitResponse_DescriptorStatus) {
	if it.overridden() {
		l := it.desc.Limit
		ds.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{RequestsPerUnit: l.RequestsPerUnit,
			Unit: rlsv3.RateLimitResponse_RateLimit_Unit(l.Unit)}
		if l.UnitMultiplier != nil && l.UnitMultiplier.Value > 1 {
			ds.CurrentLimit.UnitMultiplier = wrapperspb.UInt32(l.UnitMultiplier.Value)
		}
		if it.over {
			dc.overrideNo.Inc()
		} else {
			dc.overrideOK.Inc()
		}
		return
	}
	info := &st.limits[it.limit.Index]
	ds.CurrentLimit = info.current[it.binding]
	c := info.counters
	switch {
	case it.over && it.shadow():
		c.shadow.Inc()
		c.ok.Inc()
	case it.over:
		c.over.Inc()
	default:
		c.ok.Inc()
	}
	if it.limit.DetailedMetric {
		result := "ok"
		if it.over && !it.shadow() {
			result = "over_limit"
		}
		s.metrics.decisions.WithLabelValues(it.limit.Domain, it.key, result).Inc()
	}
}

// rateLimitHeaders are the IETF draft RateLimit headers of the tightest descriptor.
func rateLimitHeaders(it *item, ds *rlsv3.RateLimitResponse_DescriptorStatus) []*corev3.HeaderValue {
	reset := ds.DurationUntilReset.AsDuration()
	secs := int64((reset + time.Second - 1) / time.Second)
	return []*corev3.HeaderValue{
		{Key: "RateLimit-Limit", Value: strconv.FormatInt(it.decision.Limit, 10)},
		{Key: "RateLimit-Remaining", Value: strconv.FormatInt(it.decision.Remaining, 10)},
		{Key: "RateLimit-Reset", Value: strconv.FormatInt(secs, 10)},
	}
}
