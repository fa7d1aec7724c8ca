package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/redact"
)

// NewFromURL connects to the Redis named by rawURL and returns a Store on it that closes the
// connection on Close:
//
//	redis://[user:password@]host:port[/db]                   one Redis
//	rediss://[user:password@]host:port[/db]                  one Redis over TLS
//	redis-sentinel://[user:password@]host:port,host:port/MASTER[?password=..]
//	                                                          the primary MASTER, found through Sentinels
//	redis-cluster://[user:password@]host:port,host:port      a Redis Cluster (any nodes as seeds)
//
// For Sentinel, the userinfo authenticates to the Sentinels and the password query parameter
// (with username) to the data nodes; the path is the master name. Query parameters for every
// scheme: db (also the path of redis://), dial_timeout (a Go duration), pool_size, counters
// (true: WithCounters, the windows decided without Lua). The client
// never retries (MaxRetries -1) and honours context deadlines (ContextTimeoutEnabled), so a
// stuck server holds a pipeline no longer than the store's timeout. A single Redis that
// refuses connections fails decisions at once, and is dialed again every 10 ms, so that
// decisions come back to it within 10 ms plus a round trip of its accepting connections again
// (go-redis alone re-dials once a second); behind Sentinel or Cluster, go-redis's once a
// second stays. A Cluster client reloads the slot map every ClusterStateReloadInterval
// (go-redis: every minute, or on MOVED, which a dead primary never answers), so decisions
// find the replica that took over a killed primary's slots. Errors name the part of the URL
// that is wrong. WithTLS puts every connection of any scheme over TLS.
// ClusterStateReloadInterval is how often a redis-cluster:// client reloads the slot map.
const ClusterStateReloadInterval = 250 * time.Millisecond

func NewFromURL(rawURL string, opts ...Option) (*Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil { // neither err nor its message quotes the URL: a password may be in the part quoted
		return nil, fmt.Errorf("redis: url: %s does not parse: %s (a password holding '/', '?', '#' or '%%' must be percent-encoded)", redact.URL(rawURL), redact.ParseError(err))
	}
	q := u.Query()
	p, err := parseCommon(u, q)
	if err != nil {
		return nil, err
	}
	var client goredis.UniversalClient
	var redial *redialer
	tc := tlsOption(opts)
	switch u.Scheme {
	case "redis", "rediss":
		if len(p.addrs) != 1 {
			return nil, fmt.Errorf("redis: url: host: %s takes one host:port, got %d (use redis-cluster:// or redis-sentinel:// for more)", u.Scheme, len(p.addrs))
		}
		if p.dial == 0 {
			p.dial = defaultDialTimeout
		}
		o := &goredis.Options{Addr: p.addrs[0], Username: p.user, Password: p.pass, DB: p.db,
			DialTimeout: p.dial, DialerRetries: 1, PoolSize: p.pool, MaxRetries: -1, ContextTimeoutEnabled: true}
		if o.TLSConfig = tc; tc == nil && u.Scheme == "rediss" {
			o.TLSConfig = tlsConfig(p.addrs[0])
		}
		redial = newRedialer(goredis.NewDialer(o))
		o.Dialer = redial.dial
		client = goredis.NewClient(o)
	case "redis-sentinel":
		master := strings.Trim(u.Path, "/")
		if master == "" || strings.Contains(master, "/") {
			return nil, fmt.Errorf("redis: url: path: redis-sentinel:// needs the master name as the path, got %s", redact.URL(rawURL))
		}
		if p.dial == 0 {
			p.dial = defaultDialTimeout
		}
		fo := &goredis.FailoverOptions{
			MasterName: master, SentinelAddrs: p.addrs,
			SentinelUsername: p.user, SentinelPassword: p.pass,
			Username: q.Get("username"), Password: q.Get("password"), DB: p.db,
			DialTimeout: p.dial, DialerRetries: 1, PoolSize: p.pool, MaxRetries: -1, ContextTimeoutEnabled: true,
			TLSConfig: tc,
		}
		redial = newRedialer(goredis.NewDialer(&goredis.Options{DialTimeout: p.dial, TLSConfig: tc}))
		redial.sentinel = newSentinelResolver(fo)
		fo.Dialer = redial.dial
		client = goredis.NewFailoverClient(fo)
	case "redis-cluster":
		if u.Path != "" && u.Path != "/" {
			return nil, fmt.Errorf("redis: url: path: redis-cluster:// takes no path (Cluster has database 0 only), got %s", redact.URL(rawURL))
		}
		client = goredis.NewClusterClient(&goredis.ClusterOptions{
			Addrs: p.addrs, Username: p.user, Password: p.pass,
			DialTimeout: p.dial, PoolSize: p.pool, MaxRetries: -1, ContextTimeoutEnabled: true,
			ClusterStateReloadInterval: ClusterStateReloadInterval, TLSConfig: tc,
		})
	default:
		return nil, fmt.Errorf("redis: url: scheme: want redis, rediss, redis-sentinel or redis-cluster, got %q", u.Scheme)
	}
	if p.counters {
		opts = append(opts[:len(opts):len(opts)], WithCounters())
	}
	s, err := New(client, opts...)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	s.owned, s.redial = true, redial
	return s, nil
}

