package rlqs

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"net"
	"net/netip"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// DefaultIPv6Prefix is Config.IPv6Prefix's default: a /64, the block one host or one
// customer is usually handed, so one host cannot count as many clients by its addresses.
const DefaultIPv6Prefix = 64

// PeerIdentity returns the Config.ClientKey that names a stream's client by what it proves
// rather than where it connects from: the identity of the client certificate a TLS
// handshake verified, when there is one (its first URI SAN, such as a SPIFFE id, else its
// first DNS name, else its subject's common name, else a digest of the certificate), and
// otherwise its IP address, an IPv6 address grouped by its first ipv6Prefix bits (1 to 128;
// other values mean DefaultIPv6Prefix) and an IPv4 address on its own. The keys of the
// kinds cannot collide ("cert:", "ip:" and "ip6:" prefixes).
func PeerIdentity(ipv6Prefix int) func(ctx context.Context) string {
	if ipv6Prefix < 1 || ipv6Prefix > 128 {
		ipv6Prefix = DefaultIPv6Prefix
	}
	return func(ctx context.Context) string {
		p, ok := peer.FromContext(ctx)
		if !ok {
			return ""
		}
		if id := certIdentity(p.AuthInfo); id != "" {
			return "cert:" + id
		}
		if p.Addr == nil {
			return ""
		}
		return ipKey(p.Addr.String(), ipv6Prefix)
	}
}

// certIdentity returns the identity of a verified client certificate, or "".
func certIdentity(info credentials.AuthInfo) string {
	tlsInfo, ok := info.(credentials.TLSInfo)
	if !ok || len(tlsInfo.State.VerifiedChains) == 0 || len(tlsInfo.State.PeerCertificates) == 0 {
		return ""
	}
	return leafIdentity(tlsInfo.State.PeerCertificates[0])
}

// leafIdentity names a certificate's subject.
func leafIdentity(c *x509.Certificate) string {
	switch {
	case len(c.URIs) > 0:
		return c.URIs[0].String()
	case len(c.DNSNames) > 0:
		return c.DNSNames[0]
	case c.Subject.CommonName != "":
		return c.Subject.CommonName
	}
	sum := sha256.Sum256(c.Raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ipKey returns the client key of a peer address: "ip:" and an IPv4 address (an IPv4
// address mapped into IPv6 too), or "ip6:" and the IPv6 prefix of prefix bits it is in; an
// address that does not parse is its own key.
func ipKey(addr string, prefix int) string {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "addr:" + host
	}
	ip = ip.WithZone("").Unmap()
	if ip.Is4() {
		return "ip:" + ip.String()
	}
	p, err := ip.Prefix(prefix)
	if err != nil {
		return "ip6:" + ip.String()
	}
	return "ip6:" + p.String()
}

// DefaultNewcomerStreams is the part of Config.MaxStreams kept, by default, for clients
// that have no stream open: a tenth.
const DefaultNewcomerStreams = 10 // percent

// admit decides whether a client with open streams already open may open one more, when
// all clients hold total of maxStreams, at most perClient each, and the last newcomers of
// them go only to a client with none open (one not yet seen, or back after a restart): so
// that clients already served, however many, never take the whole cap. It returns the
// reason to refuse, or false.
func admit(total, open, maxStreams, perClient, newcomers int) (Reason, bool) {
	switch {
	case total >= maxStreams:
		return ReasonStreams, true
	case open >= perClient:
		return ReasonClientStreams, true
	case open > 0 && total >= maxStreams-newcomers:
		return ReasonNewcomers, true
	}
	return 0, false
}
