package proxy

// TEMPORARY until clientip and httplimit land on main (helper "http"); replaced then.

import (
	"net"
	"net/http"
	"net/netip"

	"github.com/sluicehq/sluice"
)

type result struct {
	Name     string
	Rule     sluice.Rule
	Decision sluice.Decision
}

func (p *Proxy) newResolver(trusted []string) error { return nil }

func (p *Proxy) clientAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

func appendClientKey(dst []byte, a netip.Addr, bits int) []byte {
	if a.Is6() && bits < 128 {
		pr, _ := a.Prefix(bits)
		b, _ := pr.AppendText(dst)
		return b
	}
	return a.AppendTo(dst)
}

func setHeaders(h http.Header, results []result) {}

func writeDenial(w http.ResponseWriter, r *http.Request, results []result) {
	http.Error(w, "rate limited", http.StatusTooManyRequests)
}
