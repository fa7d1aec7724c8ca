// Package clientip finds the client address of an HTTP request or a gRPC call behind reverse
// proxies, without letting the client choose it.
//
// A Resolver is built from the list of proxies the operator trusts (CIDRs or bare addresses).
// The connection's peer address is the client unless that peer is a trusted proxy; then the
// X-Forwarded-For or RFC 7239 Forwarded entries are walked from the right (the entry the
// nearest proxy appended) to the left, past trusted proxies only: the first untrusted hop is
// the client. Everything to the left of it was written by the client and is never read, so a
// client cannot pick its own rate-limit key by sending a forged header. A malformed, obfuscated
// or "unknown" entry, or more than MaxHops trusted hops, stops the walk: the client is then the
// last address a trusted party vouched for (the nearest trusted proxy), never an attacker-chosen
// one.
//
// IPv4-mapped IPv6 addresses are unmapped, zones dropped, ports and brackets stripped. AppendKey
// turns an address into rate-limit key text, grouping IPv6 clients by prefix (a /64 by
// default), since one subscriber usually holds a whole /64.
package clientip
