package quota

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/logthrottle"
)

// bucket is one subscribed key (and class, WithCriticalityKey).
type bucket struct {
	key      string
	class    sluice.Criticality
	id       *rlqspb.BucketId
	allowed  atomic.Uint64
	denied   atomic.Uint64
	asg      atomic.Pointer[assignment]
	reported int64 // Unix ns of the last report (reporter goroutine only)
	since    int64 // Unix ns of the first report of the bucket (reporter goroutine only)
	told     bool  // logged as unassigned (reporter goroutine only)
}

// Client is a sluice.Store that spends the shares a quota server assigns it. Build it with
// New; it is safe for concurrent use. Close stops its reporting.
type Client struct {
	inner  sluice.Store
	conn   grpc.ClientConnInterface
	domain string
	cfg    settings

	mu      sync.RWMutex                   // guards buckets, byID and order
	buckets [numClasses]map[string]*bucket // by class (only Critical without WithCriticalityKey), then key
	byID    map[string]*bucket             // by canonical bucket id
	order   []*bucket

	wake   chan struct{} // a new bucket or a replaced assignment: report now
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	smu    sync.Mutex // guards stream
	stream grpc.BidiStreamingClient[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]
	sent   bool // the domain was sent on stream

	reports, answers atomic.Uint64 // sent and received messages, for tests
	unassigned       atomic.Int64  // buckets still unassigned after UnassignedAfter reports
	unassignedLog    logthrottle.Throttle
}

// New returns a Client deciding on inner under the assignments of the quota server at conn
// for domain, and starts reporting. It does not wait for the server: until a bucket's first
// assignment arrives, the NoAssignment behaviour applies.
func New(inner sluice.Store, conn grpc.ClientConnInterface, domain string, opts ...Option) (*Client, error) {
	if inner == nil {
		return nil, errors.New("quota: nil inner store")
	}
	if conn == nil {
		return nil, errors.New("quota: nil connection")
	}
	if domain == "" {
		return nil, errors.New("quota: empty domain")
	}
	cfg, err := newSettings(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{inner: inner, conn: conn, domain: domain, cfg: cfg,
		byID: make(map[string]*bucket), wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, done: make(chan struct{})}
	for i := range c.buckets {
		c.buckets[i] = make(map[string]*bucket)
	}
	go c.run()
	return c, nil
}

// Take decides req on the inner store under the key's assignment (see the package doc),
// and counts it for the next usage report. It allocates nothing once the key's bucket
// exists.
func (c *Client) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if c == nil { // the result of a failed New, used anyway
		return sluice.Decision{}, errNilClient
	}
	if err := req.ValidateArgs(c.cfg.maxKeyLen); err != nil {
		return sluice.Decision{}, err
	}
	b := c.bucket(req.Key, c.classOf(req.Criticality))
	rule, blanket := req.Rule, int8(limited)
	if b != nil {
		rule, blanket = c.ruleFor(b, req.Rule)
	}
	var d sluice.Decision
	switch blanket {
	case allowAll:
		d = sluice.Decision{Allowed: true, Capacity: req.Rule.Limit, Remaining: req.Rule.Limit}
	case denyAll:
		if err := req.Rule.Validate(); err != nil {
			return sluice.Decision{}, err
		}
		d = sluice.Decision{Capacity: req.Rule.Limit, RetryAfter: c.cfg.interval}
	default:
		r := req
		r.Rule = rule
		if r.Holdback > 0 && rule != req.Rule {
			r.Holdback = c.holdbackUnder(req, rule)
		}
		var err error
		if d, err = c.inner.Take(ctx, r); err != nil {
			return d, err
		}
	}
	if b != nil && req.N > 0 {
		if d.Allowed {
			b.allowed.Add(uint64(req.N))
		} else {
			b.denied.Add(uint64(req.N))
		}
	}
	return d, nil
}

// holdbackUnder returns the criticality holdback of req (Request.Holdback, a part of its own
// rule's capacity) under the assigned rule: none with WithCriticalityKey, where the class
// has a share of its own; otherwise the same part of the assigned capacity, since every
// class spends the key's one share.
func (c *Client) holdbackUnder(req sluice.Request, assigned sluice.Rule) int64 {
	own := req.Rule.Capacity()
	if c.cfg.criticalityKey != "" || own <= 0 {
		return 0
	}
	return int64(float64(req.Holdback) * float64(assigned.Capacity()) / float64(own))
}