// shownHost is an address of a URL as an error may show it: as it is when it reads as
// host:port, else masked (it may be part of a password that held a raw '/').
func shownHost(a string) string {
	if r := redact.URL(a); r != redact.Mask {
		return strconv.Quote(r)
	}
	return "an address (" + redact.Mask + ")"
}

type urlParts struct {
	addrs      []string
	user, pass string
	db, pool   int
	dial       time.Duration
	counters   bool
}

func parseCommon(u *url.URL, q url.Values) (urlParts, error) {
	var p urlParts
	if u.Host == "" {
		return p, errors.New("redis: url: host: missing (want host:port)")
	}
	for _, a := range strings.Split(u.Host, ",") {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return p, fmt.Errorf("redis: url: host: %s is not host:port", shownHost(a))
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return p, fmt.Errorf("redis: url: host: %s has an invalid port", shownHost(a))
		}
		p.addrs = append(p.addrs, a)
	}
	if u.User != nil {
		p.user = u.User.Username()
		p.pass, _ = u.User.Password()
	}
	if u.Scheme == "redis" || u.Scheme == "rediss" {
		if path := strings.Trim(u.Path, "/"); path != "" {
			db, err := strconv.Atoi(path)
			if err != nil || db < 0 {
				return p, fmt.Errorf("redis: url: path: want a database number, got %s", redact.URL("redis://"+u.Host+u.Path))
			}
			p.db = db
		}
	}
	var err error
	if v := q.Get("db"); v != "" {
		if p.db, err = strconv.Atoi(v); err != nil || p.db < 0 {
			return p, fmt.Errorf("redis: url: db: want a database number, got %q", v)
		}
	}
	if v := q.Get("pool_size"); v != "" {
		if p.pool, err = strconv.Atoi(v); err != nil || p.pool <= 0 {
			return p, fmt.Errorf("redis: url: pool_size: want a positive integer, got %q", v)
		}
	}
	if v := q.Get("dial_timeout"); v != "" {
		if p.dial, err = time.ParseDuration(v); err != nil || p.dial <= 0 {
			return p, fmt.Errorf("redis: url: dial_timeout: want a positive duration such as 500ms, got %q", v)
		}
	}
	if v := q.Get("counters"); v != "" {
		if p.counters, err = strconv.ParseBool(v); err != nil {
			return p, fmt.Errorf("redis: url: counters: want true or false, got %q", v)
		}
	}
	for k := range q {
		switch k {
		case "db", "pool_size", "dial_timeout", "password", "username", "counters":
		default:
			// Not named: it may be part of a password that held a raw '&'.
			return p, errors.New("redis: url: unknown query parameter (want db, pool_size, dial_timeout, username, password, counters)")
		}
	}
	return p, nil
}

// sentinelResolver asks the Sentinels, one after another until one answers, for the address
// of a primary (the redialer's poll behind Sentinel). Its clients connect on first use.
type sentinelResolver struct {
	master  string
	clients []*goredis.SentinelClient
}

func newSentinelResolver(fo *goredis.FailoverOptions) *sentinelResolver {
	r := &sentinelResolver{master: fo.MasterName}
	for _, a := range fo.SentinelAddrs {
		r.clients = append(r.clients, goredis.NewSentinelClient(&goredis.Options{Addr: a,
			Username: fo.SentinelUsername, Password: fo.SentinelPassword, MaxRetries: -1, PoolSize: 1,
			DialTimeout: resolveTimeout, TLSConfig: fo.TLSConfig}))
	}
	return r
}

// primary returns the primary's host:port as the first Sentinel that answers names it.
func (r *sentinelResolver) primary(ctx context.Context) (string, error) {
	err := errors.New("redis: sentinel: no Sentinel")
	for _, sc := range r.clients {
		hp, e := sc.GetMasterAddrByName(ctx, r.master).Result()
		if e == nil && len(hp) == 2 {
			return net.JoinHostPort(hp[0], hp[1]), nil
		}
		if e != nil {
			err = e
		}
	}
	return "", err
}

func (r *sentinelResolver) close() {
	for _, sc := range r.clients {
		_ = sc.Close()
	}
}
