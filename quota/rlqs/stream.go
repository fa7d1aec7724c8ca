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
	"github.com/sluicehq/sluice/quota/alloc"
)

// stream is one client's RLQS stream.
type stream struct {
	svc    *Service
	srv    grpc.BidiStreamingServer[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]
	cancel context.CancelFunc
	id     string // the client id in the allocation state
	domain string // set by the first report
	peer   string // the client key of the per-client stream cap
	wake   chan struct{}

	mu    sync.Mutex // guards subs, dirty and the subs' last and dirty
	subs  map[string]*sub
	dirty []*sub // subs pushed a new assignment not yet sent

	sendMu  sync.Mutex // guards drained and Send
	drained bool       // Drain has expired every assignment: send nothing more
}

// newStream returns a stream of svc with client id id.
func newStream(svc *Service, id string) *stream {
	return &stream{svc: svc, id: id, subs: make(map[string]*sub), wake: make(chan struct{}, 1)}
}

// sub is a bucket the stream subscribed to.
type sub struct {
	st        *stream
	id        *idEntry          // the bucket id, interned (id.pb)
	key       string            // the canonical bucket id, a part of id.key
	rule      *config.QuotaRule // the rule that covered it at the last report; nil when none
	strategy  *typev3.RateLimitStrategy
	idleSince int64 // when the bucket started reporting no requests; 0 while it has some
	last      held  // the current assignment (and for Stats), guarded by the stream's mu
	dirty     bool  // last changed by a push and is not sent yet
	// newest is the Expires of the newest assignment the ledger made (they increase per
	// client): an older one arriving late is dropped. pending says last supersedes a larger
	// share, to confirm once sent (Ledger.Delivered); waits that the answer to the last
	// report is short of the share while shrinks that free the rest are in flight. All
	// guarded by the stream's mu.
	newest         int64
	pending, waits bool
	// stateKey and client name the sub's client record in the allocation state, as of the
	// last report (see stream.target); classKey holds stateKey interned when it is not id's.
	stateKey, client string
	classKey         *idEntry
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
	idle := time.NewTimer(st.svc.idleTimeout)
	defer idle.Stop()
	for {
		var r received
		select {
		case <-ctx.Done():
			if err := st.srv.Context().Err(); err != nil {
				return status.FromContextError(err).Err() // the client went away
			}
			return status.Error(codes.Unavailable, "rlqs: server shutting down")
		case <-idle.C:
			return reject(ReasonIdle, "no report for %v: stream closed", st.svc.idleTimeout)
		case <-st.wake:
			if err := st.flush(); err != nil {
				return err
			}
			continue
		case r = <-in:
		}
		if errors.Is(r.err, io.EOF) {
			return nil // the client closed its side
		}
		if r.err != nil {
			return r.err
		}
		idle.Reset(st.svc.idleTimeout)
		var rep *reply
		var err error
		if st.svc.tracer != nil {
			rep, err = st.handleTraced(ctx, r.msg)
		} else {
			rep, err = st.handle(ctx, r.msg)
		}
		if err != nil {
			return err
		}
		if err := st.answer(ctx, rep); err != nil {
			return err
		}
	}
}

// confirmation is an assignment sent that supersedes a larger share: once it is sent, the
// ledger is told (Service.confirm).
type confirmation struct {
	sb   *sub
	rule *config.QuotaRule
	a    alloc.Assignment
}

// reply is the answer to one report message: the buckets abandoned, and those answered
// with their assignment, built when the answer is sent.
type reply struct {
	abandons []*rlqspb.RateLimitQuotaResponse_BucketAction
	subs     []*sub
}

// actions is the number of actions of the reply.
func (r *reply) actions() int { return len(r.abandons) + len(r.subs) }

// answer waits, at most the service's answer wait, until the buckets of rep that are short
// of their share while the shrinks that free it are in flight have got it (a newcomer is
// handed its share once it is free, not before), sends rep with the assignments as they
// are then, and then what was pushed meanwhile to the other buckets.
func (st *stream) answer(ctx context.Context, rep *reply) error {
	if st.waiting(rep) {
		t := time.NewTimer(st.svc.answerWait)
	wait:
		for st.waiting(rep) {
			select {
			case <-st.wake:
			case <-t.C:
				break wait
			case <-ctx.Done():
				t.Stop()
				return nil // run reports why
			}
		}
		t.Stop()
	}
	resp := &rlqspb.RateLimitQuotaResponse{BucketAction: rep.abandons}
	var confirms []confirmation
	st.mu.Lock()
	for _, sb := range rep.subs {
		if sb.rule != nil {
			var a *rlqspb.RateLimitQuotaResponse_BucketAction
			a, confirms = st.action(sb, confirms)
			resp.BucketAction = append(resp.BucketAction, a)
		}
	}
	st.mu.Unlock()
	if err := st.send(resp, false); err != nil {
		return err
	}
	st.confirm(confirms)
	return st.flush()
}

