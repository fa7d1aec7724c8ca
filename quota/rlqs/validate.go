package rlqs

import (
	"fmt"
	"math"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/quota"
)

// Limits of what one stream may send; Config's zero values take these.
const (
	DefaultMaxBuckets        = 1000
	DefaultMaxBucketEntries  = 16
	DefaultMaxBucketIDBytes  = 1024
	DefaultMaxStreams        = 10000
	DefaultAbandonAfter      = 5 * time.Minute
	MaxElapsed               = 24 * time.Hour
	MaxRequestsPerSecond     = 1e9
	maxRequestsWithoutElapse = 1e12
)

// usage is a validated BucketQuotaUsage.
type usage struct {
	id      *rlqspb.BucketId
	key     string // canonical bucket id
	count   float64
	elapsed time.Duration
}

// validate checks one message's usages, returning them with their canonical keys, or the
// status that ends the stream.
func (s *Service) validate(msg *rlqspb.RateLimitQuotaUsageReports) ([]usage, error) {
	us := msg.GetBucketQuotaUsages()
	if len(us) > s.maxBuckets {
		return nil, reject(ReasonBuckets, "bucket_quota_usages: %d buckets in one report, more than the maximum of %d", len(us), s.maxBuckets)
	}
	out := make([]usage, 0, len(us))
	seen := make(map[string]bool, len(us))
	for i, u := range us {
		f := fmt.Sprintf("bucket_quota_usages[%d]", i)
		key, err := s.bucketKey(u.GetBucketId(), f+".bucket_id")
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, reject(ReasonBucketID, "%s.bucket_id: bucket %s reported twice in one report", f, key)
		}
		seen[key] = true
		var elapsed time.Duration
		if te := u.GetTimeElapsed(); te != nil {
			if err := te.CheckValid(); err != nil {
				return nil, reject(ReasonElapsed, "%s.time_elapsed: %v", f, err)
			}
			elapsed = te.AsDuration()
		}
		if elapsed < 0 {
			return nil, reject(ReasonElapsed, "%s.time_elapsed: negative (%v)", f, elapsed)
		}
		if elapsed > MaxElapsed {
			return nil, reject(ReasonElapsed, "%s.time_elapsed: %v, more than the maximum of %v", f, elapsed, MaxElapsed)
		}
		a, d := u.GetNumRequestsAllowed(), u.GetNumRequestsDenied()
		count := float64(a) + float64(d)
		switch {
		case a > math.MaxInt64 || d > math.MaxInt64:
			return nil, reject(ReasonCounts, "%s: absurd counts (allowed %d, denied %d)", f, a, d)
		case elapsed > 0 && count/elapsed.Seconds() > MaxRequestsPerSecond:
			return nil, reject(ReasonCounts, "%s: absurd counts: %.0f requests in %v (more than %g per second)", f, count, elapsed, float64(MaxRequestsPerSecond))
		case elapsed == 0 && count > maxRequestsWithoutElapse:
			return nil, reject(ReasonCounts, "%s: absurd counts: %.0f requests without an elapsed time", f, count)
		}
		out = append(out, usage{id: u.GetBucketId(), key: key, count: count, elapsed: elapsed})
	}
	return out, nil
}

// bucketKey checks a bucket id and returns its canonical form (quota.BucketKey).
func (s *Service) bucketKey(id *rlqspb.BucketId, f string) (string, error) {
	b := id.GetBucket()
	if len(b) == 0 {
		return "", reject(ReasonBucketID, "%s: empty (a bucket id needs at least one entry)", f)
	}
	if len(b) > s.maxEntries {
		return "", reject(ReasonBucketID, "%s: %d entries, more than the maximum of %d", f, len(b), s.maxEntries)
	}
	size := 0
	for k, v := range b {
		size += len(k) + len(v)
		if size > s.maxIDBytes {
			return "", reject(ReasonBucketID, "%s: more than the maximum of %d bytes", f, s.maxIDBytes)
		}
		if k == "" {
			return "", reject(ReasonBucketID, "%s: empty key", f)
		}
		if err := config.CheckValue(k); err != nil {
			return "", reject(ReasonBucketID, "%s: key %q: %v", f, k, err)
		}
		if err := config.CheckValue(v); err != nil {
			return "", reject(ReasonBucketID, "%s.%s: %v", f, k, err)
		}
	}
	return quota.BucketKey(b), nil
}
