package httplimit

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/monotime"
	"github.com/sluicehq/sluice/internal/pipeline"
)

// Result is the outcome of one rate-limit policy for a request: the policy's name (as shown in
// the RateLimit headers and the 429 body), its rule and the decision; fields Name (characters
// outside printable ASCII are written "_"; an empty name is shown as "default"), Rule and
// Decision. It is the limit pipeline's result, the one of every transport.
type Result = pipeline.Result

// HeaderStyle selects the rate-limit headers of responses: the one header-style type of
// Sluice's transports (grpclimit.HeaderStyle is this type; sluice proxy takes it too). The
// zero value is HeadersBoth.
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
	// HeadersOnDenial writes the X-RateLimit-* fields of HeadersX with denials only: an
	// admitted request pays nothing for headers. It is grpclimit's default, where header
	// metadata costs most.
	HeadersOnDenial
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

// String returns "both", "ietf", "x", "none" or "on_denial".
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
	case HeadersOnDenial:
		return "on_denial"
	}
	return "header_style(" + strconv.Itoa(int(s)) + ")"
}

// ParseHeaderStyle returns the style named "both", "ietf", "x", "none" or "on_denial".
func ParseHeaderStyle(name string) (HeaderStyle, error) {
	for s := HeadersBoth; s <= HeadersOnDenial; s++ {
		if s.String() == name {
			return s, nil
		}
	}
	return 0, &sluice.FieldError{Field: "header_style", Reason: strconv.Quote(name) +
		` is not one of "both", "ietf", "x", "none", "on_denial"`, Err: sluice.ErrInvalidRule}
}

// SetHeaders sets the rate-limit headers of style for results on h, replacing any already
// there. Resets are reported in whole seconds, rounded up (sluice.Decision.ResetIn): t is the
// time until the request would be allowed for a policy that denied it (so Retry-After is never
// earlier than t; for a request that can never be allowed, positive too: until the policy's
// state is empty, at most its period), else the time until the policy is back to full quota. Remaining is never reported below 0.
// SetHeaders does nothing for HeadersNone or no results, nor for HeadersOnDenial when every
// result allowed.
func SetHeaders(h http.Header, style HeaderStyle, results []Result) {
	setHeaders(h, style, results, nil, monotime.UnixNano())
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// setHeaders is SetHeaders at now (Unix ns; read only for the X- headers); policy, when not nil, is the precomputed RateLimit-Policy
// value of results (see policyValue). Allocation is what costs most here (on a loaded
// machine, more than formatting), so it allocates twice, small: one string holding the values
// that change per request and one slice backing their headers. The X-RateLimit-Limit value,
// the same on every request of a policy, comes from limitValues.
func setHeaders(h http.Header, style HeaderStyle, results []Result, policy []string, now int64) {
	if style == HeadersOnDenial {
		style = HeadersNone
		if denied(results) {
			style = HeadersX
		}
	}
	if style == HeadersNone || len(results) == 0 {
		return
	}
	bp := bufPool.Get().(*[]byte)
	b := (*bp)[:0]
	var ends [4]int
	var keys [4]string
	n := 0
	ietf, x := style == HeadersBoth || style == HeadersIETF, style == HeadersBoth || style == HeadersX
	if ietf {
		if policy == nil {
			b = appendPolicy(b, results)
			keys[n], ends[n], n = headerPolicy, len(b), n+1
		}
		b = appendRateLimit(b, results)
		keys[n], ends[n], n = headerRateLimit, len(b), n+1
	}
	var d sluice.Decision
	if x {
		tightest := results[binding(results)]
		d = tightest.Decision
		b = strconv.AppendInt(b, max(d.Remaining, 0), 10)
		keys[n], ends[n], n = headerXRemaining, len(b), n+1
		b = strconv.AppendInt(b, ceilUnix(now+int64(resetAfter(tightest))), 10)
		keys[n], ends[n], n = headerXReset, len(b), n+1
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
	if x {
		h[headerXLimit] = limitValues.get(d.Capacity)
	}
}

// denied reports whether a result denied the request.
func denied(results []Result) bool {
	for i := range results {
		if !results[i].Decision.Allowed {
			return true
		}
	}
	return false
}

// limitValues holds the X-RateLimit-Limit value last written, shared by the responses that
// write the same one (every response of a policy).
var limitValues intValues

// intValues caches the header value of one integer. Header values it returns are shared: the
// slice has no spare capacity, so Header.Add copies it, and nothing in net/http writes into a
// header's slice.
type intValues struct{ last atomic.Pointer[intValue] }

type intValue struct {
	n int64
	v []string
}

func (c *intValues) get(n int64) []string {
	if e := c.last.Load(); e != nil && e.n == n {
		return e.v
	}
	e := &intValue{n: n, v: []string{strconv.FormatInt(n, 10)}}
	c.last.Store(e)
	return e.v
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
		b = strconv.AppendInt(b, ceilSeconds(resetAfter(r)), 10)
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
		if d.Remaining < b.Remaining || d.Remaining == b.Remaining && resetAfter(results[i]) > resetAfter(results[best]) {
			best = i
		}
	}
	return best
}

// resetAfter is the "t" of a result: sluice.Decision.ResetIn under its rule (positive for a
// denial, a request that can never be allowed included).
func resetAfter(r Result) time.Duration { return r.Decision.ResetIn(r.Rule.Period) }

// ceilSeconds returns d in whole seconds, rounded up; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// ceilUnix returns ns (Unix nanoseconds) in whole seconds, rounded up.
func ceilUnix(ns int64) int64 {
	s := ns / int64(time.Second)
	if ns%int64(time.Second) > 0 {
		s++
	}
	return s
}
