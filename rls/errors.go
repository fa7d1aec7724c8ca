package rls

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrorKind is the kind of an Error: what a transport answers (a gRPC code, an HTTP status).
type ErrorKind int

// The kinds of Error. Their names are the gRPC codes a transport answers.
const (
	// KindInvalid: the request is malformed or refused by the rules or the bounds, before
	// any store call (gRPC INVALID_ARGUMENT, HTTP 400).
	KindInvalid ErrorKind = iota + 1
	// KindUnavailable: the store failed without a fallback (UNAVAILABLE, HTTP 503).
	KindUnavailable
	// KindCanceled, KindDeadline: the caller's context ended (CANCELLED, DEADLINE_EXCEEDED).
	KindCanceled
	KindDeadline
)

// String returns the name of the gRPC code of the kind.
func (k ErrorKind) String() string {
	switch k {
	case KindInvalid:
		return "InvalidArgument"
	case KindUnavailable:
		return "Unavailable"
	case KindCanceled:
		return "Canceled"
	case KindDeadline:
		return "DeadlineExceeded"
	}
	return "Unknown"
}

// Error is an error of the engine, of one Kind. Msg is the message for the client; a store
// failure is wrapped (Unwrap).
type Error struct {
	Kind ErrorKind
	Msg  string
	Err  error
}

func (e *Error) Error() string { return e.Msg }

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of err: its Error's, or 0 when err is not an Error.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// Invalidf returns a KindInvalid Error whose message, prefixed "sluice: ", names the field.
func Invalidf(format string, args ...any) error {
	return &Error{Kind: KindInvalid, Msg: "sluice: " + fmt.Sprintf(format, args...)}
}

// invalid is Invalidf.
func invalid(format string, args ...any) error { return Invalidf(format, args...) }

// Quote quotes s for an error message, cut to 64 bytes so that a huge value is not echoed.
func Quote(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return strconv.Quote(s)
}

func quote(s string) string { return Quote(s) }
