package rlqs

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/quota"
)

// stream is one client's RLQS stream.
type stream struct {
	svc    *Service
	srv    grpc.BidiStreamingServer[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]
	cancel context.CancelFunc
	id     string // the client id in the allocation state
	domain string // set by the first report

	mu      sync.Mutex // guards subs, drained and Send
	subs    map[string]*sub
	drained bool // Drain has expired every assignment: send nothing more
}

// sub is a bucket the stream subscribed to.
type sub struct {
	id        *rlqspb.BucketId
	rule      *config.QuotaRule // the rule that covered it at the last report; nil when none
	strategy  *typev3.RateLimitStrategy
	idleSince int64 // when the bucket started reporting no requests; 0 while it has some
	last      held  // for Stats, guarded by the stream's mu
	// stateKey and client name the sub's client record in the allocation state, as of the
	// last report (see stream.target).
	stateKey, client string
}

func (st *stream) run(ctx context.Context) error {
	type received struct {
		msg *rlqspb.RateLimitQuotaUsageReports
		err error
	}
	// Recv blocks until the client sends or the stream ends; Drain ends the stream by
	// cancelling ctx, so Recv runs in its own goroutine (it returns once the handler has).
	in := make(chan received)
	go func() {
		for {
			msg, err := st.srv.Recv()
			select {
			case in <- received{msg, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for {
		var r received
		select {
		case <-ctx.Done():
			if err := st.srv.Context().Err(); err != nil {
				return status.FromContextError(err).Err() // the client went away
			}
			return status.Error(codes.Unavailable, "rlqs: server shutting down")
		case r = <-in:
		}
		if errors.Is(r.err, io.EOF) {
			return nil // the client closed its side
		}
		if r.err != nil {
			return r.err
		}
		resp, err := st.handle(ctx, r.msg)
		if err != nil {
			return err
		}
		if len(resp.BucketAction) > 0 {
			if err := st.send(resp); err != nil {
				return err
			}
		}
	}
}

func (st *stream) send(resp *rlqspb.RateLimitQuotaResponse) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.drained {
		return nil
	}
	if err := st.srv.Send(resp); err != nil {
		return err
	}
	st.svc.sent(resp)
	return nil
}

// handle answers one report message, or returns the status that ends the stream.
func (st *stream) handle(ctx context.Context, msg *rlqspb.RateLimitQuotaUsageReports) (*rlqspb.RateLimitQuotaResponse, error) {
	start := time.Now()
	switch d := msg.GetDomain(); {
	case st.domain == "" && d == "":
		return nil, reject(ReasonDomain, "domain: the first report of a stream must name the domain")
	case st.domain == "":
		if err := config.CheckKey(d); err != nil || len(d) > st.svc.maxIDBytes {
			return nil, reject(ReasonDomain, "domain: %q is not a valid domain", d)
		}
		st.domain = d
	case d != "" && d != st.domain:
		return nil, reject(ReasonDomain, "domain: %q on a stream of domain %q (open a new stream to change domains)", d, st.domain)
	}
	usages, err := st.svc.validate(msg)
	if err != nil {
		return nil, err
	}
	st.mu.Lock()
	n := len(st.subs)
	for _, u := range usages {
		if st.subs[u.key] == nil {
			n++
		}
	}
	st.mu.Unlock()
	if n > st.svc.maxBuckets {
		return nil, reject(ReasonBuckets, "bucket_quota_usages: this stream would subscribe to %d buckets, more than the maximum of %d", n, st.svc.maxBuckets)
	}
	dom := st.svc.rules().Domain(st.domain)
	now := st.svc.clock.Now().UnixNano()
	resp := &rlqspb.RateLimitQuotaResponse{}
	for _, u := range usages {
		if a := st.report(ctx, dom, u, now); a != nil {
			resp.BucketAction = append(resp.BucketAction, a)
		}
	}
	name := ""
	if dom != nil {
		name = st.domain
	}
	st.svc.obs.Reported(name, len(usages), time.Since(start))
	return resp, nil
}

// report records one bucket's usage and returns the action to send for it, if any.
func (st *stream) report(ctx context.Context, dom *config.Domain, u usage, now int64) *rlqspb.RateLimitQuotaResponse_BucketAction {
	st.mu.Lock()
	sb := st.subs[u.key]
	if sb == nil {
		sb = &sub{id: u.id}
		st.subs[u.key] = sb
	}
	st.mu.Unlock()
	rule := dom.Quota(u.id.GetBucket())
	if rule == nil {
		// Not (or no longer) covered by a rule: nothing to assign.
		if sb.rule != nil {
			st.leave(ctx, sb, now)
			st.unsubscribe(u.key)
			return abandon(u.id)
		}
		st.svc.uncovered(dom != nil, st.domain, u.id.GetBucket())
		return nil
	}
	key, client, class := st.target(rule, u)
	if sb.rule != nil && (sb.stateKey != key || sb.client != client) {
		st.leave(ctx, sb, now) // a reload changed the rule's criticality key
	}
	sb.rule, sb.stateKey, sb.client = rule, key, client
	if u.count > 0 {
		sb.idleSince = 0
	} else if sb.idleSince == 0 {
		sb.idleSince = now
	} else if now-sb.idleSince >= int64(st.abandonAfter(rule)) {
		st.leave(ctx, sb, now)
		st.unsubscribe(u.key)
		return abandon(u.id)
	}
	ttl := rule.Share.EffectiveTTL()
	var strategy *typev3.RateLimitStrategy
	share := int64(-1) // a blanket rule hands out no share
	if rule.Strategy == config.QuotaAllowAll || rule.Strategy == config.QuotaDenyAll {
		strategy = Strategy(rule, 0)
	} else {
		a, err := st.svc.ledger.Report(ctx, key, &rule.Share, client, class, now, u.count, u.elapsed)
		if err != nil {
			st.svc.logStateError(err)
			return nil // the client keeps its assignment until it expires
		}
		strategy, share = Strategy(rule, a.Share), a.Share
	}
	st.mu.Lock()
	sb.strategy = strategy // kept for Drain's expiries
	sb.last.note(rule, share, now+int64(ttl), u)
	st.mu.Unlock()
	return assign(u.id, strategy, ttl)
}

func (st *stream) abandonAfter(r *config.QuotaRule) int64 {
	if r.AbandonAfter > 0 {
		return int64(r.AbandonAfter)
	}
	return int64(st.svc.abandonAfter)
}

// target returns where a usage of the bucket goes in the allocation state under rule: the
// bucket's key (the domain and the bucket id, without the rule's criticality entry, so
// every class shares the bucket's limit), the client's id (the stream's, plus the
// criticality entry's value when there is one, so each bucket id the client sent is its own
// client record) and the demand's class.
func (st *stream) target(rule *config.QuotaRule, u usage) (key, client string, class sluice.Criticality) {
	bucket := u.id.GetBucket()
	v, found := bucket[rule.CriticalityKey]
	if rule.CriticalityKey == "" || !found {
		return st.domain + "\x00" + u.key, st.id, sluice.Critical
	}
	class, ok := rule.Class(bucket)
	if !ok {
		st.svc.unknownClass.Do(func() {
			st.svc.log.Warn("rlqs: unknown criticality class in a bucket id, served as CRITICAL (logged once)",
				"domain", st.domain, "key", rule.CriticalityKey, "value", v)
		})
	}
	rest := make(map[string]string, len(bucket)-1)
	for k, val := range bucket {
		if k != rule.CriticalityKey {
			rest[k] = val
		}
	}
	return st.domain + "\x00" + quota.BucketKey(rest), st.id + "\x00" + v, class
}

func (st *stream) leave(ctx context.Context, sb *sub, now int64) {
	if sb.rule == nil || sb.rule.Strategy == config.QuotaAllowAll || sb.rule.Strategy == config.QuotaDenyAll {
		return
	}
	if err := st.svc.ledger.Leave(ctx, sb.stateKey, &sb.rule.Share, sb.client, now); err != nil {
		st.svc.logStateError(err)
	}
}

func (st *stream) unsubscribe(key string) {
	st.mu.Lock()
	delete(st.subs, key)
	st.mu.Unlock()
}

// leaveAll tells the state the stream's client has gone from every bucket.
func (st *stream) leaveAll() {
	now := st.svc.clock.Now().UnixNano()
	st.mu.Lock()
	subs := make([]*sub, 0, len(st.subs))
	for _, sb := range st.subs {
		subs = append(subs, sb)
	}
	st.mu.Unlock()
	for _, sb := range subs {
		st.leave(context.Background(), sb, now)
	}
}

// expireAll sends every assigned bucket its strategy with TTL 0.
func (st *stream) expireAll() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.drained = true
	resp := &rlqspb.RateLimitQuotaResponse{}
	for _, sb := range st.subs {
		if sb.strategy != nil {
			resp.BucketAction = append(resp.BucketAction, assign(sb.id, sb.strategy, 0))
		}
	}
	if len(resp.BucketAction) > 0 && st.srv.Send(resp) == nil { // the stream may already be gone
		st.svc.sent(resp)
	}
}
