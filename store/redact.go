package store

import "github.com/sluicehq/sluice/internal/redact"

// Redact returns the store URL rawURL fit for logs, pages and errors, by an allow-list: the
// scheme (one Sluice is given URLs of: the stores', http, https, ...), the hosts and ports, a
// path of plain characters (a database number, a Sentinel master), a user name beside a
// password, and the values of the harmless query parameters (db, pool_size, dial_timeout,
// counters, username) are shown; the password, a user name alone, every other query parameter
// (password= among them) and a fragment are "xxxxx", as is any part that does not read as
// what it should be. A password holding a raw '@' or space is masked whole; one holding a raw
// '/', '?' or '#' (or a query holding an '@') leaves nothing after the scheme shown, and a URL
// that does not parse, or of another scheme, shows nothing of itself. It works on URLs with
// several hosts, which net/url does not parse, on lists of URLs and of name=URL (--regions),
// and on the values the stores take where a URL is expected (memory, host:port lists).
func Redact(rawURL string) string { return redact.URL(rawURL) }
