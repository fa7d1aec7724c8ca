// Package grpclimit rate-limits gRPC calls with a sluice.Limiter: server interceptors (unary
// and stream) that answer a call over its limit with codes.ResourceExhausted carrying the
// standard google.rpc.RetryInfo and google.rpc.QuotaFailure details, so clients that honour
// them back off for the right time, and client interceptors that limit the calls a service
// makes to a downstream one, failing at once or waiting for a slot.
//
// An Interceptor is built once from Routes: each route matches calls by full method name
// ("/pkg.Service/Method"), by service ("/pkg.Service/") or as the default (""), and lists
// the Limits its calls must all pass (sluice.Limiter.AllowAll: a call denied by one limit
// consumes from none). Each limit keys calls with a Key: incoming metadata (an API key),
// the peer address behind trusted proxies (KeyIP), the method, a composite, or your own.
//
//	in, err := grpclimit.New(limiter, []grpclimit.Route{{
//		Limits: []grpclimit.Limit{{Name: "per-ip", Rule: sluice.PerMinute(600), Key: grpclimit.KeyIP(resolver, 64)}},
//	}})
//	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(in.Unary()), grpc.ChainStreamInterceptor(in.Stream()))
//
// When the store cannot decide, the failure policy (WithFailurePolicy) admits the call (fail
// open, the default) or answers codes.Unavailable (fail closed); either way the failure is
// logged, at most once a second, and counted (Stats). For a local limiter that keeps the
// global budget while the store is down, wrap the store in distributed.NewFallback instead.
package grpclimit
