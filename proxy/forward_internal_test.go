package proxy

import (
	"crypto/tls"
	"net/http"
	"net/http/httputil"
	"testing"
)

// TestForwardedElement: this hop's element quotes what is not a token (IPv6 addresses,
// bracketed; a host with a port) and names the scheme the client used.
func TestForwardedElement(t *testing.T) {
	for _, c := range []struct {
		remote, host, sent string
		tls                bool
		want               string
	}{
		{"192.0.2.1:5000", "example.com", "", false, "for=192.0.2.1;host=example.com;proto=http"},
		{"[2001:db8::1]:5000", "example.com:8443", "", true, `for="[2001:db8::1]";host="example.com:8443";proto=https`},
		{"[2001:db8::1]:5000", "example.com", "for=unknown", false, `for=unknown, for="[2001:db8::1]";host=example.com;proto=http`},
		{"not-an-address", "", "", false, "for=unknown;proto=http"},
		{"192.0.2.1:5000", `we"ird\host`, "", false, `for=192.0.2.1;host="we\"ird\\host";proto=http`},
	} {
		in := &http.Request{RemoteAddr: c.remote, Host: c.host, Header: http.Header{}}
		if c.sent != "" {
			in.Header.Set("Forwarded", c.sent)
		}
		if c.tls {
			in.TLS = &tls.ConnectionState{}
		}
		pr := &httputil.ProxyRequest{In: in, Out: &http.Request{Header: http.Header{}}}
		setForwarded(pr)
		if got := pr.Out.Header.Get("Forwarded"); got != c.want {
			t.Errorf("%s %s %q: Forwarded %q, want %q", c.remote, c.host, c.sent, got, c.want)
		}
	}
}
