// Package connectlimit rate-limits Connect RPCs (connectrpc.com/connect, over its Connect, gRPC
// and gRPC-Web protocols) with a sluice.Limiter: an Interceptor for handlers and clients that
// refuses a call over its limits with a *connect.Error of CodeResourceExhausted, grpclimit's
// RetryInfo and QuotaFailure details, the rate-limit headers and Retry-After. It is grpclimit's
// door on Connect, on the same pipeline: routes by procedure, keys (KeyProcedure, KeyHeader,
// KeyIP, Keys, your own), cost (WithCost), class (X-Criticality), one failure policy.
//
//	in, err := connectlimit.New(limiter, []connectlimit.Route{{Limits: []connectlimit.Limit{
//		{Name: "per-ip", Rule: sluice.PerMinute(600), Key: connectlimit.KeyIP(resolver, 64)}}}})
//	mux.Handle(pingv1connect.NewPingServiceHandler(svc, connect.WithInterceptors(in)))
package connectlimit
