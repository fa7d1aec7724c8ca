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
	first    int // the item's checks in the main group are checks[first:first+checks]
	checks   int
	over     bool
	decided  bool
	decision sluice.Decision
	binding  int                // index of the rule with the least remaining
	class    sluice.Criticality // the request's criticality class (criticality.go)
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

func (it *item) numRules() int {
	if it.overridden() {
		return 1
	}
	return len(it.limit.Rules)
}

func (it *item) shadow() bool { return !it.overridden() && it.limit != nil && it.limit.ShadowMode }

// never reports whether the item was denied because its cost is above the capacity of one of
// its rules, so that the same request can never be allowed.
func (it *item) never() bool {
	if !it.over || it.shadow() || it.desc.IsNegativeHits {
		return false
	}
	for j := range it.numRules() {
		if it.hits > it.rule(j).Capacity() {
			return true
		}
	}
	return false
}

// grouped reports whether the item is decided in the main group: it takes units (neither a
// peek nor a refund) and its answer counts (not shadow mode).
func (it *item) grouped() bool {
	return it.limited() && !it.shadow() && it.hits != 0 && !it.desc.IsNegativeHits && !it.decided
}

// appendChecks appends one check of cost n per rule of the item.
func (it *item) appendChecks(checks []sluice.Check, n int64) []sluice.Check {
	for j := range it.numRules() {
		var l *config.Limit
		if !it.overridden() {
			l = it.limit
		}
		checks = append(checks, sluice.Check{Key: checkKey(l, it.key, j), Rule: it.rule(j), N: n, Reserve: it.reserve(j, n)})
	}
	return checks
}

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
	return s.decideInto(ctx, req, nil)
}

// decideInto is decide; when never is not nil, it is set to whether each descriptor can never
// be allowed (see item.never), which an RLS response cannot say.
func (s *Server) decideInto(ctx context.Context, req *rlsv3.RateLimitRequest, never *[]bool) (*rlsv3.RateLimitResponse, error) {
	st := s.rules.Load()
	dom, err := s.validate(st, req)
	if err != nil {
		return nil, err
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	sc.items = appendItems(sc.items, dom, req)
	if class := s.requestClass(req); class != sluice.Critical {
		for i := range sc.items {
			sc.items[i].class = class
		}
	}
	applyReplaces(sc.items)
	if err := s.decideHot(ctx, st, sc); err != nil {
		return nil, err
	}
	if err := s.decideGroup(ctx, sc); err != nil {
		return nil, err
	}
	for i := range sc.items {
		if it := &sc.items[i]; it.limited() && !it.decided {
			if err := s.decideAlone(ctx, sc, it); err != nil {
				return nil, err
			}
		}
	}
	recordHot(st, sc)
	if never != nil {
		*never = make([]bool, len(sc.items))
		for i := range sc.items {
			(*never)[i] = sc.items[i].never()
		}
	}
	return s.respond(st, req.Domain, sc.items), nil
}

// appendItems appends the request's descriptors, with their limits and costs, to items.
func appendItems(items []item, dom *config.Domain, req *rlsv3.RateLimitRequest) []item {
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
		items = append(items, it)
	}
	return items
}

// decideGroup decides the main group: every limit of every grouped descriptor, all or
// nothing.
func (s *Server) decideGroup(ctx context.Context, sc *scratch) error {
	for i := range sc.items {
		if it := &sc.items[i]; it.grouped() {
			it.first = len(sc.checks)
			sc.checks = it.appendChecks(sc.checks, it.hits)
			it.checks = len(sc.checks) - it.first
		}
	}
	denied, err := s.allowAll(ctx, sc.checks)
	if err != nil {
		return err
	}
	for i := range sc.items {
		if it := &sc.items[i]; it.checks > 0 {
			it.settle(sc.checks[it.first:it.first+it.checks], denied-it.first)
		}
	}
	return nil
}

// decideAlone decides a descriptor outside the main group: a shadow-mode one takes its own
// limits all or nothing; a peek (hits 0) or a refund (is_negative_hits) asks each rule on its
// own.
func (s *Server) decideAlone(ctx context.Context, sc *scratch, it *item) error {
	if it.hits != 0 && !it.desc.IsNegativeHits {
		sc.own = it.appendChecks(sc.own[:0], it.hits)
		denied, err := s.allowAll(ctx, sc.own)
		if err != nil {
			return err
		}
		it.settle(sc.own, denied)
		return nil
	}
	n := int64(0) // a peek
	if it.desc.IsNegativeHits {
		n = -it.hits
	}
	sc.own = it.appendChecks(sc.own[:0], n)
	for j := range sc.own {
		c := &sc.own[j]
		d, err := s.limiterFor(sc.own[j:j+1]).AllowN(ctx, c.Key, c.Rule, c.N)
		if err != nil {
			return s.storeError(ctx, err)
		}
		c.Decision = d
		it.over = it.over || (n == 0 && !d.Allowed)
	}
	it.combine(sc.own)
	return nil
}

// allowAll takes every check or none (see Limiter.AllowAll) and returns the index of the
// check that denied, or len(checks) when every check admitted. Checks before it were taken
// and refunded, checks after it only peeked.
func (s *Server) allowAll(ctx context.Context, checks []sluice.Check) (int, error) {
	if len(checks) == 0 {
		return 0, nil
	}
	if _, err := s.limiterFor(checks).AllowAll(ctx, checks); err != nil {
		return 0, s.storeError(ctx, err)
	}
	for j := range checks {
		if !checks[j].Decision.Allowed {
			return j, nil
		}
	}
	return len(checks), nil
}

// settle sets the item's outcome from its checks of an all-or-nothing group. denied is the
// index (relative to checks) of the check that denied the group: negative if it lies before
// them, >= len(checks) if after them or nothing was denied. Checks after it were only
// peeked, so they are over their limit when fewer units remain than the request needs.
func (it *item) settle(checks []sluice.Check, denied int) {
	for j := range checks {
		d := &checks[j].Decision
		if j == denied || (j > denied && (!d.Allowed || d.Remaining < checks[j].N)) {
			it.over = true
		}
	}
	it.combine(checks)
}

// combine sets the item's decision from its checks' decisions, once it.over is known.
func (it *item) combine(checks []sluice.Check) {
	it.decision, it.binding = sluice.Combine(checks, !it.over)
	it.decided = true
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

// fallbackError counts and logs a store failure that the fallback answered by its policy.
func (s *Server) fallbackError(err error) {
	s.metrics.storeErrors.Inc()
	s.logStoreError(err, "answered_by", "fallback "+s.cfg.StoreConfig.Fallback)
}

// logStoreError logs at most one store error per second, so an outage does not flood logs.
func (s *Server) logStoreError(err error, attrs ...any) {
	now := time.Now().UnixNano()
	last := s.lastStoreLog.Load()
	if now-last < int64(time.Second) || !s.lastStoreLog.CompareAndSwap(last, now) {
		return
	}
	s.log.Error("store error", append([]any{"err", err}, attrs...)...)
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
	if info.hot == nil { // a hot parameter's sketch counts it already
		info.view.Add(it.key, 1, it.over && !it.shadow())
	}
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
