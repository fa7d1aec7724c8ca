package httplimit

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Problem types of draft-ietf-httpapi-ratelimit-headers-11, section 4.
const (
	// ProblemQuotaExceeded is the type of the 429 body: the request exceeds one or more
	// quota policies.
	ProblemQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	// ProblemTemporaryReducedCapacity is the type of the 503 body when the store cannot decide
	// and the policy is to fail closed.
	ProblemTemporaryReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
)

// Problem is an RFC 9457 problem details object with the draft's "violated-policies" member.
type Problem struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail,omitempty"`
	Instance         string   `json:"instance,omitempty"`
	ViolatedPolicies []string `json:"violated-policies"`
}

// WriteDenial writes the default answer to a request that results deny: status 429 with
// Retry-After (the longest wait among the denying policies, in whole seconds rounded up; absent
// when a request's cost exceeds a policy's whole capacity, since waiting will not help) and an
// application/problem+json body of type ProblemQuotaExceeded naming the violated policies.
// Set the rate-limit headers first (SetHeaders): WriteDenial writes the status line.
func WriteDenial(w http.ResponseWriter, r *http.Request, results []Result) {
	p := Problem{Type: ProblemQuotaExceeded, Title: "Request cannot be satisfied as assigned quota has been exceeded",
		Status: http.StatusTooManyRequests, ViolatedPolicies: []string{}}
	var wait time.Duration
	never := false
	for _, res := range results {
		if res.Decision.Allowed {
			continue
		}
		p.ViolatedPolicies = append(p.ViolatedPolicies, policyName(res.Name))
		if res.Decision.RetryAfter < 0 {
			never = true
		}
		wait = max(wait, res.Decision.RetryAfter)
	}
	switch {
	case never:
		p.Detail = "The request costs more than the whole quota of " + strings.Join(p.ViolatedPolicies, ", ") + "; it will never be allowed."
	default:
		secs := max(ceilSeconds(wait), 1)
		w.Header()[headerRetryAfter] = []string{strconv.FormatInt(secs, 10)}
		p.Detail = "Quota exceeded for " + strings.Join(p.ViolatedPolicies, ", ") + "; retry after " + strconv.FormatInt(secs, 10) + " s."
	}
	WriteProblem(w, r, p)
}

// WriteProblem writes p as application/problem+json with p.Status as the status code.
func WriteProblem(w http.ResponseWriter, _ *http.Request, p Problem) {
	body, err := json.Marshal(p)
	if err != nil { // cannot happen: Problem holds only strings and an int
		body = []byte(`{"type":"about:blank","status":` + strconv.Itoa(p.Status) + `}`)
	}
	h := w.Header()
	h["Content-Type"] = []string{"application/problem+json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body) + 1)}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// policyName is the name a policy is shown under (appendName's rule, unquoted).
func policyName(name string) string {
	if name == "" {
		return "default"
	}
	return name
}
