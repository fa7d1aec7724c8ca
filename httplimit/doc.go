// Package httplimit rate-limits net/http handlers with a sluice.Limiter.
//
// Middleware wraps a handler: for each request it builds keys (client IP behind trusted
// proxies, an API key header, the route pattern, the method, composites or a custom function),
// decides every matching rule at once (sluice.Limiter.AllowAll semantics: a denied request
// consumes from none), writes the rate-limit headers and either calls the handler or answers
// 429 with an RFC 9457 problem+json body.
//
// The headers follow draft-ietf-httpapi-ratelimit-headers-11 (RateLimit-Policy and RateLimit,
// one item per policy) and the widely deployed X-RateLimit-Limit, -Remaining and -Reset, as
// chosen by a HeaderStyle; Retry-After comes with every 429. SetHeaders and WriteDenial are
// exported so other transports (sluice proxy) answer exactly like the middleware.
//
// Costs known only after the response (LLM tokens, bytes served): with WithSettle the cost
// function takes an estimate, the handler reports the real cost with Settle, and the
// middleware settles the difference once the handler returns (sluice.Limiter.Settle): a
// refund, or an overage charged past the limit that the client's next requests pay.
//
// Store errors never become a 500 or a panic: the middleware fails open, fails closed (503,
// temporary-reduced-capacity) or lets a local limiter decide (WithLocalLimiter), logs (rate-limited) and counts
// them.
package httplimit
