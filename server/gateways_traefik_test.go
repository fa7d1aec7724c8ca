package server_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sluicehq/sluice/internal/testenv"
)

// Traefik is not run for real: no registry this project may use has a traefik binary (not
// Debian bookworm, not npm), and v3.7.13 cannot be built from the Go module proxy, which
// refuses the fork its go.mod replaces github.com/abbot/go-http-auth with
// (github.com/containous/go-http-auth@v0.4.1-0.20260804094822-b975dcaa8c48: "403 Forbidden,
// This module version is not available"). traefikForwardAuth replays, step by step, what
// Traefik v3.7.13's ForwardAuth middleware does (pkg/middlewares/auth/forward.go,
// ServeHTTP and writeHeader, with trustForwardHeader set as the README's snippet sets it).

// traefikForwardAuthConfig is the README snippet's middleware: the fields of Traefik's
// dynamic.ForwardAuth it sets, unknown fields refused.
type traefikForwardAuthConfig struct {
	Address             string   `yaml:"address"`
	TrustForwardHeader  *bool    `yaml:"trustForwardHeader"`
	AuthResponseHeaders []string `yaml:"authResponseHeaders"`
}

// traefikHopHeaders are forward.go's hopHeaders (vulcand/oxy's names).
var traefikHopHeaders = []string{"Connection", "Keep-Alive", "Te", "Trailers", "Transfer-Encoding", "Upgrade"}

// traefikXHeaders are forwardedheaders.XHeadersSet: what DeleteXForwardedHeaders removes.
var traefikXHeaders = []string{"X-Forwarded-Proto", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Port", "X-Forwarded-Server",
	"X-Forwarded-Uri", "X-Forwarded-Method", "X-Forwarded-Prefix", "X-Forwarded-Tls-Client-Cert", "X-Forwarded-Tls-Client-Cert-Info", "X-Real-Ip"}

// traefikForwardAuth is the ForwardAuth middleware in front of next.
func traefikForwardAuth(t *testing.T, cfg traefikForwardAuthConfig, next http.Handler) http.Handler {
	authClient := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		forwardReq, err := http.NewRequestWithContext(req.Context(), http.MethodGet, cfg.Address, nil) // preserveRequestMethod: false
		if err != nil {
			rw.WriteHeader(http.StatusInternalServerError)
			return
		}
		// writeHeader(req, forwardReq, *trustForwardHeader, nil)
		for k, vs := range req.Header {
			forwardReq.Header[k] = append([]string(nil), vs...)
		}
		for _, f := range forwardReq.Header["Connection"] { // RemoveConnectionHeaders
			for _, sf := range strings.Split(f, ",") {
				forwardReq.Header.Del(strings.TrimSpace(sf))
			}
		}
		for _, h := range traefikHopHeaders {
			forwardReq.Header.Del(h)
		}
		if !*cfg.TrustForwardHeader {
			for _, h := range traefikXHeaders {
				forwardReq.Header.Del(h)
			}
		}
		if _, ok := req.Header["User-Agent"]; !ok {
			forwardReq.Header.Set("User-Agent", "")
		}
		if clientIP, _, err := net.SplitHostPort(req.RemoteAddr); err == nil {
			if prior, ok := forwardReq.Header["X-Forwarded-For"]; ok {
				clientIP = strings.Join(prior, ", ") + ", " + clientIP
			}
			forwardReq.Header.Set("X-Forwarded-For", clientIP)
		}
		setIfAbsent := func(k, v string) {
			if _, ok := forwardReq.Header[k]; !ok {
				forwardReq.Header.Set(k, v)
			}
		}
		setIfAbsent("X-Forwarded-Method", req.Method)
		setIfAbsent("X-Forwarded-Proto", "http")
		_, port, err := net.SplitHostPort(req.Host)
		if err != nil || port == "" {
			port = "80"
		}
		setIfAbsent("X-Forwarded-Port", port)
		setIfAbsent("X-Forwarded-Host", req.Host)
		setIfAbsent("X-Forwarded-Uri", req.URL.RequestURI())

		forwardResponse, err := authClient.Do(forwardReq)
		if err != nil {
			rw.WriteHeader(http.StatusInternalServerError) // not context.Canceled
			return
		}
		defer forwardResponse.Body.Close()
		body, err := io.ReadAll(forwardResponse.Body)
		if err != nil {
			rw.WriteHeader(http.StatusInternalServerError)
			return
		}
		if forwardResponse.StatusCode < http.StatusOK || forwardResponse.StatusCode >= http.StatusMultipleChoices {
			for k, vs := range forwardResponse.Header {
				rw.Header()[k] = append(rw.Header()[k], vs...)
			}
			for _, h := range traefikHopHeaders {
				rw.Header().Del(h)
			}
			rw.WriteHeader(forwardResponse.StatusCode) // no Location: preserveLocationHeader unset
			_, _ = rw.Write(body)
			return
		}
		for _, name := range cfg.AuthResponseHeaders {
			key := http.CanonicalHeaderKey(name)
			req.Header.Del(key)
			if len(forwardResponse.Header[key]) > 0 {
				req.Header[key] = append([]string(nil), forwardResponse.Header[key]...)
			}
		}
		req.RequestURI = req.URL.RequestURI()
		next.ServeHTTP(rw, req)
	})
}

