package proxy

import (
	"cmp"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/sluicehq/sluice/httplimit"
)

// What a client may hold of the proxy (issue 31, item 5): its connections are bounded, by a
// number that leaves file descriptors for what must go on when clients take all they may (a
// rules reload, the admin port, the store, the upstream connections of the clients
// admitted), and a request body that stops arriving is cut, so slow uploads cannot hold
// upstream connections. A request body the client breaks (a malformed chunked encoding) or
// stops sending is the client's error: answered 400 or 408 and counted as such, never a 502
// counted against the upstream.

// Defaults of the client-side bounds.
const (
	// DefaultRequestBodyTimeout bounds the silence between two reads of a request's body
	// (nginx's client_body_timeout is 60 s).
	DefaultRequestBodyTimeout = 30 * time.Second
	// DefaultMaxConns bounds the client connections open at once, when the open-file limit
	// allows more.
	DefaultMaxConns = 10_000
	// DefaultFDSpare is the number of file descriptors the default MaxConns leaves aside.
	DefaultFDSpare = 128
	// adminMaxConns bounds the admin port's connections, within the spare.
	adminMaxConns = 32
)

// bodyTimeout returns the request-body timeout of cfg, 0 when disabled.
func (c *Config) bodyTimeout() time.Duration {
	return max(0, cmp.Or(c.RequestBodyTimeout, DefaultRequestBodyTimeout))
}

// maxConns returns the bound on client connections (negative: none): MaxConns, or by default
// the open-file limit less the spare, halved (each client connection may hold one to the
// upstream), at most DefaultMaxConns.
func (c *Config) maxConns() int {
	if c.MaxConns != 0 {
		return c.MaxConns
	}
	n := DefaultMaxConns
	if limit := openFilesLimit(); limit > 0 {
		n = min(n, max(1, (limit-cmp.Or(c.FDSpare, DefaultFDSpare))/2))
	}
	return n
}

// bodyReader is a request's body as the upstream request reads it: each read first moves the
// client connection's read deadline to the body timeout from now (none when it is 0), and the
// first error other than io.EOF is kept, so that upstreamError can tell the client's fault
// from the upstream's. The transport reads it on its own goroutine.
type bodyReader struct {
	io.ReadCloser
	rc      *http.ResponseController
	timeout time.Duration

	mu  sync.Mutex
	err error
}

// watchBody returns r's body wrapped as a bodyReader, or nil when r has none.
func (p *Proxy) watchBody(w http.ResponseWriter, r *http.Request) *bodyReader {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	return &bodyReader{ReadCloser: r.Body, rc: http.NewResponseController(w), timeout: p.cfg.bodyTimeout()}
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.timeout > 0 {
		_ = b.rc.SetReadDeadline(time.Now().Add(b.timeout)) // unsupported writers: no bound
	}
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		_ = b.rc.SetReadDeadline(time.Time{}) // the connection's next request has its own
	case err != nil:
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

// failed returns the first error reading the body, or nil.
func (b *bodyReader) failed() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// The reasons of sluice_proxy_client_errors_total.
const (
	clientBodyTimeout = iota
	clientBodyMalformed
)

// clientFault answers a forwarded request that failed by the client's doing, and reports
// whether it did: 408 when its body fell silent for the body timeout; nothing anyone reads
// when the client went away (its context ended); 400 when its body broke otherwise (a
// malformed chunked encoding). The first and the last count as the client's errors and are
// logged (once a second), and close the connection: its stream cannot be read further.
func (p *Proxy) clientFault(w http.ResponseWriter, r *http.Request, err error) bool {
	var berr error // the client's body failed to read (the server then ends the request too)
	if f, _ := r.Context().Value(forwardingKey{}).(*forwarding); f != nil && f.body != nil {
		berr = f.body.failed()
	}
	switch {
	case berr != nil && timedOut(berr):
	case r.Context().Err() != nil && (errors.Is(err, r.Context().Err()) || berr != nil):
		w.WriteHeader(http.StatusBadGateway) // the client is gone: nobody reads this
		return true
	case berr == nil:
		return false
	}
	w.Header().Set("Connection", "close")
	if timedOut(berr) {
		p.metrics.clientErrors[clientBodyTimeout].Inc()
		p.clientLog.Log(r.Context(), p.log, time.Now(), slog.LevelWarn, "request body timeout: the client sent nothing of its body for the timeout; request ended",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Duration("timeout", p.cfg.bodyTimeout()))
		httplimit.WriteProblem(w, r, &httplimit.ProblemDetails{Type: "about:blank", Title: "Request Timeout",
			Status: http.StatusRequestTimeout, Detail: "The request body did not arrive in time."})
		return true
	}
	p.metrics.clientErrors[clientBodyMalformed].Inc()
	p.clientLog.Log(r.Context(), p.log, time.Now(), slog.LevelWarn, "request body malformed; request ended",
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("err", berr.Error()))
	httplimit.WriteProblem(w, r, &httplimit.ProblemDetails{Type: "about:blank", Title: "Bad Request",
		Status: http.StatusBadRequest, Detail: "The request body is malformed."})
	return true
}

// timedOut reports whether err is a read deadline passing.
func timedOut(err error) bool {
	ne := net.Error(nil)
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}
