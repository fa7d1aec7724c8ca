package replay

import (
	"net/netip"
	"strings"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/proxy"
)

// Record is one request read from an access log.
type Record struct {
	// Line is the request's line number in the log, from 1.
	Line int64
	// At is the instant the request started, in Unix nanoseconds.
	At int64
	// Method is the request method; Target the request target as logged, path and query
	// (":path"); Authority the host (":authority", Host); Scheme "http" or "https" ("" when
	// not logged: "http").
	Method, Target, Authority, Scheme string
	// Peer is the connection's peer address as logged ("host" or "host:port"; "" when the
	// format has none, as Envoy's default: then the last X-Forwarded-For entry, the address
	// Envoy decided on, stands for it).
	Peer string
	// Headers are the other request headers the log holds, names as logged.
	Headers []Header
	// Cost is the request's units (its descriptors' hits_addend); 0 is 1.
	Cost int64
}

// Header is one request header of a Record.
type Header struct {
	Name, Value string
}

// reset empties r, keeping the capacity of its headers.
func (r *Record) reset() {
	clear(r.Headers)
	*r = Record{Headers: r.Headers[:0]}
}

// header returns the first value of the header name (case-insensitive).
func (r *Record) header(name string) (string, bool) {
	for i := range r.Headers {
		if strings.EqualFold(r.Headers[i].Name, name) {
			return r.Headers[i].Value, true
		}
	}
	return "", false
}

// request is a proxy.Request over a Record, its client resolved once, as sluice proxy
// resolves a live request's: the peer, past the trusted proxies by X-Forwarded-For and
// Forwarded.
type request struct {
	rec      *Record
	resolver *clientip.Resolver
	client   netip.Addr
	resolved bool
	xff, fwd [1]string
}

var _ proxy.Request = (*request)(nil)

func (q *request) reset(rec *Record, resolver *clientip.Resolver) {
	*q = request{rec: rec, resolver: resolver}
}

// Header implements proxy.Request.
func (q *request) Header(name string) (string, bool) {
	r := q.rec
	switch {
	case name == ":path":
		return r.Target, r.Target != ""
	case name == ":method":
		return r.Method, r.Method != ""
	case name == ":authority" || strings.EqualFold(name, "host"):
		return r.Authority, r.Authority != ""
	case name == ":scheme":
		if r.Scheme == "" {
			return "http", true
		}
		return r.Scheme, true
	}
	return r.header(name)
}

// Method implements proxy.Request.
func (q *request) Method() string { return q.rec.Method }

// Path implements proxy.Request: the target without its query.
func (q *request) Path() string {
	p, _, _ := strings.Cut(q.rec.Target, "?")
	return p
}

// Client implements proxy.Request.
func (q *request) Client() netip.Addr {
	if q.resolved {
		return q.client
	}
	q.resolved = true
	r := q.rec
	xff, hasXFF := r.header("X-Forwarded-For")
	fwd, hasFwd := r.header("Forwarded")
	peer := r.Peer
	if peer == "" && hasXFF { // Envoy's default format: its client is the last entry
		i := strings.LastIndexByte(xff, ',')
		peer = strings.TrimSpace(xff[i+1:])
		xff, hasXFF = strings.TrimSpace(xff[:max(i, 0)]), i > 0
	}
	var xs, fs []string
	if hasXFF {
		q.xff[0] = xff
		xs = q.xff[:]
	}
	if hasFwd {
		q.fwd[0] = fwd
		fs = q.fwd[:]
	}
	q.client = q.resolver.Resolve(peer, xs, fs)
	return q.client
}

// clientKey is the client's key as a remote_address action writes it (IPv6 grouped by /64),
// "" when the client is unknown.
func (q *request) clientKey() string {
	c := q.Client()
	if !c.IsValid() {
		return ""
	}
	var buf [64]byte
	return string(clientip.AppendKey(buf[:0], c, 0))
}
