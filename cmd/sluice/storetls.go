package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/sluicehq/sluice/store"
)

// storeTLSFlags are the shared flags of TLS to the store (store.ClientTLS): Redis in every
// topology and memcached. envoyproxy/ratelimit's variables that map to them (peerenv.go):
//
//	REDIS_TLS=true / MEMCACHE_TLS=true                          --store-tls
//	REDIS_TLS_CACERT / MEMCACHE_TLS_CACERT                      --store-tls-ca
//	REDIS_TLS_CLIENT_CERT / MEMCACHE_TLS_CLIENT_CERT            --store-tls-cert
//	REDIS_TLS_CLIENT_KEY / MEMCACHE_TLS_CLIENT_KEY              --store-tls-key
//	REDIS_TLS_SKIP_HOSTNAME_VERIFICATION / MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION
//	                                                            --store-tls-skip-hostname-verification
type storeTLSFlags struct {
	tls     store.ClientTLS
	envErrs []error // boolean variables that did not parse
}

func (f *storeTLSFlags) register(fs *flag.FlagSet, env envFunc) {
	fs.BoolVar(&f.tls.Enabled, "store-tls", f.envBool(env, "store-tls", "SLUICE_STORE_TLS"), "connect to Redis (every topology) and memcached over TLS; rediss:// always does [SLUICE_STORE_TLS]")
	fs.StringVar(&f.tls.CAFile, "store-tls-ca", env("store-tls-ca", "SLUICE_STORE_TLS_CA", ""), "PEM file of the authorities that sign the store's certificates (default: the system roots); implies --store-tls [SLUICE_STORE_TLS_CA]")
	fs.StringVar(&f.tls.CertFile, "store-tls-cert", env("store-tls-cert", "SLUICE_STORE_TLS_CERT", ""), "PEM client certificate for the store (with --store-tls-key), read again at each new connection [SLUICE_STORE_TLS_CERT]")
	fs.StringVar(&f.tls.KeyFile, "store-tls-key", env("store-tls-key", "SLUICE_STORE_TLS_KEY", ""), "PEM key of --store-tls-cert [SLUICE_STORE_TLS_KEY]")
	fs.StringVar(&f.tls.ServerName, "store-tls-server-name", env("store-tls-server-name", "SLUICE_STORE_TLS_SERVER_NAME", ""), "name the store's certificates must carry (default: the host dialed) [SLUICE_STORE_TLS_SERVER_NAME]")
	fs.BoolVar(&f.tls.SkipHostnameVerification, "store-tls-skip-hostname-verification", f.envBool(env, "store-tls-skip-hostname-verification", "SLUICE_STORE_TLS_SKIP_HOSTNAME_VERIFICATION"), "accept a store certificate of a trusted authority whatever name it carries (the chain is still verified) [SLUICE_STORE_TLS_SKIP_HOSTNAME_VERIFICATION]")
}

// envBool is the boolean of env for flagName ("" or unset: false); a value that does not
// parse is kept for check.
func (f *storeTLSFlags) envBool(env envFunc, flagName, name string) bool {
	v := env(flagName, name, "")
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		f.envErrs = append(f.envErrs, fmt.Errorf("--%s: %s: want true or false, got %q", flagName, name, v))
	}
	return b
}

// check reports the first problem of the TLS flags, naming the flag: a variable that did
// not parse, or a file that cannot be read.
func (f *storeTLSFlags) check() error {
	if len(f.envErrs) > 0 {
		return f.envErrs[0]
	}
	if err := (store.ClientTLS{CAFile: f.tls.CAFile}).Validate(); err != nil {
		return fmt.Errorf("--store-tls-ca: %w", err)
	}
	if err := (store.ClientTLS{CertFile: f.tls.CertFile, KeyFile: f.tls.KeyFile}).Validate(); err != nil {
		return fmt.Errorf("--store-tls-cert, --store-tls-key: %w", err)
	}
	return nil
}
