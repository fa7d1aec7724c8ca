package rls

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// item is one descriptor of a request being decided.
type item struct {
	limit    *config.Limit // configured limit, or nil
	override sluice.Rule   // request-supplied limit when ovr
	ovr      bool          // the descriptor brings its own limit
	block    bool          // requests_per_unit 0: over the limit without a store call
	quota    bool          // quota mode: over the limit denies only when every quota item is
	desc     *Descriptor
	key      string
	hits     int64
	first    int // the item's checks in the main group are checks[first:first+checks]
	checks   int
	over     bool
	decided  bool
	decision sluice.Decision
	binding  int // index of the rule with the least remaining
	rules    int // the item's rule decisions are scratch.rules[rulesAt:rulesAt+rules]
	rulesAt  int
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

// measured reports whether the item's cost is one Envoy measured and reports as usage: its
// descriptor's own hits_addend, positive, on a limit with state. Envoy Gateway sends a
// response cost (tokens, bytes) so when the stream ends (apply_on_stream_done), as Envoy AI
// Gateway does for its token limits: usage already served cannot be refused, and the next
// request must see it, so it is charged whatever the answer, past the limit as the peer's
// counter goes (decideMeasured), by at most maxMeasuredDebt capacities. A request's own count
// (request-level hits_addend, 1 by default) over its limit consumes nothing
// (envoyproxy/ratelimit issue #427).
func (it *item) measured() bool {
	return it.desc.HitsAddend != nil && it.hits > 0 && !it.desc.IsNegativeHits && it.limited() && !it.block
}

// maxMeasuredDebt bounds the charge of a measured cost a rule denied, in capacities of the
// rule: enough to leave the key over its limit (its state is past its capacity, so the next
// request, a zero-cost check too, is denied), little enough that the key drains soon, as the
// peer's counter forgets its excess when its window ends. A window's debt leaves with its
// window (within a period or two, whatever its size); a bucket already in debt for longer
// than that many capacities take to refill (drainOf) is not charged more, so a bucket is
// never locked out for longer than twice that however many costs, of whatever size (2^64
// sent by anyone who may call the service), arrive: not for the year a bucket's debt may last.
const maxMeasuredDebt = 2

// drainOf is how long capacities capacities of rule take to refill.
func drainOf(rule sluice.Rule, capacities int64) time.Duration {
	if rule.Limit <= 0 {
		return 0
	}
	return time.Duration(float64(rule.Period) * float64(capacities*rule.Capacity()) / float64(rule.Limit))
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
		checks = append(checks, sluice.Check{Key: checkKey(l, it.key, j), Rule: it.rule(j), N: n, Holdback: it.holdback(j, n)})
	}
	return checks
}

type scratch struct {
	items   []item
	checks  []sluice.Check
	own     []sluice.Check
	shared  []string          // config.LookupShared's buffer
	rules   []sluice.Decision // each rule's own decision, per item (item.rulesAt)
	outcome Outcome           // what the Observer is told of one item (count)
}

var scratchPool = sync.Pool{New: func() any { return &scratch{} }}

func (sc *scratch) release() {
	clear(sc.items)
	clear(sc.checks)
	clear(sc.own)
	sc.items, sc.checks, sc.own, sc.rules = sc.items[:0], sc.checks[:0], sc.own[:0], sc.rules[:0]
	sc.outcome = Outcome{}
	scratchPool.Put(sc)
}

// maxHits bounds a cost: anything above every rule's capacity is simply denied.
const maxHits = sluice.MaxLimit + 1