// ruleFor returns the rule, or blanket, that decides for b now.
func (c *Client) ruleFor(b *bucket, own sluice.Rule) (sluice.Rule, int8) {
	a := b.asg.Load()
	behavior := c.cfg.noAssign
	if a != nil {
		if a.expires == 0 {
			return a.rule, a.blanket
		}
		now := c.cfg.clock.Now().UnixNano()
		if now < a.expires || (c.cfg.expired == ReuseLast && now < a.expires+int64(c.cfg.reuseFor)) {
			return a.rule, a.blanket
		}
		behavior = c.cfg.expired
	}
	switch behavior {
	case Deny:
		return own, denyAll
	case Allow:
		return own, allowAll
	}
	return own, limited
}

// numClasses is the number of criticality classes.
const numClasses = len(sluice.Shares{})

// classOf returns the class whose bucket decides a request of class rc: rc with
// WithCriticalityKey (Critical for an unknown class), else Critical.
func (c *Client) classOf(rc sluice.Criticality) sluice.Criticality {
	if c.cfg.criticalityKey == "" || int(rc) >= numClasses {
		return sluice.Critical
	}
	return rc
}

// bucket returns the bucket of key and class, subscribing it on first use; nil beyond
// MaxBuckets.
func (c *Client) bucket(key string, class sluice.Criticality) *bucket {
	c.mu.RLock()
	b := c.buckets[class][key]
	c.mu.RUnlock()
	if b != nil {
		return b
	}
	id := c.cfg.bucketID(key)
	if k := c.cfg.criticalityKey; k != "" {
		withClass := make(map[string]string, len(id)+1)
		for ik, v := range id {
			withClass[ik] = v
		}
		withClass[k] = class.String()
		id = withClass
	}
	canon := BucketKey(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if b = c.buckets[class][key]; b != nil {
		return b
	}
	if len(c.order) >= c.cfg.maxBuckets || c.byID[canon] != nil {
		return nil
	}
	b = &bucket{key: key, class: class, id: &rlqspb.BucketId{Bucket: id}, reported: c.cfg.clock.Now().UnixNano()}
	c.buckets[class][key], c.byID[canon] = b, b
	c.order = append(c.order, b)
	c.poke()
	return b
}

// poke asks the reporter for a report now.
func (c *Client) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Assignment describes a bucket's current assignment, for tests and diagnostics.
type Assignment struct {
	// Rule is the local rule enforcing the share; zero for a blanket.
	Rule sluice.Rule
	// Allow and Deny are set for blanket rules.
	Allow, Deny bool
	// Expires is when it expires; zero for never.
	Expires time.Time
}

// Assignment returns key's current assignment (expired or not), and false when it has none.
// With WithCriticalityKey it is the assignment of key's CRITICAL requests; see
// ClassAssignment.
func (c *Client) Assignment(key string) (Assignment, bool) {
	return c.ClassAssignment(key, sluice.Critical)
}

// ClassAssignment returns the current assignment of key's requests of class (expired or
// not), and false when there is none. Without WithCriticalityKey every class has key's one
// assignment.
func (c *Client) ClassAssignment(key string, class sluice.Criticality) (Assignment, bool) {
	if c == nil {
		return Assignment{}, false
	}
	class = c.classOf(class)
	c.mu.RLock()
	b := c.buckets[class][key]
	c.mu.RUnlock()
	if b == nil {
		return Assignment{}, false
	}
	a := b.asg.Load()
	if a == nil {
		return Assignment{}, false
	}
	out := Assignment{Rule: a.rule, Allow: a.blanket == allowAll, Deny: a.blanket == denyAll}
	if a.expires != 0 {
		out.Expires = time.Unix(0, a.expires)
	}
	return out, true
}

// Close stops reporting and closes the stream. The inner store is not closed.
func (c *Client) Close() error {
	if c == nil {
		return errNilClient
	}
	c.cancel()
	<-c.done
	return nil
}

// Flush sends a usage report of every bucket now (the reporter does it every interval); it
// returns the stream's error, if any.
func (c *Client) Flush() error {
	if c == nil {
		return errNilClient
	}
	return c.report()
}

// errNilClient is what a nil *Client answers (New returned an error, which was dropped).
var errNilClient = fmt.Errorf("quota: nil Client (New failed): %w", sluice.ErrNoStore)

func errStream(err error) error {
	return fmt.Errorf("quota: stream: %w: %w", sluice.ErrStoreUnavailable, err)
}
