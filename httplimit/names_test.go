package httplimit

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestViolatedNameAsInHeader: the 429 names a violated policy exactly as the RateLimit
// headers do, whatever its characters (issue 23 item 3: a non-ASCII name differed).
func TestViolatedNameAsInHeader(t *testing.T) {
	for _, name := range []string{"café", `q"uo\te`, "tab\there", "", "日本", "plain"} {
		results := []Result{
			{Name: "ok", Rule: sluice.Rule{Limit: 5, Period: time.Minute}, Decision: sluice.Decision{Allowed: true, Capacity: 5, Remaining: 3}},
			{Name: name, Rule: sluice.Rule{Limit: 5, Period: time.Minute}, Decision: sluice.Decision{Capacity: 5, RetryAfter: time.Second}},
		}
		rec := httptest.NewRecorder()
		SetHeaders(rec.Header(), HeadersIETF, results)
		WriteDenial(rec, httptest.NewRequest(http.MethodGet, "/", nil), results)
		var p ProblemDetails
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
			t.Fatalf("%q: %v in %s", name, err, rec.Body)
		}
		policy := rec.Header().Get("RateLimit-Policy")
		_, item, _ := strings.Cut(policy, ", ")
		quoted, _, _ := strings.Cut(item, ";")
		inHeader, err := strconv.Unquote(quoted) // the escapes of a structured-field String are Go's too
		if err != nil || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != inHeader {
			t.Errorf("%q: header item %s (%v), violated %q", name, item, err, p.ViolatedPolicies)
		}
	}
}
