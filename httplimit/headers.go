package httplimit

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// Result is the outcome of one rate-limit policy for a request: the policy's name (as shown in
// the RateLimit headers and the 429 body), its rule and the decision.
type Result struct {
	// Name identifies the policy to clients. Characters outside printable ASCII are replaced
	// by "_"; an empty name is shown as "default".
	Name     string
	Rule     sluice.Rule
	Decision sluice.Decision
}

// HeaderStyle selects the rate-limit response headers. The zero value is HeadersBoth.
type HeaderStyle uint8

const (
	// HeadersBoth writes the IETF fields and the X-RateLimit-* fields.
	HeadersBoth HeaderStyle = iota
	// HeadersIETF writes RateLimit-Policy and RateLimit, as in
	// draft-ietf-httpapi-ratelimit-headers-11: one item per policy,
	// `"name";q=<quota>;w=<window seconds>` and `"name";r=<remaining>;t=<seconds>`.
	HeadersIETF
	// HeadersX writes the widely deployed X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (Unix time in seconds) of the most constraining policy: the one with
	// the least remaining.
	HeadersX
	// HeadersNone writes no rate-limit header (Retry-After is still sent with a 429).
	HeadersNone
)

// Canonical header keys, so the map is indexed without canonicalising on every request.
const (
	headerPolicy     = "Ratelimit-Policy"
	headerRateLimit  = "Ratelimit"
	headerXLimit     = "X-Ratelimit-Limit"
	headerXRemaining = "X-Ratelimit-Remaining"
	headerXReset     = "X-Ratelimit-Reset"
	headerRetryAfter = "Retry-After"
)

// String returns "both", "ietf", "x" or "none".
func (s HeaderStyle) String() string {
	switch s {
	case HeadersBoth:
		return "both"
	case HeadersIETF:
		return "ietf"
	case HeadersX:
		return "x"
	case HeadersNone:
		return "none"
	}
	return "header_style(" + strconv.Itoa(int(s)) + ")"
}

// ParseHeaderStyle returns the style named "both", "ietf", "x" or "none".
func ParseHeaderStyle(name string) (HeaderStyle, error) {
	for s := HeadersBoth; s <= HeadersNone; s++ {
		if s.String() == name {
			return s, nil
		}
	}
	return 0, &sluice.FieldError{Field: "header_style", Reason: strconv.Quote(name) +
		` is not one of "both", "ietf", "x", "none"`, Err: sluice.ErrInvalidRule}
}

// SetHeaders sets the rate-limit headers of style for results on h, replacing any already
// there. Resets are reported in whole seconds, rounded up: t is the time until the request
// would be allowed for a policy that denied it (so Retry-After is never earlier than t), else
// the time until the policy is back to full quota. Remaining is never reported below 0.
// SetHeaders does nothing for HeadersNone or no results.
func SetHeaders(h http.Header, style HeaderStyle, results []Result) {
	setHeaders(h, style, results, nil, time.Now())
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// setHeaders is SetHeaders at now; policy, when not nil, is the precomputed RateLimit-Policy
// value of results (see policyValue). It costs two allocations: one string holding every
// value, and one slice backing every header's []string.
func setHeaders(h http.Header, style HeaderStyle, results []Result, policy []string, now time.Time) {
	if style == HeadersNone || len(results) == 0 {
		return
	}
	bp := bufPool.Get().(*[]byte)
	b := (*bp)[:0]
	var ends [5]int
	var keys [5]string
	n := 0
	mark := func(key string) { keys[n], ends[n] = key, len(b); n++ }
	ietf, x := style == HeadersBoth || style == HeadersIETF, style == HeadersBoth || style == HeadersX
	if ietf {
		if policy == nil {
			b = appendPolicy(b, results)
			mark(headerPolicy)
		}
		b = appendRateLimit(b, results)
		mark(headerRateLimit)
	}
	if x {
		d := results[binding(results)].Decision
		b = strconv.AppendInt(b, d.Limit, 10)
		mark(headerXLimit)
		b = strconv.AppendInt(b, max(d.Remaining, 0), 10)
		mark(headerXRemaining)
		b = strconv.AppendInt(b, ceilUnix(now.Add(resetAfter(d))), 10)
		mark(headerXReset)
	}
	s := string(b)
	*bp = b
	bufPool.Put(bp)
	vals := make([]string, n)
	start := 0
	for i := range n {
		vals[i] = s[start:ends[i]]
		start = ends[i]
		h[keys[i]] = vals[i : i+1 : i+1]
	}
	if ietf && policy != nil {
		h[headerPolicy] = policy
	}
}

// policyValue returns the RateLimit-Policy header value of the policies of results, for callers
// that set headers for the same policies on every request. The slice has no spare capacity, so
// an Add on the header copies it rather than writing into the shared array.
func policyValue(results []Result) []string {
	return []string{string(appendPolicy(nil, results))}
}

// appendPolicy appends the RateLimit-Policy items: `"name";q=<capacity>;w=<seconds>`, where the
// window is the time the rule takes to grant its whole capacity (the period for window
// algorithms; for buckets, period x capacity / limit), rounded up to a whole second.
func appendPolicy(b []byte, results []Result) []byte {
	for i, r := range results {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendName(b, r.Name)
		b = append(b, ";q="...)
		capacity := r.Rule.Capacity()
		b = strconv.AppendInt(b, capacity, 10)
		b = append(b, ";w="...)
		window := r.Rule.Period
		if capacity != r.Rule.Limit && r.Rule.Limit > 0 {
			window = time.Duration(float64(r.Rule.Period) * float64(capacity) / float64(r.Rule.Limit))
		}
		b = strconv.AppendInt(b, max(ceilSeconds(window), 1), 10)
	}
	return b
}

// appendRateLimit appends the RateLimit items: `"name";r=<remaining>;t=<seconds>`.
func appendRateLimit(b []byte, results []Result) []byte {
	for i, r := range results {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendName(b, r.Name)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, max(r.Decision.Remaining, 0), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, ceilSeconds(resetAfter(r.Decision)), 10)
	}
	return b
}

// appendName appends name as a structured-field String (RFC 9651): quoted, with '"' and '\'
// escaped; bytes outside printable ASCII become '_'.
func appendName(b []byte, name string) []byte {
	name = policyName(name)
	b = append(b, '"')
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '_')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// binding returns the index of the most constraining result: the least remaining; on a tie,
// the one that resets last.
func binding(results []Result) int {
	best := 0
	for i := 1; i < len(results); i++ {
		d, b := results[i].Decision, results[best].Decision
		if d.Remaining < b.Remaining || d.Remaining == b.Remaining && resetAfter(d) > resetAfter(b) {
			best = i
		}
	}
	return best
}

// resetAfter is the "t" of a decision: how long until the request would be allowed when it
// was denied (and could ever be), else how long until the quota is full again.
func resetAfter(d sluice.Decision) time.Duration {
	if !d.Allowed && d.RetryAfter > 0 {
		return d.RetryAfter
	}
	return max(d.ResetAfter, 0)
}

// ceilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// ceilUnix returns t as Unix time in whole seconds, rounded up.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}