// traefikConfig reads the README's Traefik dynamic configuration: the middleware (its
// address pointed at sluice) and the service's URL.
func traefikConfig(t *testing.T, sluice string) (traefikForwardAuthConfig, string) {
	t.Helper()
	text := testenv.Replace(t, testenv.Block(t, readme, "Traefik", "yaml", 0), "127.0.0.1:8080", sluice)
	var doc struct {
		HTTP struct {
			Middlewares map[string]struct {
				ForwardAuth traefikForwardAuthConfig `yaml:"forwardAuth"`
			} `yaml:"middlewares"`
			Routers map[string]struct {
				Rule        string   `yaml:"rule"`
				Middlewares []string `yaml:"middlewares"`
				Service     string   `yaml:"service"`
			} `yaml:"routers"`
			Services map[string]struct {
				LoadBalancer struct {
					Servers []struct {
						URL string `yaml:"url"`
					} `yaml:"servers"`
				} `yaml:"loadBalancer"`
			} `yaml:"services"`
		} `yaml:"http"`
	}
	dec := yaml.NewDecoder(bytes.NewReader([]byte(text)))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("the README's Traefik configuration: %v", err)
	}
	r, ok := doc.HTTP.Routers["app"]
	if !ok || len(r.Middlewares) != 1 {
		t.Fatalf("the README's Traefik configuration: want router app with one middleware, got %+v", doc.HTTP.Routers)
	}
	fa := doc.HTTP.Middlewares[r.Middlewares[0]].ForwardAuth
	servers := doc.HTTP.Services[r.Service].LoadBalancer.Servers
	if fa.Address == "" || fa.TrustForwardHeader == nil || len(servers) != 1 {
		t.Fatalf("the README's Traefik configuration: middleware %+v, servers %+v", fa, servers)
	}
	return fa, servers[0].URL
}

// Issue 35: the README's Traefik configuration, replayed as Traefik v3.7.13's ForwardAuth
// runs it (see traefikForwardAuth) in front of an app on 127.0.0.1: the limit exact under
// concurrency, the rate-limit headers copied into the app's request (authResponseHeaders:
// Traefik has no way to put them on the response), Sluice's 429 passed whole, a spoofed
// X-Forwarded-For counted against its sender (trustForwardHeader: false); then Sluice down:
// Traefik's 500.
func TestTraefikForwardAuth(t *testing.T) {
	h := startGatewaySluice(t)
	a := startApp(t)
	fa, _ := traefikConfig(t, h.srv.HTTPAddr())
	appURL, err := url.Parse(a.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw := &http.Server{Handler: traefikForwardAuth(t, fa, httputil.NewSingleHostReverseProxy(appURL))}
	go func() { _ = gw.Serve(lis) }()
	t.Cleanup(func() { gw.Close() })
	base := "http://" + lis.Addr().String()
	checkGateway(t, h, base, a, false)
	if got := a.lastHeader().Get("RateLimit"); !strings.Contains(got, `"edge.remote_address";r=`) {
		t.Errorf("the app's request: RateLimit %q, want the headers authResponseHeaders copies", got)
	}
	checkDown(t, h, base, a, http.StatusInternalServerError, "Traefik's 500")
}
