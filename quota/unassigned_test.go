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
// on its own rule, as before, but quota.UnassignedAfter report intervals after its first report the client counts
// it (Unassigned) and logs it once, with the bucket id's keys and never its values; a
// covered key is not counted.
func TestUnassignedBucketIsTold(t *testing.T) {
	e := newEnv(t)
	var logs testenv.LogBuffer
	c := e.client(t, quota.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), quota.WithInterval(time.Second))
	own := sluice.TokenBucket(5, time.Second, 5)
	take(t, c, "api", own, 1)              // covered by "api*"
	take(t, c, "tenant-secret-42", own, 1) // no rule
	flush(t, c, "api")                     // the first report of both (a new bucket is also reported at once)
	e.clock.Advance(quota.UnassignedAfter*time.Second - time.Millisecond)
	flush(t, c, "api")
	if n := c.Unassigned(); n != 0 {
		t.Errorf("a second before %d intervals: %d unassigned, want 0", quota.UnassignedAfter, n)
	}
	e.clock.Advance(time.Millisecond)
	flush(t, c, "api")
	if n := c.Unassigned(); n != 1 {
		t.Errorf("after %d intervals: %d unassigned, want 1", quota.UnassignedAfter, n)
	}
	if _, ok := c.Assignment("api"); !ok {
		t.Errorf("the covered key has no assignment")
	}
	const said = "no assignment 3 report intervals after its first report"
	line := logs.String()
	if strings.Count(line, said) != 1 || !strings.Contains(line, "domain=go") || !strings.Contains(line, "bucket_keys=[name]") {
		t.Errorf("log: %q", line)
	}
	if strings.Contains(line, "tenant-secret-42") {
		t.Errorf("the bucket id's value reached the log: %q", line)
	}
	e.clock.Advance(time.Second)
	flush(t, c, "api")
	if strings.Count(logs.String(), said) != 1 || c.Unassigned() != 1 {
		t.Errorf("a bucket is logged once; logs %q, unassigned %d", logs.String(), c.Unassigned())
	}
}