// Decide decides a request against the rules in force and fills ans: every limit of every
// descriptor must admit, and when one does not, nothing is consumed from any of them (but for
// shadow-mode, quota-mode, peek and refund descriptors, decided on their own, and descriptors
// with their own positive hits_addend, a measured cost charged whatever the answer: see
// item.measured; Config.CountDenied decides every descriptor as envoyproxy/ratelimit). An
// unknown domain, an unmatched or unlimited descriptor are OK without a store call. The
// decision is told to the Observer.
//
// Errors are *Error: KindInvalid for a request the rules or the bounds refuse (before any
// store call), KindUnavailable when the store fails without a fallback, KindCanceled or
// KindDeadline when ctx ends. Decide is safe for concurrent use; with a reused ans it does not
// allocate for a request of configured limits on the memory store.
func (e *Engine) Decide(ctx context.Context, req *Request, ans *Answer) error {
	st := e.rules.Load()
	dom, err := e.validate(st, req)
	if err != nil {
		return err
	}
	sc := scratchPool.Get().(*scratch)
	defer sc.release()
	sc.items = e.appendItems(sc, dom, req)
	if class := e.requestClass(req); class != sluice.Critical {
		for i := range sc.items {
			sc.items[i].class = class
		}
	}
	applyReplaces(sc.items)
	if err := e.decideHot(ctx, st, sc); err != nil {
		return err
	}
	decideGroup := e.decideGroup
	if e.cfg.CountDenied {
		decideGroup = e.decideCounting
	}
	for i := range sc.items { // with CountDenied, decideCounting charges every denied cost
		if it := &sc.items[i]; !e.cfg.CountDenied && it.measured() && !it.decided {
			if err := e.decideMeasured(ctx, sc, it, maxMeasuredDebt); err != nil {
				return err
			}
		}
	}
	if err := decideGroup(ctx, sc); err != nil {
		return err
	}
	for i := range sc.items {
		if it := &sc.items[i]; it.limited() && !it.decided {
			if err := e.decideAlone(ctx, sc, it); err != nil {
				return err
			}
		}
	}
	recordHot(st, sc)
	e.respond(st, dom, req, sc, ans)
	return nil
}

// settles reports whether a settle applies to the item: a limit with a key in the store (not a
// block, which has no state to settle).
func (it *item) settles() bool { return it.limited() && !it.block }

// Settle settles a request's descriptors, a cost known only after the request was served (see
// sluice.Limiter.Settle): every limit of every descriptor that has one settles its cost
// (HitsAddend, negative with IsNegativeHits), whatever the limit and its shadow mode. It
// appends one Settled per descriptor to dst. Errors are Decide's.
func (e *Engine) Settle(ctx context.Context, req *Request, dst []Settled) ([]Settled, error) {
	dom, err := e.validate(e.rules.Load(), req)
	if err != nil {
		return dst, err
	}
	items := e.appendItems(&scratch{}, dom, req) // not pooled: settles are not the hot path
	applyReplaces(items)
	var checks []sluice.Check
	for i := range items {
		it := &items[i]
		if !it.settles() {
			dst = append(dst, Settled{Block: it.block})
			continue
		}
		n := it.hits
		if it.desc.IsNegativeHits {
			n = -n
		}
		checks = it.appendChecks(checks[:0], n)
		if err := e.settleChecks(ctx, checks); err != nil {
			return dst, e.storeError(ctx, err)
		}
		dst = append(dst, Settled{Settles: true, Decision: CombineSettled(checks)})
	}
	return dst, nil
}

