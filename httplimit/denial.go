package httplimit

import (
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
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

// ProblemDetails is an RFC 9457 problem details object with the draft's "violated-policies" member.
// Empty Detail and Instance are left out.
type ProblemDetails struct {
	Type             string   `json:"type"`
	Title            string   `json:"title"`
	Status           int      `json:"status"`
	Detail           string   `json:"detail,omitempty"`
	Instance         string   `json:"instance,omitempty"`
	ViolatedPolicies []string `json:"violated-policies"`
}

const (
	titleQuotaExceeded = "Request cannot be satisfied as assigned quota has been exceeded"
	detailRetry        = "The request exceeds the quota of the policies in violated-policies; retry after the seconds in Retry-After."
	detailNever        = "The request costs more than the whole quota of a policy in violated-policies: it will never be allowed."
)

// Header values every problem response shares. Header slices are never written into by
// net/http, and these have no spare capacity, so Header.Add copies them.
var (
	problemContentType = []string{"application/problem+json"}
	noSniff            = []string{"nosniff"}
)

// WriteDenial writes the default answer to a request that results deny: status 429 with
// Retry-After (the longest t among the denying policies, in whole seconds rounded up, at least
// 1: for a request whose cost exceeds a policy's whole capacity, until that policy's state is
// empty, at most its period, so that a client does not retry at once) and an
// application/problem+json body of type ProblemQuotaExceeded naming the violated policies,
// each spelled exactly as in the RateLimit headers (Result.Name), and saying when waiting will
// not help. Set the rate-limit headers first (SetHeaders): WriteDenial writes the status line.
func WriteDenial(w http.ResponseWriter, r *http.Request, results []Result) {
	var wait time.Duration
	never := false
	for _, res := range results {
		if res.Decision.Allowed {
			continue
		}
		never = never || res.Decision.RetryAfter < 0
		wait = max(wait, resetAfter(res))
	}
	head := denialHeads[0]
	if never {
		head = denialHeads[1]
	}
	w.Header()[headerRetryAfter] = retryValues.get(max(ceilSeconds(wait), 1))
	bp := bufPool.Get().(*[]byte)
	b := append(append((*bp)[:0], head...), violatedHead...)
	n := 0
	for _, res := range results {
		if !res.Decision.Allowed {
			if n > 0 {
				b = append(b, ',')
			}
			// A header name is a quoted string of printable ASCII with '"' and '\' escaped:
			// the same bytes are a JSON string of the same value.
			b = appendName(b, res.Name)
			n++
		}
	}
	writeBody(w, http.StatusTooManyRequests, append(b, problemEnd...))
	*bp = b
	bufPool.Put(bp)
}

// denialHeads are the JSON of WriteDenial's problems up to their violated policies: the one
// to retry, and the one that will never be allowed.
var denialHeads = [2][]byte{
	appendProblemHead(nil, &ProblemDetails{Type: ProblemQuotaExceeded, Title: titleQuotaExceeded, Status: http.StatusTooManyRequests, Detail: detailRetry}),
	appendProblemHead(nil, &ProblemDetails{Type: ProblemQuotaExceeded, Title: titleQuotaExceeded, Status: http.StatusTooManyRequests, Detail: detailNever}),
}

// retryValues holds the Retry-After value last written, shared by the denials that write the
// same one.
var retryValues intValues

// WriteProblem writes p as application/problem+json with p.Status as the status code.
func WriteProblem(w http.ResponseWriter, _ *http.Request, p *ProblemDetails) {
	writeProblem(w, p.Status, appendProblemHead(nil, p), p.ViolatedPolicies)
}

// writeProblem writes a problem response: head (see appendProblemHead), then violated.
func writeProblem(w http.ResponseWriter, status int, head []byte, violated []string) {
	bp := bufPool.Get().(*[]byte)
	b := appendProblemTail(append((*bp)[:0], head...), violated)
	writeBody(w, status, b)
	*bp = b
	bufPool.Put(bp)
}

// writeBody writes the status and b, a problem's JSON, with the problem's headers.
func writeBody(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h["Content-Type"] = problemContentType
	h["X-Content-Type-Options"] = noSniff
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// appendProblem appends p as JSON and a newline.
func appendProblem(b []byte, p *ProblemDetails) []byte {
	return appendProblemTail(appendProblemHead(b, p), p.ViolatedPolicies)
}

// appendProblemHead appends the JSON of p up to its violated policies.
func appendProblemHead(b []byte, p *ProblemDetails) []byte {
	b = append(b, `{"type":`...)
	b = appendJSONString(b, p.Type)
	b = append(b, `,"title":`...)
	b = appendJSONString(b, p.Title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(p.Status), 10)
	if p.Detail != "" {
		b = append(b, `,"detail":`...)
		b = appendJSONString(b, p.Detail)
	}
	if p.Instance != "" {
		b = append(b, `,"instance":`...)
		b = appendJSONString(b, p.Instance)
	}
	return b
}

// The JSON around the violated policies.
const (
	violatedHead = `,"violated-policies":[`
	problemEnd   = "]}\n"
)

// appendProblemTail appends the violated policies and closes the object.
func appendProblemTail(b []byte, violated []string) []byte {
	b = append(b, violatedHead...)
	for i, name := range violated {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, name)
	}
	return append(b, problemEnd...)
}

// appendJSONString appends s as a JSON string: '"', '\' and control characters escaped,
// invalid UTF-8 replaced by U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		case c < utf8.RuneSelf:
			b = append(b, c)
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		i++
	}
	return append(b, '"')
}

// policyName is the name a policy is shown under (appendName's rule, unquoted).
func policyName(name string) string {
	if name == "" {
		return "default"
	}
	return name
}
