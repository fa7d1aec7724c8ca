package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/sluicehq/sluice/httplimit"
)

// Defaults of the timeouts toward the upstream.
const (
	// DefaultResponseHeaderTimeout bounds the wait for the upstream's response headers once
	// the request is written (nginx's proxy_read_timeout).
	DefaultResponseHeaderTimeout = 60 * time.Second
	// DefaultUpstreamIdleTimeout bounds the silence between two reads of a response body
	// (Envoy's stream idle timeout).
	DefaultUpstreamIdleTimeout = 5 * time.Minute
)

// errUpstreamIdle is the cause of a forwarded request cancelled because the upstream sent
// nothing of its response body for the idle timeout.
var errUpstreamIdle = errors.New("proxy: upstream idle timeout: no response bytes")

// timeouts returns the response-header and idle timeouts of cfg, 0 when disabled.
func (c *Config) timeouts() (header, idle time.Duration) {
	header, idle = c.ResponseHeaderTimeout, c.UpstreamIdleTimeout
	if header == 0 {
		header = DefaultResponseHeaderTimeout
	}
	if idle == 0 {
		idle = DefaultUpstreamIdleTimeout
	}
	return max(header, 0), max(idle, 0)
}

// transport returns cfg.Transport, or a clone of http.DefaultTransport keeping up to 256
// idle connections to the upstream, with the response-header timeout, and at most as many
// connections to it as clients may hold (MaxConns).
func (p *Proxy) transport() http.RoundTripper {
	if p.cfg.Transport != nil {
		return p.cfg.Transport
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 256
	t.MaxConnsPerHost = max(0, p.cfg.maxConns())
	t.ResponseHeaderTimeout, _ = p.cfg.timeouts()
	return t
}

func (p *Proxy) reverseProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(p.upstream) // Host: the upstream's; X-Forwarded-Host keeps the client's
			// Append the peer to the chain it sent, rather than replacing the chain.
			pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
			pr.SetXForwarded()
			setForwarded(pr)
			// Request trailers: Clone gave Out a copy of In's trailer map, taken before the
			// body was read and so without values; the server fills In's once the body is
			// read, which is when the transport writes the outgoing trailers.
			pr.Out.Trailer = pr.In.Trailer
		},
		Transport:      p.transport(),
		FlushInterval:  p.cfg.FlushInterval,
		ModifyResponse: p.watchIdle,
		ErrorHandler:   p.upstreamError,
		ErrorLog:       slog.NewLogLogger(p.log.Handler(), slog.LevelError),
	}
}

// setForwarded keeps the Forwarded header the client sent (ReverseProxy removes it before
// Rewrite) and appends this hop's element, as RFC 7239 says: for (the peer, an IPv6
// address bracketed and quoted), host (as the client asked) and proto.
func setForwarded(pr *httputil.ProxyRequest) {
	var b strings.Builder
	for _, v := range pr.In.Header["Forwarded"] {
		b.WriteString(v)
		b.WriteString(", ")
	}
	b.WriteString("for=")
	peer, _, err := net.SplitHostPort(pr.In.RemoteAddr)
	if err != nil {
		peer = "unknown" // RFC 7239 section 6.2
	}
	if strings.Contains(peer, ":") {
		peer = "[" + peer + "]"
	}
	writeForwardedValue(&b, peer)
	if pr.In.Host != "" {
		b.WriteString(";host=")
		writeForwardedValue(&b, pr.In.Host)
	}
	if pr.In.TLS != nil {
		b.WriteString(";proto=https")
	} else {
		b.WriteString(";proto=http")
	}
	pr.Out.Header["Forwarded"] = []string{b.String()}
}