// waiting reports whether a bucket of rep waits for its share (sub.waits).
func (st *stream) waiting(rep *reply) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, sb := range rep.subs {
		if sb.waits {
			return true
		}
	}
	return false
}

// confirm tells the ledger of the assignments sent that supersede larger shares.
func (st *stream) confirm(confirms []confirmation) {
	for _, c := range confirms {
		st.svc.confirm(c.sb, c.rule, c.a)
	}
}

// send sends resp (when it has actions) unless the stream is drained; push says its
// actions are pushes.
func (st *stream) send(resp *rlqspb.RateLimitQuotaResponse, push bool) error {
	if len(resp.BucketAction) == 0 {
		return nil
	}
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	if st.drained {
		return nil
	}
	if err := st.srv.Send(resp); err != nil {
		return err
	}
	st.svc.sent(resp, push)
	return nil
}

// pushed records h, an assignment the ledger made to sb (at its report, or another
// client's), for the stream to send at once unless it answers a report. It never blocks on
// the network (the ledger holds the bucket meanwhile).
func (st *stream) pushed(sb *sub, h Handed) {
	st.mu.Lock()
	if h.Expires < sb.newest { // delivered late (another replica's): a newer one is in force
		st.mu.Unlock()
		return
	}
	sb.newest = h.Expires
	sb.last.share, sb.last.expires = h.Share, h.Expires
	sb.pending, sb.waits = h.Pending, h.Waits
	if !sb.dirty {
		sb.dirty = true
		st.dirty = append(st.dirty, sb)
	}
	st.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// flush sends the pushed assignments not sent yet, and confirms those that supersede
// larger shares.
func (st *stream) flush() error {
	resp := &rlqspb.RateLimitQuotaResponse{}
	var confirms []confirmation
	st.mu.Lock()
	for _, sb := range st.dirty {
		if sb.dirty && st.subs[sb.key] == sb && sb.rule != nil {
			var a *rlqspb.RateLimitQuotaResponse_BucketAction
			a, confirms = st.action(sb, confirms)
			resp.BucketAction = append(resp.BucketAction, a)
		}
	}
	st.dirty = st.dirty[:0]
	st.mu.Unlock()
	if err := st.send(resp, true); err != nil {
		return err
	}
	st.confirm(confirms)
	return nil
}

// action returns sb's current assignment as an action, and marks it sent; when it
// supersedes a larger share it is appended to confirms. st.mu is held.
func (st *stream) action(sb *sub, confirms []confirmation) (*rlqspb.RateLimitQuotaResponse_BucketAction, []confirmation) {
	sb.dirty = false
	if sb.pending {
		sb.pending = false
		confirms = append(confirms, confirmation{sb, sb.rule, alloc.Assignment{Share: sb.last.share, Expires: sb.last.expires}})
	}
	sb.strategy = Strategy(sb.rule, sb.last.share)
	return assign(sb.id.pb, sb.strategy, sb.rule.Share.EffectiveTTL()), confirms
}

// handle records one report message and returns its reply, or the status that ends the
// stream.
func (st *stream) handle(ctx context.Context, msg *rlqspb.RateLimitQuotaUsageReports) (*reply, error) {
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
	rep := &reply{subs: make([]*sub, 0, len(usages))}
	for _, u := range usages {
		sb, abandoned, err := st.report(ctx, dom, u, now)
		switch {
		case err != nil:
			return nil, err
		case abandoned:
			rep.abandons = append(rep.abandons, abandon(u.id))
		case sb != nil:
			rep.subs = append(rep.subs, sb)
		}
	}
	name := ""
	if dom != nil {
		name = st.domain
	}
	st.svc.obs.Reported(name, len(usages), time.Since(start))
	return rep, nil
}

// subscribe returns the stream's sub of u's bucket, made (its id interned) when new, or the
// status that ends the stream when the bucket ids' memory budget is spent.
func (st *stream) subscribe(u usage) (*sub, error) {
	st.mu.Lock()
	sb := st.subs[u.key]
	st.mu.Unlock()
	if sb != nil {
		return sb, nil
	}
	e, ok := st.svc.ids.acquire(st.domain+"\x00"+u.key, u.id, subCost)
	if !ok {
		return nil, reject(ReasonMemory, "bucket_quota_usages: the server's memory for bucket ids (%d bytes) is spent", st.svc.ids.budget)
	}
	sb = &sub{st: st, id: e, key: e.key[len(st.domain)+1:]}
	st.mu.Lock()
	st.subs[sb.key] = sb
	st.mu.Unlock()
	return sb, nil
}

// report records one bucket's usage and returns the sub to answer with its assignment, or
// abandoned when the bucket is to be abandoned, or neither (no answer for the bucket).
func (st *stream) report(ctx context.Context, dom *config.Domain, u usage, now int64) (answer *sub, abandoned bool, err error) {
	sb, err := st.subscribe(u)
	if err != nil {
		return nil, false, err
	}
	rule := dom.Quota(u.id.GetBucket())
	if rule == nil {
		// Not (or no longer) covered by a rule: nothing to assign.
		if sb.rule != nil {
			st.leave(ctx, sb, now)
			st.unsubscribe(sb)
			return nil, true, nil
		}
		st.svc.uncovered(dom != nil, st.domain, u.id.GetBucket())
		return nil, false, nil
	}
	key, client, class := st.target(rule, u)
	if sb.rule != nil && (sb.stateKey != key || sb.client != client) {
		st.leave(ctx, sb, now) // a reload changed the rule's criticality key
		st.svc.unregister(sb)
		sb.rule = nil
	}
	if sb.rule == nil {
		if key != sb.id.key {
			e, ok := st.svc.ids.acquire(key, nil, 0)
			if !ok {
				return nil, false, reject(ReasonMemory, "bucket_quota_usages: the server's memory for bucket ids (%d bytes) is spent", st.svc.ids.budget)
			}
			st.svc.ids.release(sb.classKey, 0)
			sb.classKey, key = e, e.key
		} else {
			st.svc.ids.release(sb.classKey, 0)
			sb.classKey, key = nil, sb.id.key
		}
		sb.stateKey, sb.client = key, client
		st.svc.register(sb)
	}
	st.mu.Lock()
	sb.rule, sb.last.rule = rule, rule
	if u.elapsed > 0 {
		sb.last.demand = u.count / u.elapsed.Seconds()
	}
	st.mu.Unlock()
	if u.count > 0 {
		sb.idleSince = 0
	} else if sb.idleSince == 0 {
		sb.idleSince = now
	} else if now-sb.idleSince >= int64(st.abandonAfter(rule)) {
		st.leave(ctx, sb, now)
		st.unsubscribe(sb)
		return nil, true, nil
	}
	if rule.Strategy == config.QuotaAllowAll || rule.Strategy == config.QuotaDenyAll {
		st.mu.Lock()
		sb.last.share, sb.last.expires = -1, now+int64(rule.Share.EffectiveTTL()) // a blanket rule hands out no share
		st.mu.Unlock()
		return sb, false, nil
	}
	if _, err := st.svc.ledger.Report(ctx, sb.stateKey, &rule.Share, sb.client, class, now, u.count, u.elapsed, st.svc.notify(sb.stateKey)); err != nil {
		st.svc.stateError(ctx, err)
		return nil, false, nil // the client keeps its assignment until it expires
	}
	return sb, false, nil
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

// leave tells the ledger sb's client has gone from its bucket. Its share counts until it
// expires (unless the rule releases it at once): the bucket is recomputed then.
func (st *stream) leave(ctx context.Context, sb *sub, now int64) {
	rule := sb.rule
	if rule == nil || rule.Strategy == config.QuotaAllowAll || rule.Strategy == config.QuotaDenyAll {
		return
	}
	next, err := st.svc.ledger.Leave(ctx, sb.stateKey, &rule.Share, sb.client, now, st.svc.notify(sb.stateKey))
	if err != nil {
		st.svc.stateError(ctx, err)
		return
	}
	st.svc.rebalanceAt(sb.stateKey, rule, next)
}

// unsubscribe forgets sb, and gives back its memory.
func (st *stream) unsubscribe(sb *sub) {
	st.svc.unregister(sb)
	st.mu.Lock()
	delete(st.subs, sb.key)
	st.mu.Unlock()
	st.svc.ids.release(sb.classKey, 0)
	st.svc.ids.release(sb.id, subCost)
}

// leaveAll tells the state the stream's client has gone from every bucket, and forgets
// them.
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
		st.unsubscribe(sb)
	}
}

// expireAll sends every assigned bucket its strategy with TTL 0.
func (st *stream) expireAll() {
	resp := &rlqspb.RateLimitQuotaResponse{}
	st.mu.Lock()
	for _, sb := range st.subs {
		if sb.strategy != nil {
			resp.BucketAction = append(resp.BucketAction, assign(sb.id.pb, sb.strategy, 0))
		}
	}
	st.mu.Unlock()
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	st.drained = true
	if len(resp.BucketAction) > 0 && st.srv.Send(resp) == nil { // the stream may already be gone
		st.svc.sent(resp, false)
	}
}
