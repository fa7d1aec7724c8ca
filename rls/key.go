package rls

import (
	"strconv"
	"strings"
)

// Store keys of descriptors are "domain|k1=v1|k2=v2", the request's own values (so a
// value-less rule counts each value separately), with '|', '=' and '\' escaped by '\' so no
// two descriptors share a key. A limit with several rules keys its second and later rules
// "...|#1", "...|#2".

func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '|' || c == '=' || c == '\\' {
			n++
		}
	}
	return n
}

// keyLen is the length of the store key of a descriptor, with room for a rule suffix.
func keyLen(domainLen int, entries []Entry) int {
	n := domainLen + 4 // "|#NN"
	for _, e := range entries {
		n += 2 + escapedLen(e.Key) + escapedLen(e.Value)
	}
	return n
}

func writeEscaped(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '|' || c == '=' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
}

// descriptorKey builds the store key of a descriptor in one allocation. When shared is not
// nil, an entry i with shared[i] != "" (matched by a share_threshold wildcard) is keyed by
// that pattern instead of its value, so every matching value shares one counter (as in
// envoyproxy/ratelimit, a value spelled like the pattern shares it too).
func descriptorKey(domain string, entries []Entry, shared []string) string {
	var b strings.Builder
	b.Grow(keyLen(escapedLen(domain), entries) + sharedLen(shared))
	writeEscaped(&b, domain)
	for i, e := range entries {
		b.WriteByte('|')
		writeEscaped(&b, e.Key)
		b.WriteByte('=')
		if shared != nil && shared[i] != "" {
			writeEscaped(&b, shared[i])
			continue
		}
		writeEscaped(&b, e.Value)
	}
	return b.String()
}

func sharedLen(shared []string) int {
	n := 0
	for _, s := range shared {
		n += escapedLen(s)
	}
	return n
}

// ruleKey is the key of the i-th rule of a limit.
func ruleKey(key string, i int) string {
	if i == 0 {
		return key
	}
	return key + "|#" + strconv.Itoa(i)
}
