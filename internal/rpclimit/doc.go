// Package rpclimit is the door of Sluice's RPC transports (grpclimit, connectlimit) on the limit
// pipeline (internal/pipeline), where gRPC and Connect name things alike: routes by procedure
// ("/pkg.Service/Method", gRPC's full method name), a call's cost and keys added to the
// pipeline's Request (keys joined by Join), and its outcome as a google.rpc Answer: a code,
// a message and, for a refusal, the google.rpc.RetryInfo and google.rpc.QuotaFailure details.
// It links protobuf's well-known types and googleapis' error details, never a transport: each
// transport reads its call and writes the Answer in its own protocol.
package rpclimit
