package memcached

import "github.com/bradfitz/gomemcache/memcache"

// WithServerList makes the client NewFromServers (and NewFromURL) builds pick its servers from
// l: NewFromServers sets l to its addrs, and a later l.SetServers swaps the servers of every
// decision after it (a DNS SRV record looked up again, say) without a new store. Items on a
// server that leaves are not moved: their keys start afresh on the server they map to now.
// New, given its client, ignores it.
func WithServerList(l *memcache.ServerList) Option {
	return optionFunc(func(c *config) { c.serverList = l })
}