// writeForwardedValue writes v as a token when it is one, else as a quoted string (RFC 7230
// section 3.2.6), as a Forwarded parameter value must be.
func writeForwardedValue(b *strings.Builder, v string) {
	token := v != ""
	for i := 0; i < len(v) && token; i++ {
		token = isTokenChar(v[i])
	}
	if token {
		b.WriteString(v)
		return
	}
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		if v[i] == '"' || v[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(v[i])
	}
	b.WriteByte('"')
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// forwardingKey is the context key of a forwarded request's *forwarding.
type forwardingKey struct{}

// forwarding is one forwarded request's idle watch: its timer cancels the request's context
// (with errUpstreamIdle) when the response body stays silent for the idle timeout.
type forwarding struct {
	p      *Proxy
	cancel context.CancelCauseFunc
	timer  *time.Timer
	body   *bodyReader // nil: the request has no body
}

// forward sends r to the upstream. The request body is read under the request-body timeout
// (bodyReader); the response body is watched for silence longer than the idle timeout, which
// cancels the upstream request and aborts the response.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	body := p.watchBody(w, r)
	if _, idle := p.cfg.timeouts(); idle == 0 && body == nil {
		p.rp.ServeHTTP(w, r)
		return
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	f := &forwarding{p: p, cancel: cancel, body: body}
	defer f.stop()
	r = r.WithContext(context.WithValue(ctx, forwardingKey{}, f))
	if body != nil {
		r.Body = body
	}
	p.rp.ServeHTTP(w, r)
}

func (f *forwarding) stop() {
	if f.timer != nil {
		f.timer.Stop()
	}
	f.cancel(nil)
}

// watchIdle (ReverseProxy.ModifyResponse) meters the body of a request with budgets
// (meterResponse) and starts the idle timer of a response's body; protocol upgrades (101)
// are left alone: their connection is the client's to keep.
func (p *Proxy) watchIdle(resp *http.Response) error {
	p.meterResponse(resp) // the budgets' meter reads the body below the idle watch
	f, _ := resp.Request.Context().Value(forwardingKey{}).(*forwarding)
	_, idle := p.cfg.timeouts()
	if f == nil || idle == 0 || resp.StatusCode == http.StatusSwitchingProtocols {
		return nil
	}
	path := resp.Request.URL.Path
	f.timer = time.AfterFunc(idle, func() {
		p.metrics.upstreamTimeouts[timeoutIdle].Inc()
		p.upstreamLog.Log(context.Background(), p.log, time.Now(), slog.LevelError, "upstream timeout: the response body was silent; response aborted",
			slog.String("upstream", p.upstreamName), slog.String("path", path), slog.Duration("idle_timeout", idle))
		f.cancel(errUpstreamIdle)
	})
	resp.Body = &idleBody{ReadCloser: resp.Body, timer: f.timer, idle: idle}
	return nil
}

// idleBody restarts its timer at every read.
type idleBody struct {
	io.ReadCloser
	timer *time.Timer
	idle  time.Duration
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.timer.Reset(b.idle)
	}
	return n, err
}

// upstreamError answers a forwarded request the upstream did not answer: the client's error
// when it was reading the client's body that failed (clientBodyError: 400 or 408), else 504
// with an RFC 9457 problem when its response headers did not come within the timeout (or its
// connection timed out), else 502 as httputil.ReverseProxy does. Each is counted and logged
// (once a second), except the client's own cancellation.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if p.clientFault(w, r, err) {
		return
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		p.metrics.upstreamTimeouts[timeoutResponseHeader].Inc()
		p.upstreamLog.Log(r.Context(), p.log, time.Now(), slog.LevelError, "upstream timeout", slog.String("upstream", p.upstreamName),
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("err", withoutURL(err)))
		httplimit.WriteProblem(w, r, &httplimit.ProblemDetails{Type: "about:blank", Title: "Gateway Timeout",
			Status: http.StatusGatewayTimeout, Detail: "The upstream did not answer in time."})
		return
	}
	p.metrics.upstreamErrors.Inc()
	p.upstreamLog.Log(r.Context(), p.log, time.Now(), slog.LevelError, "upstream error", slog.String("upstream", p.upstreamName),
		slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("err", withoutURL(err)))
	w.WriteHeader(http.StatusBadGateway)
}

// withoutURL is the message of a transport error without the URL a *url.Error quotes: the
// request's query, which may carry an API key (?api_key=...), stays out of the log.
func withoutURL(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Op + ": " + ue.Err.Error()
	}
	return err.Error()
}
