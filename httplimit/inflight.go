package httplimit

import (
	"net/http"
)

// WriteRefused answers a request refused a slot of the in-flight limit named refused.Name:
// with overload (an adaptive limit: the service is overloaded), 503 with Retry-After 1 and a
// temporary-reduced-capacity problem; otherwise (the client's key is at its limit) the 429 of
// WriteDenial, for results (the request's rate-limit results, all allowed) and refused.
// The rate-limit headers, if any, are set first. Transports that enforce in-flight limits
// (httplimit, sluice proxy) answer with it.
func WriteRefused(w http.ResponseWriter, r *http.Request, results []Result, refused Result, overload bool) {
	if overload {
		WriteUnavailable(w, r, "The service is at its concurrency limit, which follows its latency.", []string{refused.Name})
		return
	}
	WriteDenial(w, r, append(results, refused))
}
