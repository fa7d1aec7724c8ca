package rlqs

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Observer is told what a Service does, for metrics (package server counts it in
// Prometheus). Its methods are called on the report path of many streams at once: they must
// be cheap and safe for concurrent use. Config.Observer nil observes nothing.
type Observer interface {
	// Reported is called for each report message answered: its domain (the stream's, or ""
	// when the rules define no such domain), the bucket usages it carried, and the time
	// taken to validate it and allocate its buckets (state round trips included).
	Reported(domain string, usages int, took time.Duration)
	// Rejected is called when a stream is refused or ended for what its client sent, or for
	// a limit of the server.
	Rejected(r Reason)
	// Sent is called with the number of actions of kind a message delivered to a client.
	Sent(kind ActionKind, n int)
	// StateError is called when a call of the allocation state fails (the client keeps its
	// assignment until it expires), not when the call was cut short by its stream ending; StateRetry when a shared state (NewRedisLedger) retries a
	// transaction because another replica wrote the bucket meanwhile.
	StateError()
	StateRetry()
	// Uncovered is called for each bucket usage that no quota rule covers: the client's
	// domain (as in Reported) names a bucket it gets no assignment for, so its own no-assignment
	// behaviour decides (Envoy's no_assignment_behavior, the quota client's OwnRule).
	Uncovered(domain string)
}

// Reason says why a stream was refused or ended by the server: one of a small fixed set.
type Reason uint8

// The reasons.
const (
	// ReasonDomain: the first report named no domain, or a bad one, or the domain changed.
	ReasonDomain Reason = iota
	// ReasonBucketID: a bucket id empty, too large, malformed, or named twice in a report.
	ReasonBucketID
	// ReasonElapsed: a time_elapsed negative, malformed or too long.
	ReasonElapsed
	// ReasonCounts: absurd request counts.
	ReasonCounts
	// ReasonBuckets: more buckets than the maximum in one report or on one stream.
	ReasonBuckets
	// ReasonStreams: more streams open than the maximum.
	ReasonStreams
	// ReasonShutdown: a stream opened while the server drains.
	ReasonShutdown
	// ReasonClientStreams: more streams open from one client than its maximum.
	ReasonClientStreams
	// ReasonIdle: no report within the stream idle timeout.
	ReasonIdle
	// ReasonMemory: the memory budget of bucket ids is spent.
	ReasonMemory
	// ReasonNewcomers: the streams left are kept for clients with none open
	// (Config.NewcomerStreams), and this client has some.
	ReasonNewcomers
	numReasons
)

var reasonNames = [numReasons]string{"domain", "bucket_id", "time_elapsed", "counts", "buckets", "streams", "shutdown", "client_streams", "idle", "bucket_memory", "newcomers"}

// String returns the reason's metric label.
func (r Reason) String() string {
	if r < numReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Code returns the gRPC status code the stream ends with for r.
func (r Reason) Code() codes.Code {
	switch r {
	case ReasonBuckets, ReasonStreams, ReasonClientStreams, ReasonMemory, ReasonNewcomers:
		return codes.ResourceExhausted
	case ReasonShutdown:
		return codes.Unavailable
	case ReasonIdle:
		return codes.DeadlineExceeded
	}
	return codes.InvalidArgument
}

// Reasons returns every Reason.
func Reasons() []Reason {
	out := make([]Reason, numReasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

// ActionKind is the kind of a BucketAction sent.
type ActionKind uint8

// The action kinds.
const (
	// ActionAssignment: a QuotaAssignmentAction with the rule's TTL (new or renewed).
	ActionAssignment ActionKind = iota
	// ActionAbandon: an AbandonAction (bucket idle, or no longer covered by a rule).
	ActionAbandon
	// ActionExpire: a QuotaAssignmentAction with TTL 0, sent by Drain before a stop.
	ActionExpire
	// ActionPush: a QuotaAssignmentAction sent unasked, when another client's report
	// changed the share.
	ActionPush
	numActionKinds
)

var actionNames = [numActionKinds]string{"assignment", "abandon", "expire", "push"}

// String returns the kind's metric label.
func (k ActionKind) String() string {
	if k < numActionKinds {
		return actionNames[k]
	}
	return "unknown"
}

// ActionKinds returns every ActionKind.
func ActionKinds() []ActionKind {
	out := make([]ActionKind, numActionKinds)
	for i := range out {
		out[i] = ActionKind(i)
	}
	return out
}

// rejection is the status that ends a stream, with its Reason for the Observer. grpc-go
// sends its GRPCStatus.
type rejection struct {
	reason Reason
	st     *status.Status
}

func (r *rejection) Error() string              { return r.st.Err().Error() }
func (r *rejection) GRPCStatus() *status.Status { return r.st }

// reject returns the rejection for r, its message prefixed "rlqs: ".
func reject(r Reason, format string, args ...any) error {
	return &rejection{reason: r, st: status.Newf(r.Code(), "rlqs: "+format, args...)}
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) Reported(string, int, time.Duration) {}
func (nopObserver) Rejected(Reason)                     {}
func (nopObserver) Sent(ActionKind, int)                {}
func (nopObserver) StateError()                         {}
func (nopObserver) StateRetry()                         {}
func (nopObserver) Uncovered(string)                    {}
