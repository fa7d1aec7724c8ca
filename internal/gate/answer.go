package gate

import (
	"net/http"
	"strings"
)

// Answer is an HTTP answer kept in memory: an http.ResponseWriter for Gate.Write, read back
// by a door that sends the answer in another protocol (ext_authz over gRPC) or passes parts
// of it on as headers (forward-auth to NGINX, which keeps no body of an auth subrequest).
type Answer struct {
	Status int
	Head   http.Header
	Body   []byte
}

// Header returns the answer's header, creating it.
func (a *Answer) Header() http.Header {
	if a.Head == nil {
		a.Head = make(http.Header)
	}
	return a.Head
}

// WriteHeader records the status (the first one written).
func (a *Answer) WriteHeader(status int) {
	if a.Status == 0 {
		a.Status = status
	}
}

// Write appends b to the body.
func (a *Answer) Write(b []byte) (int, error) {
	if a.Status == 0 {
		a.Status = http.StatusOK
	}
	a.Body = append(a.Body, b...)
	return len(b), nil
}

// BodyLine returns the body without its final newline: a problem's JSON on one line, fit
// for a header value.
func (a *Answer) BodyLine() string { return strings.TrimSuffix(string(a.Body), "\n") }