// appendItems appends the request's descriptors, with their limits and costs, to sc.items.
func (e *Engine) appendItems(sc *scratch, dom *config.Domain, req *Request) []item {
	items := sc.items
	base := int64(req.HitsAddend)
	if base == 0 {
		base = 1
	}
	for i := range req.Descriptors {
		d := &req.Descriptors[i]
		it := item{desc: d, hits: base}
		if d.HitsAddend != nil {
			it.hits = int64(min(*d.HitsAddend, maxHits))
		}
		var shared []string
		if d.Limit != nil && dom != nil { // the peer applies no limit, not even an override, in an unknown domain
			it.override, _ = overrideRule(d.Limit, e.defaultAlgorithm) // validated
			it.ovr, it.block = true, it.override.Limit == 0
		} else if dom != nil {
			if cap(sc.shared) < len(d.Entries) {
				sc.shared = make([]string, len(d.Entries))
			}
			shared = sc.shared[:len(d.Entries)]
			it.limit = config.LookupShared(dom, d.Entries, shared)
			if it.limit != nil {
				it.block = it.limit.Block
				it.quota = e.globalQuota || it.limit.QuotaMode
			}
		}
		if (it.limited() && !it.block) || (!it.ovr && it.limit != nil && it.limit.InFlight != nil) {
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
func (e *Engine) decideGroup(ctx context.Context, sc *scratch) error {
	for i := range sc.items {
		if it := &sc.items[i]; it.grouped() {
			it.first = len(sc.checks)
			sc.checks = it.appendChecks(sc.checks, it.hits)
			it.checks = len(sc.checks) - it.first
		}
	}
	denied, err := e.allowAll(ctx, sc.checks)
	if err != nil {
		return err
	}
	for i := range sc.items {
		if it := &sc.items[i]; it.checks > 0 {
			sc.settle(it, sc.checks[it.first:it.first+it.checks], denied-it.first)
		}
	}
	return nil
}

// decideCounting is decideGroup as envoyproxy/ratelimit decides (Config.CountDenied): each
// descriptor on its own, and the hits of one over its limit are charged anyway (a settle, so
// the key goes into debt as the peer's counter goes past the limit; a cost above the most a
// settle takes, sluice.MaxLimit, is charged that much; sluice.Limiter.AllowCountingDenied).
// A denial the over-limit cache answers (--mode overlimit) is not charged, as the peer's
// local cache does not count the hits it answers.
func (e *Engine) decideCounting(ctx context.Context, sc *scratch) error {
	for i := range sc.items {
		it := &sc.items[i]
		if !it.limited() || it.decided || it.hits == 0 || it.desc.IsNegativeHits {
			continue // peeks and refunds are decided alone
		}
		sc.own = it.appendChecks(sc.own[:0], it.hits)
		for j := range sc.own {
			c := &sc.own[j]
			lim := e.limiterFor(sc.own[j : j+1]) // a per-instance limit's own store; a class's holdback
			d, err := lim.AllowCountingDenied(ctx, c)
			if err != nil {
				return e.storeError(ctx, err)
			}
			it.over = it.over || !d.Allowed
		}
		sc.combine(it, sc.own)
	}
	return nil
}

// decideMeasured decides an item whose cost Envoy measured (item.measured): each of its rules
// on its own, and the cost of one over its limit charged all the same, as decideCounting
// charges it, but by at most capacities capacities of the rule, and not at all on a bucket
// already in debt for as long as that many capacities take to refill (maxMeasuredDebt).
func (e *Engine) decideMeasured(ctx context.Context, sc *scratch, it *item, capacities int64) error {
	sc.own = it.appendChecks(sc.own[:0], it.hits)
	for j := range sc.own {
		c := &sc.own[j]
		lim := e.limiterFor(sc.own[j : j+1]) // a per-instance limit's own store; a class's holdback
		d, err := lim.AllowAll(ctx, sc.own[j:j+1])
		if err != nil {
			return e.storeError(ctx, err)
		}
		if !d.Allowed {
			charge := min(c.N, capacities*c.Rule.Capacity())
			if c.Rule.Algorithm.Bucket() && d.ResetAfter >= drainOf(c.Rule, capacities) {
				charge = 0 // in debt for that long already
			}
			if charge > 0 {
				if _, err := lim.Settle(ctx, c.Key, c.Rule, charge); err != nil {
					return e.storeError(ctx, err)
				}
			}
			it.over = true
		}
		c.Decision = d
	}
	sc.combine(it, sc.own)
	return nil
}

// decideAlone decides a descriptor outside the main group: a shadow-mode one takes its own
// limits all or nothing; a peek (hits 0) or a refund (is_negative_hits) asks each rule on its
// own.
func (e *Engine) decideAlone(ctx context.Context, sc *scratch, it *item) error {
	if it.hits != 0 && !it.desc.IsNegativeHits {
		sc.own = it.appendChecks(sc.own[:0], it.hits)
		denied, err := e.allowAll(ctx, sc.own)
		if err != nil {
			return err
		}
		sc.settle(it, sc.own, denied)
		return nil
	}
	n := int64(0) // a peek
	if it.desc.IsNegativeHits {
		n = -it.hits
	}
	sc.own = it.appendChecks(sc.own[:0], n)
	for j := range sc.own {
		c := &sc.own[j]
		d, err := e.limiterFor(sc.own[j:j+1]).AllowN(ctx, c.Key, c.Rule, c.N)
		if err != nil {
			return e.storeError(ctx, err)
		}
		c.Decision = d
		it.over = it.over || (n == 0 && !d.Allowed)
	}
	sc.combine(it, sc.own)
	return nil
}

// allowAll takes every check or none (see Limiter.AllowAll) and returns the index of the
// check that denied, or len(checks) when every check admitted. Checks before it were taken
// and refunded, checks after it only peeked.
func (e *Engine) allowAll(ctx context.Context, checks []sluice.Check) (int, error) {
	if len(checks) == 0 {
		return 0, nil
	}
	if _, err := e.limiterFor(checks).AllowAll(ctx, checks); err != nil {
		return 0, e.storeError(ctx, err)
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
func (sc *scratch) settle(it *item, checks []sluice.Check, denied int) {
	for j := range checks {
		if overAt(checks, j, denied) {
			it.over = true
		}
	}
	sc.combine(it, checks)
	for j := range checks {
		if overAt(checks, j, denied) {
			d := &sc.rules[it.rulesAt+j]
			d.Allowed = false
			if d.RetryAfter == 0 { // peeked after the denial: the wait is at most until full
				d.RetryAfter = d.ResetAfter
			}
		}
	}
}

// overAt reports whether checks[j] of an all-or-nothing group is over its limit (see settle).
func overAt(checks []sluice.Check, j, denied int) bool {
	d := &checks[j].Decision
	return j == denied || (j > denied && (!d.Allowed || d.Remaining < checks[j].N))
}

// combine sets the item's decision from its checks' decisions, once it.over is known, and
// records each check's own decision in sc.rules.
func (sc *scratch) combine(it *item, checks []sluice.Check) {
	it.decision, it.binding = sluice.Combine(checks, !it.over)
	it.decided = true
	it.rulesAt, it.rules = len(sc.rules), len(checks)
	for j := range checks {
		sc.rules = append(sc.rules, checks[j].Decision)
	}
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

// storeError maps a store failure to an Error and counts it. Only the caller's own context
// ending is KindCanceled / KindDeadline; a store that timed out on its own deadline is
// unavailable like any other store failure (counted and logged).
func (e *Engine) storeError(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return &Error{Kind: KindCanceled, Msg: err.Error(), Err: err}
	case ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded):
		return &Error{Kind: KindDeadline, Msg: err.Error(), Err: err}
	case errors.Is(err, sluice.ErrInvalidRule), errors.Is(err, sluice.ErrInvalidKey), errors.Is(err, sluice.ErrInvalidN),
		errors.Is(err, sluice.ErrNoReservation):
		return &Error{Kind: KindInvalid, Msg: err.Error(), Err: err}
	}
	e.obs.StoreError(false)
	e.logStoreError(err)
	msg := err.Error()
	if !errors.Is(err, sluice.ErrStoreUnavailable) { // else the message says it already
		msg = sluice.ErrStoreUnavailable.Error() + ": " + msg
	}
	return &Error{Kind: KindUnavailable, Msg: msg, Err: err}
}

// StoreError is the Error of a store failure of a call the transport made itself (ctx is the
// call's), counted and logged as the engine's own.
func (e *Engine) StoreError(ctx context.Context, err error) error { return e.storeError(ctx, err) }

// fallbackError counts and logs a store failure that the fallback answered by its policy.
func (e *Engine) fallbackError(err error) {
	e.obs.StoreError(true)
	e.logStoreError(err, slog.String("answered_by", "fallback "+e.cfg.StoreConfig.Fallback))
}

// logStoreError logs at most one store error per second, so an outage does not flood logs.
func (e *Engine) logStoreError(err error, attrs ...slog.Attr) {
	e.storeLog.Log(context.Background(), e.log, e.clock.Now(), slog.LevelError, "store error",
		append([]slog.Attr{slog.Any("err", err)}, attrs...)...)
}

// respond fills ans from the decided items and counts the decisions. The overall code is
// envoyproxy/ratelimit's: OVER_LIMIT when a descriptor outside quota mode is over its limit,
// or when every quota-mode descriptor is; OK in global shadow mode.
func (e *Engine) respond(st *rules, dom *config.Domain, req *Request, sc *scratch, ans *Answer) {
	items := sc.items
	ans.Code, ans.Verdicts, ans.Tightest, ans.Rules = CodeOK, ans.Verdicts[:0], -1, st.cfg
	ans.rules = append(ans.rules[:0], sc.rules...) // the verdicts' Decisions, owned by ans
	quotas, quotasOver := 0, 0
	var now time.Time // read once, for blocks only: time.Now is 5% of a decision
	for i := range items {
		it := &items[i]
		ans.Verdicts = append(ans.Verdicts, Verdict{Code: CodeOK, Limit: it.limit})
		v := &ans.Verdicts[i]
		if it.limit != nil && it.limit.InFlight != nil && !it.overridden() {
			v.Key, v.Adaptive = it.key, st.limits[it.limit.Index].adaptive
		}
		if !it.limited() {
			switch {
			case it.limit != nil && it.limit.Unlimited:
				v.Remaining = math.MaxUint32
				sc.outcome = Outcome{Limit: it.limit, Domain: dom, Entries: it.desc.Entries, Key: it.key, Unlimited: true}
				e.limitObserver(st, it.limit).Decided(&sc.outcome)
			case dom != nil:
				e.domainObserver(st, req.Domain).NoRule()
			}
			continue
		}
		d := it.decision
		v.Limited, v.Over, v.Shadow, v.Quota, v.Block = true, it.over, it.shadow(), it.quota, it.block
		v.Binding, v.Decision, v.Never = it.binding, d, it.never()
		if it.binding < it.numRules() { // a configured block has no rule
			v.Rule = it.rule(it.binding)
		}
		if it.overridden() {
			v.Limit, v.Override = nil, it.desc.Limit
		}
		over := it.over && !it.shadow()
		if over {
			v.Code = CodeOverLimit
			if it.quota {
				quotasOver++
			} else {
				ans.Code = CodeOverLimit
			}
		}
		if it.quota {
			quotas++
		}
		if !it.over {
			v.Remaining = clampU32(d.Remaining)
		}
		period := v.Rule.Period
		if period <= 0 {
			period = it.period()
		}
		d.Allowed = !it.over // in shadow mode too: the reset is the limit's own
		wait := d.ResetIn(period)
		if it.block {
			if now.IsZero() {
				now = e.clock.Now()
			}
			p := it.period()
			wait = p - time.Duration(now.UnixNano()%int64(p))
		}
		v.Reset = (wait + time.Second - 1) / time.Second * time.Second // whole seconds, rounded up as the peer's
		e.count(st, dom, it, &sc.outcome)
		// The headers describe the descriptor closest to its limit; the last one over it wins.
		if t := ans.Tightest; t < 0 || (over && !it.quota) || v.Remaining < ans.Verdicts[t].Remaining {
			ans.Tightest = i
		}
	}
	for i := range items {
		if it := &items[i]; it.rules > 0 {
			ans.Verdicts[i].Decisions = ans.rules[it.rulesAt : it.rulesAt+it.rules : it.rulesAt+it.rules]
		}
	}
	if quotas > 0 && quotas == quotasOver {
		ans.Code = CodeOverLimit
	}
	if ans.Code == CodeOverLimit && e.globalShadow {
		ans.Code = CodeOK
		e.obs.GlobalShadow()
	}
}

// period is the period of the item's (first) limit.
func (it *item) period() time.Duration {
	if it.ovr {
		if it.override.Period > 0 {
			return it.override.Period
		}
		return it.desc.Limit.Unit.Duration()
	}
	return it.limit.Unit.Duration() * time.Duration(max(it.limit.UnitMultiplier, 1))
}

// count tells the Observer the decision (in o, the scratch's: no copy, no allocation), and
// the live view's sketch the key.
func (e *Engine) count(st *rules, dom *config.Domain, it *item, o *Outcome) {
	*o = Outcome{Limit: it.limit, Domain: dom, Entries: it.desc.Entries, Key: it.key, Hits: it.hits, Refund: it.desc.IsNegativeHits,
		Over: it.over, Shadow: it.shadow(), Block: it.block, Decision: it.decision}
	if it.overridden() {
		o.Limit = nil
		e.domainObserver(st, dom.Name).Override(o)
		return
	}
	info := &st.limits[it.limit.Index]
	if info.hot == nil { // a hot parameter's sketch counts it already
		e.tracker(info).Add(it.key, 1, it.over && !it.shadow())
	}
	e.limitObserver(st, it.limit).Decided(o)
}
