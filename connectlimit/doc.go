// Package connectlimit rate-limits Connect RPCs (connectrpc.com/connect; its Connect, gRPC
// and gRPC-Web protocols alike) with a sluice.Limiter: an Interceptor for handlers and clients
// that answers a call over its limits with a *connect.Error of CodeResourceExhausted carrying
// google.rpc.RetryInfo and google.rpc.QuotaFailure details, as grpclimit does, the rate-limit
// headers and Retry-After. It is grpclimit's door on Connect, on the same pipeline: routes by
// procedure, keys (KeyProcedure, KeyHeader, KeyIP behind trusted proxies, Keys, a function of
// your own), cost (WithCost), class (X-Criticality), and one failure policy.
//
//	in, err := connectlimit.New(limiter, []connectlimit.Route{{Limits: []connectlimit.Limit{
//		{Name: "per-ip", Rule: sluice.PerMinute(600), Key: connectlimit.KeyIP(resolver, 64)}}}})
//	mux.Handle(pingv1connect.NewPingServiceHandler(svc, connect.WithInterceptors(in)))
package connectlimit
