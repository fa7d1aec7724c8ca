package quota_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testenv"
	"github.com/sluicehq/sluice/quota"
)

// TestUnassignedBucketIsTold: a key whose bucket no quota rule of the domain covers decides
// on its fallback rule, as before, but after quota.UnassignedAfter reports the client counts
// it (Unassigned) and logs it once, with the bucket id's keys and never its values; a
// covered key is not counted.
func TestUnassignedBucketIsTold(t *testing.T) {
	e := newEnv(t)
	var logs testenv.LogBuffer
	c := e.client(t, quota.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	own := sluice.TokenBucket(5, time.Second, 5)
	take(t, c, "api", own, 1)              // covered by "api*"
	take(t, c, "tenant-secret-42", own, 1) // no rule
	for range quota.UnassignedAfter {      // a new bucket is also reported at once
		flush(t, c, "api")
		e.clock.Advance(time.Second)
	}
	if n := c.Unassigned(); n != 1 {
		t.Errorf("after %d reports: %d unassigned, want 1", quota.UnassignedAfter, n)
	}
	if _, ok := c.Assignment("api"); !ok {
		t.Errorf("the covered key has no assignment")
	}
	line := logs.String()
	if strings.Count(line, "no assignment after") != 1 || !strings.Contains(line, "domain=go") || !strings.Contains(line, "bucket_keys=[name]") {
		t.Errorf("log: %q", line)
	}
	if strings.Contains(line, "tenant-secret-42") {
		t.Errorf("the bucket id's value reached the log: %q", line)
	}
	flush(t, c, "api")
	if strings.Count(logs.String(), "no assignment after") != 1 || c.Unassigned() != 1 {
		t.Errorf("a bucket is logged once; logs %q, unassigned %d", logs.String(), c.Unassigned())
	}
}
