package server

import (
	"context"
	"errors"
	"math"
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
	override sluice.Rule   // request-supplied limit when ovr
	ovr      bool          // the descriptor brings its own limit
	block    bool          // requests_per_unit 0: over the limit without a store call
	quota    bool          // quota mode: over the limit denies only when every quota item is
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

func (it *item) overridden() bool { return it.ovr }

// limited reports whether a limit applies to the item (a store call, or a block).
func (it *item) limited() bool {
	return it.ovr || (it.limit != nil && !it.limit.Unlimited && (it.limit.Block || len(it.limit.Rules) > 0))
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
	if it.block {
		return true
	}
	for j := range it.numRules() {
		if it.hits > it.rule(j).Capacity() {
			return true
		}
	}
	return false
}

// grouped reports whether the item is decided in the main group: it takes units (neither a
// peek nor a refund) and its answer alone denies the request (neither shadow nor quota mode).
func (it *item) grouped() bool {
	return it.limited() && !it.block && !it.shadow() && !it.quota && it.hits != 0 && !it.desc.IsNegativeHits && !it.decided
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
	shared []string // config.LookupShared's buffer
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

// decideInto is decide; when inspect is not nil, it is called with the decided items before
// they go back to their pool, for what an RLS response cannot say (see item.never).
func (s *Server) decideInto(ctx context.Context, req *rlsv3.RateLimitRequest, inspect func([]item)) (*rlsv3.RateLimitResponse, error) {
	st := s.rules.Load()
	dom, err := s.validate(st, req)
	if err != nil {
		return nil, err
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	sc.items = s.appendItems(sc, dom, req)
	if class := s.requestClass(req); class != sluice.Critical {
		for i := range sc.items {
			sc.items[i].class = class
		}
	}
	applyReplaces(sc.items)
	if err := s.decideHot(ctx, st, sc); err != nil {
		return nil, err
	}
	decideGroup := s.decideGroup
	if s.cfg.CountDenied {
		decideGroup = s.decideCounting
	}
	if err := decideGroup(ctx, sc); err != nil {
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
	if inspect != nil {
		inspect(sc.items)
	}
	return s.respond(st, dom, req, sc.items), nil
}

// settles reports whether a settle applies to the item: a limit with a key in the store (not a
// block, which has no state to settle).
func (it *item) settles() bool { return it.limited() && !it.block }

// settleInto settles a request's descriptors (see settleDescriptors) and returns its items,
// each with its decision.
func (s *Server) settleInto(ctx context.Context, req *rlsv3.RateLimitRequest) ([]item, error) {
	dom, err := s.validate(s.rules.Load(), req)
	if err != nil {
		return nil, err
	}
	items := s.appendItems(&scratch{}, dom, req) // not pooled: the caller reads the items
	applyReplaces(items)
	var checks []sluice.Check
	for i := range items {
		it := &items[i]
		if !it.settles() {
			continue
		}
		n := it.hits
		if it.desc.IsNegativeHits {
			n = -n
		}
		checks = it.appendChecks(checks[:0], n)
		if err := s.settleChecks(ctx, checks); err != nil {
			return nil, s.storeError(ctx, err)
		}
		it.decision = settled(checks)
	}
	return items, nil
}

// appendItems appends the request's descriptors, with their limits and costs, to sc.items.
func (s *Server) appendItems(sc *scratch, dom *config.Domain, req *rlsv3.RateLimitRequest) []item {
	items := sc.items
	base := int64(req.HitsAddend)
	if base == 0 {
		base = 1
	}
	for _, d := range req.Descriptors {
		it := item{desc: d, hits: base}
		if d.HitsAddend != nil {
			it.hits = int64(min(d.HitsAddend.Value, maxHits))
		}
		var shared []string
		if d.Limit != nil && dom != nil { // the peer applies no limit, not even an override, in an unknown domain
			it.override, _ = overrideRule(d.Limit, s.defaultAlgorithm) // validated
			it.ovr, it.block = true, it.override.Limit == 0
		} else if dom != nil {
			if cap(sc.shared) < len(d.Entries) {
				sc.shared = make([]string, len(d.Entries))
			}
			shared = sc.shared[:len(d.Entries)]
			it.limit = config.LookupShared(dom, d.Entries, shared)
			if it.limit != nil {
				it.block = it.limit.Block
				it.quota = s.globalQuota || it.limit.QuotaMode
			}
		}
		if it.limited() && !it.block {
			it.key = descriptorKey(req.Domain, d.Entries, shared)
			if it.ovr { // an override counts apart from the configured limit, per unit as the peer's
				it.key += "|@" + strconv.Itoa(int(d.Limit.Unit))
			}
		}
		if it.block {
			it.over, it.decided = true, true
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

// decideCounting is decideGroup as envoyproxy/ratelimit decides (Config.CountDenied): each
// descriptor on its own, and the hits of one over its limit are charged anyway (a settle, so
// the key goes into debt as the peer's counter goes past the limit; a cost above the most a
// settle takes, sluice.MaxLimit, is charged that much).
func (s *Server) decideCounting(ctx context.Context, sc *scratch) error {
	for i := range sc.items {
		it := &sc.items[i]
		if !it.limited() || it.decided || it.hits == 0 || it.desc.IsNegativeHits {
			continue // peeks and refunds are decided alone
		}
		sc.own = it.appendChecks(sc.own[:0], it.hits)
		for j := range sc.own {
			c := &sc.own[j]
			lim := s.limiterFor(sc.own[j : j+1]) // a per-instance limit's own store; a class's reserve
			d, err := lim.AllowAll(ctx, sc.own[j:j+1])
			if err != nil {
				return s.storeError(ctx, err)
			}
			if !d.Allowed {
				if _, err := lim.Settle(ctx, c.Key, c.Rule, min(c.N, sluice.MaxLimit)); err != nil {
					return s.storeError(ctx, err)
				}
				it.over = true
			}
			c.Decision = d
		}
		it.combine(sc.own)
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
	s.peer.redisError.Inc()
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

// respond builds the RLS response and counts the decisions. The overall code is
// envoyproxy/ratelimit's: OVER_LIMIT when a descriptor outside quota mode is over its limit,
// or when every quota-mode descriptor is; OK in global shadow mode.
func (s *Server) respond(st *rules, dom *config.Domain, req *rlsv3.RateLimitRequest, items []item) *rlsv3.RateLimitResponse {
	resp, block := newResponse(len(items))
	dc := st.domains[req.Domain]
	tightest, quotas, quotasOver := -1, 0, 0
	now := time.Now()
	for i := range items {
		it := &items[i]
		ds := &block[i].status
		resp.Statuses[i] = ds
		ds.Code = codeOK
		if !it.limited() {
			switch {
			case it.limit != nil && it.limit.Unlimited:
				ds.LimitRemaining = math.MaxUint32
				st.limits[it.limit.Index].counters.unlimited.Inc()
			case dc != nil:
				dc.noRule.Inc()
			}
			continue
		}
		d := it.decision
		over := it.over && !it.shadow()
		if over {
			ds.Code = codeOver
			if it.quota {
				quotasOver++
			} else {
				resp.OverallCode = codeOver
			}
		}
		if it.quota {
			quotas++
		}
		if !it.over {
			ds.LimitRemaining = clampU32(d.Remaining)
		}
		wait := d.ResetAfter
		if it.over && d.RetryAfter > 0 {
			wait = d.RetryAfter
		}
		if it.block {
			p := it.period()
			wait = p - time.Duration(now.UnixNano()%int64(p))
		}
		dur := &block[i].duration
		dur.Seconds = int64((wait + time.Second - 1) / time.Second) // whole seconds, rounded up as the peer's
		ds.DurationUntilReset = dur
		s.count(st, dc, dom, it, ds)
		// The headers describe the descriptor closest to its limit; the last one over it wins.
		if tightest < 0 || (over && !it.quota) || ds.LimitRemaining < resp.Statuses[tightest].LimitRemaining {
			tightest = i
		}
	}
	if quotas > 0 && quotas == quotasOver {
		resp.OverallCode = codeOver
	}
	if resp.OverallCode == codeOver && s.globalShadow {
		resp.OverallCode = codeOK
		s.peer.globalShadow.Inc()
	}
	if s.responseHeaders && tightest >= 0 {
		resp.ResponseHeadersToAdd = s.rateLimitHeaders(resp.Statuses[tightest])
	}
	return resp
}

// period is the period of the item's (first) limit.
func (it *item) period() time.Duration {
	if it.ovr {
		if it.override.Period > 0 {
			return it.override.Period
		}
		return config.Unit(it.desc.Limit.Unit).Duration()
	}
	return it.limit.Unit.Duration() * time.Duration(max(it.limit.UnitMultiplier, 1))
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

// count sets the status's current_limit and counts the decision, in Sluice's metrics and in
// envoyproxy/ratelimit's.
func (s *Server) count(st *rules, dc *domainCounters, dom *config.Domain, it *item, ds *rlsv3.RateLimitResponse_DescriptorStatus) {
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
		s.peer.record(dc.peerOverride, it, s.nearLimitRatio)
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
	peer := info.peer
	if it.limit.DetailedMetric || it.limit.ValueToMetric {
		peer = s.peer.counters(config.MetricKey(dom, it.desc.Entries, it.limit))
	}
	s.peer.record(peer, it, s.nearLimitRatio)
	if it.limit.DetailedMetric {
		result := "ok"
		if it.over && !it.shadow() {
			result = "over_limit"
		}
		s.metrics.decisions.WithLabelValues(it.limit.Domain, it.key, result).Inc()
	}
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
