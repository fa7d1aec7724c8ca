package quota

import (
	"context"
	"log/slog"
	"sort"
	"strconv"
	"strings"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// run reports every interval, and at once when poked, until Close.
func (c *Client) run() {
	defer close(c.done)
	defer c.closeStream()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.cfg.clock.After(c.cfg.interval):
		case <-c.wake:
		}
		_ = c.report() // a failed report leaves the stream to be re-opened next time
	}
}

// report sends every bucket's usage since its last report, opening the stream if needed.
func (c *Client) report() error {
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.stream == nil {
		st, err := rlqspb.NewRateLimitQuotaServiceClient(c.conn).StreamRateLimitQuotas(c.ctx)
		if err != nil {
			return errStream(err)
		}
		c.stream, c.sent = st, false
		c.answers.Store(c.reports.Load()) // a new stream: nothing in flight
		go c.receive(st)
	}
	now := c.cfg.clock.Now().UnixNano()
	c.mu.RLock()
	msg := &rlqspb.RateLimitQuotaUsageReports{BucketQuotaUsages: make([]*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage, 0, len(c.order))}
	var unassigned int64
	var first *bucket // the first bucket to cross UnassignedAfter in this report, for the log
	for _, b := range c.order {
		elapsed := max(now-b.reported, 0)
		b.reported = now
		if b.since == 0 {
			b.since = now
		}
		if b.asg.Load() == nil && now-b.since >= UnassignedAfter*int64(c.cfg.interval) {
			unassigned++
			if !b.told && first == nil {
				first, b.told = b, true
			}
		}
		msg.BucketQuotaUsages = append(msg.BucketQuotaUsages, &rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{
			BucketId: b.id, TimeElapsed: durationpb.New(durationOf(elapsed)),
			NumRequestsAllowed: b.allowed.Swap(0), NumRequestsDenied: b.denied.Swap(0)})
	}
	c.mu.RUnlock()
	c.unassigned.Store(unassigned)
	if first != nil {
		c.logUnassigned(first, unassigned)
	}
	if len(msg.BucketQuotaUsages) == 0 {
		return nil
	}
	if !c.sent {
		msg.Domain = c.domain
	}
	if err := c.stream.Send(msg); err != nil {
		c.stream = nil
		return errStream(err)
	}
	c.sent = true
	c.reports.Add(1)
	return nil
}

// UnassignedAfter is the number of report intervals (WithInterval) after its first report
// at which a bucket still without an assignment is counted by Unassigned and logged.
const UnassignedAfter = 3

// Unassigned returns the number of buckets that have had no assignment UnassignedAfter
// report intervals after their first report: no quota rule of the client's domain covers them on the
// server (or the server does not answer), so the request's own rule decides for them. Export it as
// a gauge: it should stay 0. Updated at each report.
func (c *Client) Unassigned() int {
	if c == nil {
		return 0
	}
	return int(c.unassigned.Load())
}

// logUnassigned says, at most once a second, that b is still unassigned. The bucket id's
// values may come from requests: only its keys are logged.
func (c *Client) logUnassigned(b *bucket, n int64) {
	keys := make([]string, 0, len(b.id.GetBucket()))
	for k := range b.id.GetBucket() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	c.unassignedLog.Log(context.Background(), c.cfg.logger, c.cfg.clock.Now(), slog.LevelWarn,
		"quota: a bucket has had no assignment "+strconv.Itoa(UnassignedAfter)+" report intervals after its first report: no quota rule of the domain covers it on the server (or the server does not answer); the request's own rule decides",
		slog.String("domain", c.domain), slog.Any("bucket_keys", keys), slog.Int64("unassigned_buckets", n))
}

func (c *Client) closeStream() {
	c.smu.Lock()
	defer c.smu.Unlock()
	if c.stream != nil {
		_ = c.stream.CloseSend()
		c.stream = nil
	}
}

// receive applies the server's actions until the stream ends.
func (c *Client) receive(st interface {
	Recv() (*rlqspb.RateLimitQuotaResponse, error)
}) {
	for {
		resp, err := st.Recv()
		if err != nil {
			c.smu.Lock()
			if c.stream == st {
				c.stream = nil // re-opened at the next report
			}
			c.smu.Unlock()
			return
		}
		for _, a := range resp.GetBucketAction() {
			c.apply(a)
		}
		c.answers.Add(1)
	}
}

// apply applies one bucket action.
func (c *Client) apply(act *rlqspb.RateLimitQuotaResponse_BucketAction) {
	canon := BucketKey(act.GetBucketId().GetBucket())
	c.mu.RLock()
	b := c.byID[canon]
	c.mu.RUnlock()
	if b == nil {
		return
	}
	if act.GetAbandonAction() != nil {
		c.mu.Lock()
		delete(c.buckets[b.class], b.key)
		delete(c.byID, canon)
		for i, o := range c.order {
			if o == b {
				c.order = append(c.order[:i], c.order[i+1:]...)
				break
			}
		}
		c.mu.Unlock()
		return
	}
	q := act.GetQuotaAssignmentAction()
	if q == nil {
		return
	}
	a, ok := fromStrategy(q.GetRateLimitStrategy())
	if !ok {
		return
	}
	now := c.cfg.clock.Now().UnixNano()
	if ttl := q.GetAssignmentTimeToLive(); ttl != nil {
		a.expires = now + int64(ttl.AsDuration()) // TTL 0: expired at once
	}
	old := b.asg.Load()
	if old != nil && (old.expires == 0 || now < old.expires) && proto.Equal(old.strategy, a.strategy) {
		a.rule = old.rule // same strategy: the TTL is extended, the assignment unchanged
	} else if old != nil {
		c.poke() // a replaced assignment is reported at once, as Envoy does
	}
	b.asg.Store(&a)
}

// BucketKey is a bucket id as one comparable string: its entries sorted by key, each key and
// value prefixed with its length, so that no two ids share a key. The quota server keys its
// state by it too.
func BucketKey(id map[string]string) string {
	keys := make([]string, 0, len(id))
	size := 0
	for k, v := range id {
		keys = append(keys, k)
		size += len(k) + len(v) + 8
	}
	sort.Strings(keys)
	var sb strings.Builder
	sb.Grow(size)
	for _, k := range keys {
		sb.WriteString(strconv.Itoa(len(k)))
		sb.WriteByte(':')
		sb.WriteString(k)
		sb.WriteString(strconv.Itoa(len(id[k])))
		sb.WriteByte(':')
		sb.WriteString(id[k])
	}
	return sb.String()
}
