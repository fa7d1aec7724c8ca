package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/config/xds"
	"github.com/sluicehq/sluice/server"
)

// sourceFlags are serve's flags of the rules from xDS and of TLS on the gRPC port, each
// defaulting to its SLUICE_* variable, then to envoyproxy/ratelimit's (peerSourceFlags).
type sourceFlags struct {
	xdsServer, xdsNodeID, xdsNodeMetadata, xdsHeaders      string
	xdsTLS, xdsNoJitter, readyWithoutRules, xdsAllowEmpty  bool
	xdsCA, xdsCert, xdsKey, xdsServerName, xdsRandomFactor string
	xdsBackoffInitial, xdsBackoffMax, xdsConnectRetry      time.Duration
	xdsMaxMessageBytes                                     int64
	tlsCert, tlsKey, tlsClientCA, tlsClientSAN             string
}

func (f *serveFlags) registerSource(fs *flag.FlagSet) {
	s := &f.source
	fs.StringVar(&s.xdsServer, "xds-server", f.env("xds-server", "SLUICE_XDS_SERVER", ""), "take the rules from this xDS server (host:port; ADS, State of the World, RateLimitConfig resources) instead of --config [SLUICE_XDS_SERVER, CONFIG_TYPE=GRPC_XDS_SOTW+CONFIG_GRPC_XDS_SERVER_URL]")
	fs.StringVar(&s.xdsNodeID, "xds-node-id", f.env("xds-node-id", "SLUICE_XDS_NODE_ID", xds.DefaultNodeID), "node id sent to the xDS server, which keys its snapshots by it [SLUICE_XDS_NODE_ID, CONFIG_GRPC_XDS_NODE_ID]")
	fs.StringVar(&s.xdsNodeMetadata, "xds-node-metadata", f.env("xds-node-metadata", "SLUICE_XDS_NODE_METADATA", ""), "node metadata sent to the xDS server: key=value,key=value [SLUICE_XDS_NODE_METADATA, CONFIG_GRPC_XDS_NODE_METADATA]")
	fs.StringVar(&s.xdsHeaders, "xds-headers", f.env("xds-headers", "SLUICE_XDS_HEADERS", ""), "gRPC metadata added to the xDS stream: key=value,key=value [SLUICE_XDS_HEADERS, CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS]")
	fs.BoolVar(&s.xdsTLS, "xds-tls", f.envBool("xds-tls", "SLUICE_XDS_TLS"), "connect to the xDS server over TLS (implied by --xds-tls-ca and --xds-tls-cert) [SLUICE_XDS_TLS, CONFIG_GRPC_XDS_SERVER_USE_TLS]")
	fs.StringVar(&s.xdsCA, "xds-tls-ca", f.env("xds-tls-ca", "SLUICE_XDS_TLS_CA", ""), "PEM bundle of the CAs the xDS server's certificate must chain to; empty: the system's [SLUICE_XDS_TLS_CA, CONFIG_GRPC_XDS_SERVER_TLS_CACERT]")
	fs.StringVar(&s.xdsCert, "xds-tls-cert", f.env("xds-tls-cert", "SLUICE_XDS_TLS_CERT", ""), "client certificate (PEM) for mutual TLS to the xDS server, with --xds-tls-key [SLUICE_XDS_TLS_CERT, CONFIG_GRPC_XDS_CLIENT_TLS_CERT]")
	fs.StringVar(&s.xdsKey, "xds-tls-key", f.env("xds-tls-key", "SLUICE_XDS_TLS_KEY", ""), "key of --xds-tls-cert [SLUICE_XDS_TLS_KEY, CONFIG_GRPC_XDS_CLIENT_TLS_KEY]")
	fs.StringVar(&s.xdsServerName, "xds-tls-server-name", f.env("xds-tls-server-name", "SLUICE_XDS_TLS_SERVER_NAME", ""), "name the xDS server's certificate must carry; empty: the host of --xds-server [SLUICE_XDS_TLS_SERVER_NAME, CONFIG_GRPC_XDS_SERVER_TLS_SAN]")
	fs.DurationVar(&s.xdsBackoffInitial, "xds-backoff-initial", f.envDuration("xds-backoff-initial", "SLUICE_XDS_BACKOFF_INITIAL", f.peerDurationOr("xds-backoff-initial", xds.DefaultInitialBackoff)), "first wait before reconnecting to the xDS server; doubles up to --xds-backoff-max [SLUICE_XDS_BACKOFF_INITIAL, XDS_CLIENT_BACKOFF_INITIAL_INTERVAL]")
	fs.DurationVar(&s.xdsBackoffMax, "xds-backoff-max", f.envDuration("xds-backoff-max", "SLUICE_XDS_BACKOFF_MAX", f.peerDurationOr("xds-backoff-max", xds.DefaultMaxBackoff)), "longest wait before reconnecting to the xDS server [SLUICE_XDS_BACKOFF_MAX, XDS_CLIENT_BACKOFF_MAX_INTERVAL]")
	fs.StringVar(&s.xdsRandomFactor, "xds-backoff-random-factor", f.env("xds-backoff-random-factor", "SLUICE_XDS_BACKOFF_RANDOM_FACTOR", strconv.FormatFloat(xds.DefaultBackoffRandomFactor, 'g', -1, 64)), "share by which each reconnection wait is spread either way, in [0, 1) [SLUICE_XDS_BACKOFF_RANDOM_FACTOR, XDS_CLIENT_BACKOFF_RANDOM_FACTOR]")
	fs.BoolVar(&s.xdsNoJitter, "xds-backoff-no-jitter", f.envBool("xds-backoff-no-jitter", "SLUICE_XDS_BACKOFF_NO_JITTER"), "exact reconnection waits, not spread [SLUICE_XDS_BACKOFF_NO_JITTER, XDS_CLIENT_BACKOFF_JITTER=false]")
	fs.DurationVar(&s.xdsConnectRetry, "xds-connect-retry-interval", f.envDuration("xds-connect-retry-interval", "SLUICE_XDS_CONNECT_RETRY_INTERVAL", f.peerDurationOr("xds-connect-retry-interval", xds.DefaultConnectRetryInterval)), "first delay of gRPC's reconnection of the xDS channel [SLUICE_XDS_CONNECT_RETRY_INTERVAL, CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL]")
	fs.Int64Var(&s.xdsMaxMessageBytes, "xds-max-message-bytes", f.envInt64("xds-max-message-bytes", "SLUICE_XDS_MAX_MESSAGE_BYTES", f.peerInt("xds-max-message-bytes")), "largest snapshot of the xDS server applied; a larger one is NACKed, the rules in force kept; 0: 64 MiB [SLUICE_XDS_MAX_MESSAGE_BYTES, XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES]")
	fs.BoolVar(&s.xdsAllowEmpty, "xds-allow-empty", f.envBool("xds-allow-empty", "SLUICE_XDS_ALLOW_EMPTY"), "apply an empty xDS snapshot that removes every limit in force (envoyproxy/ratelimit applies it); by default it is NACKed and the rules in force kept [SLUICE_XDS_ALLOW_EMPTY]")
	fs.BoolVar(&s.readyWithoutRules, "ready-without-rules", f.envBool("ready-without-rules", "SLUICE_READY_WITHOUT_RULES"), "with --xds-server, report healthy (/healthcheck, /readyz) before the first rules arrive; requests are answered UNAVAILABLE until then either way [SLUICE_READY_WITHOUT_RULES, FORCE_START_WITHOUT_INITIAL_CONFIG]")
	fs.StringVar(&s.tlsCert, "tls-cert", f.env("tls-cert", "SLUICE_TLS_CERT", ""), "serve gRPC over TLS with this certificate chain (PEM), read again when it changes [SLUICE_TLS_CERT, GRPC_SERVER_USE_TLS+GRPC_SERVER_TLS_CERT]")
	fs.StringVar(&s.tlsKey, "tls-key", f.env("tls-key", "SLUICE_TLS_KEY", ""), "key of --tls-cert [SLUICE_TLS_KEY, GRPC_SERVER_TLS_KEY]")
	fs.StringVar(&s.tlsClientCA, "tls-client-ca", f.env("tls-client-ca", "SLUICE_TLS_CLIENT_CA", ""), "require gRPC clients to present a certificate of these CAs (PEM; mutual TLS) [SLUICE_TLS_CLIENT_CA, GRPC_CLIENT_TLS_CACERT or GRPC_SERVER_TLS_CA_CERT]")
	fs.StringVar(&s.tlsClientSAN, "tls-client-san", f.env("tls-client-san", "SLUICE_TLS_CLIENT_SAN", ""), "a name (DNS, IP, URI or e-mail) gRPC client certificates must carry [SLUICE_TLS_CLIENT_SAN, GRPC_CLIENT_TLS_SAN]")
}

// peerDurationOr is the default a duration flag takes from the peer's variables, def without.
func (f *serveFlags) peerDurationOr(flagName string, def time.Duration) time.Duration {
	if _, ok := f.peer.defaults[flagName]; !ok {
		return def
	}
	return f.peerDuration(flagName)
}

// peerInt is the default an integer flag takes from the peer's variables, 0 without.
func (f *serveFlags) peerInt(flagName string) int64 {
	n, _ := strconv.ParseInt(f.peer.defaults[flagName], 10, 64) // checked by readPeerEnv
	return n
}

// applySource checks the flags of registerSource and sets the rules source and the gRPC TLS
// of cfg, naming the flag of a problem.
func (f *serveFlags) applySource(fs *flag.FlagSet, cfg *server.Config, log *slog.Logger) error {
	fs.Visit(func(fl *flag.Flag) { delete(f.envErrs, fl.Name) })
	for _, name := range []string{"xds-tls", "xds-backoff-initial", "xds-backoff-max", "xds-backoff-no-jitter",
		"xds-connect-retry-interval", "xds-max-message-bytes", "xds-allow-empty", "ready-without-rules"} {
		if msg, ok := f.envErrs[name]; ok {
			return errors.New(msg)
		}
	}
	s := &f.source
	if s.tlsCert != "" || s.tlsKey != "" || s.tlsClientCA != "" || s.tlsClientSAN != "" {
		if s.tlsCert == "" || s.tlsKey == "" {
			return errors.New("--tls-cert, --tls-key: both are required for TLS on the gRPC port")
		}
		if s.tlsClientSAN != "" && s.tlsClientCA == "" {
			return errors.New("--tls-client-san: needs --tls-client-ca (mutual TLS)")
		}
		cfg.GRPCTLS = &server.ServerTLS{CertFile: s.tlsCert, KeyFile: s.tlsKey, ClientCAFile: s.tlsClientCA, ClientSAN: s.tlsClientSAN}
	}
	if s.xdsServer == "" {
		if s.readyWithoutRules {
			log.Info("--ready-without-rules has no effect without --xds-server")
		}
		return nil
	}
	if f.config != "" {
		return fmt.Errorf("--xds-server, --config: the rules come from one source; got both (%s and %s)", s.xdsServer, f.config)
	}
	o := xds.Options{Server: s.xdsServer, NodeID: s.xdsNodeID, InitialBackoff: s.xdsBackoffInitial, MaxBackoff: s.xdsBackoffMax,
		NoJitter: s.xdsNoJitter, ConnectRetryInterval: s.xdsConnectRetry, MaxMessageBytes: int(s.xdsMaxMessageBytes), AllowEmpty: s.xdsAllowEmpty,
		Rules: cfg.RulesOptions, Logger: log}
	var err error
	if o.NodeMetadata, err = pairs("--xds-node-metadata", s.xdsNodeMetadata); err != nil {
		return err
	}
	if o.Headers, err = pairs("--xds-headers", s.xdsHeaders); err != nil {
		return err
	}
	if o.BackoffRandomFactor, err = strconv.ParseFloat(s.xdsRandomFactor, 64); err != nil || o.BackoffRandomFactor < 0 || o.BackoffRandomFactor >= 1 {
		return fmt.Errorf("--xds-backoff-random-factor: want a number in [0, 1), got %q", s.xdsRandomFactor)
	}
	if o.MaxMessageBytes < 0 || s.xdsMaxMessageBytes > 1<<30 {
		return fmt.Errorf("--xds-max-message-bytes: want 0 to %d, got %d", 1<<30, s.xdsMaxMessageBytes)
	}
	if s.xdsTLS || s.xdsCA != "" || s.xdsCert != "" || s.xdsKey != "" {
		o.TLS = &xds.ClientTLS{CAFile: s.xdsCA, CertFile: s.xdsCert, KeyFile: s.xdsKey, ServerName: s.xdsServerName}
	}
	client, err := xds.New(o)
	if err != nil {
		return fmt.Errorf("--xds-server: %w", err)
	}
	cfg.RulesSource, cfg.ReadyWithoutRules = client, s.readyWithoutRules
	log.Info("rules from xDS", "server", maskSecret("SLUICE_XDS_SERVER", s.xdsServer), "node", s.xdsNodeID, "tls", o.TLS != nil, "ready_without_rules", s.readyWithoutRules)
	return nil
}

// pairs parses "key=value,key=value" (flag names the flag for an error); empty is none.
func pairs(flagName, s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := make(map[string]string)
	all := strings.Split(s, ",")
	for i, kv := range all {
		k, v, ok := strings.Cut(kv, "=")
		if k = strings.TrimSpace(k); !ok || k == "" {
			// The element is not quoted: it may be a piece of a header's secret value.
			return nil, fmt.Errorf("%s: want key=value,key=value; element %d of %d has no key", flagName, i+1, len(all))
		}
		out[k] = strings.TrimSpace(v)
	}
	return out, nil
}

// peerSourceFlags map envoyproxy/ratelimit's xDS and gRPC TLS variables to the flags above;
// init appends them to peerFlags, so they are read, checked and reported as the others.
var peerSourceFlags = []peerFlag{
	{"xds-server", []string{"CONFIG_TYPE", "CONFIG_GRPC_XDS_SERVER_URL"}, func(e *peerEnv) (string, bool, error) {
		switch t := e.or("CONFIG_TYPE", "FILE"); {
		case strings.EqualFold(t, "FILE"):
			return "", false, nil
		case strings.EqualFold(t, "GRPC_XDS_SOTW"):
			return e.or("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000"), true, nil
		default:
			return "", false, fmt.Errorf("CONFIG_TYPE: want FILE or GRPC_XDS_SOTW, got %q", t)
		}
	}},
	{"xds-node-id", []string{"CONFIG_GRPC_XDS_NODE_ID"}, verbatim("CONFIG_GRPC_XDS_NODE_ID")},
	{"xds-node-metadata", []string{"CONFIG_GRPC_XDS_NODE_METADATA"}, verbatim("CONFIG_GRPC_XDS_NODE_METADATA")},
	{"xds-headers", []string{"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"}, func(e *peerEnv) (string, bool, error) {
		v := e.or("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "") // envconfig's map: key:value,key:value
		if v == "" {
			return "", false, nil
		}
		var kvs []string
		all := strings.Split(v, ",")
		for i, kv := range all {
			k, val, ok := strings.Cut(kv, ":")
			if !ok { // not quoted: it may be a piece of a header's secret value
				return "", false, fmt.Errorf("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS: want key:value,key:value; element %d of %d has no ':'", i+1, len(all))
			}
			kvs = append(kvs, k+"="+val)
		}
		return strings.Join(kvs, ","), true, nil
	}},
	{"xds-tls", []string{"CONFIG_GRPC_XDS_SERVER_USE_TLS"}, boolean("CONFIG_GRPC_XDS_SERVER_USE_TLS")},
	{"xds-tls-ca", []string{"CONFIG_GRPC_XDS_SERVER_TLS_CACERT"}, withTLS("CONFIG_GRPC_XDS_SERVER_USE_TLS", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT")},
	{"xds-tls-cert", []string{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT"}, withTLS("CONFIG_GRPC_XDS_SERVER_USE_TLS", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT")},
	{"xds-tls-key", []string{"CONFIG_GRPC_XDS_CLIENT_TLS_KEY"}, withTLS("CONFIG_GRPC_XDS_SERVER_USE_TLS", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY")},
	{"xds-tls-server-name", []string{"CONFIG_GRPC_XDS_SERVER_TLS_SAN"}, withTLS("CONFIG_GRPC_XDS_SERVER_USE_TLS", "CONFIG_GRPC_XDS_SERVER_TLS_SAN")},
	{"xds-backoff-initial", []string{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL"}, setDuration("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL")},
	{"xds-backoff-max", []string{"XDS_CLIENT_BACKOFF_MAX_INTERVAL"}, setDuration("XDS_CLIENT_BACKOFF_MAX_INTERVAL")},
	{"xds-backoff-random-factor", []string{"XDS_CLIENT_BACKOFF_RANDOM_FACTOR"}, verbatim("XDS_CLIENT_BACKOFF_RANDOM_FACTOR")},
	{"xds-backoff-no-jitter", []string{"XDS_CLIENT_BACKOFF_JITTER"}, func(e *peerEnv) (string, bool, error) {
		jitter, err := e.boolean("XDS_CLIENT_BACKOFF_JITTER")
		return strconv.FormatBool(!jitter), e.has("XDS_CLIENT_BACKOFF_JITTER"), err
	}},
	{"xds-connect-retry-interval", []string{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL"}, setDuration("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL")},
	{"xds-max-message-bytes", []string{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"}, func(e *peerEnv) (string, bool, error) {
		v := e.or("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "")
		if v == "" {
			return "", false, nil
		}
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return "", false, fmt.Errorf("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES: want a number of bytes, got %q", v)
		}
		return v, true, nil
	}},
	// The peer: healthy before the first rules with FORCE_START_WITHOUT_INITIAL_CONFIG, unless
	// HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED.
	{"ready-without-rules", []string{"FORCE_START_WITHOUT_INITIAL_CONFIG", "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED"}, func(e *peerEnv) (string, bool, error) {
		force, err := e.boolean("FORCE_START_WITHOUT_INITIAL_CONFIG")
		if err != nil {
			return "", false, err
		}
		healthyAfter, err := e.boolean("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED")
		return strconv.FormatBool(force && !healthyAfter), e.has("FORCE_START_WITHOUT_INITIAL_CONFIG"), err
	}},
	{"tls-cert", []string{"GRPC_SERVER_USE_TLS", "GRPC_SERVER_TLS_CERT"}, func(e *peerEnv) (string, bool, error) {
		on, err := e.boolean("GRPC_SERVER_USE_TLS")
		if err != nil || !on {
			return "", false, err
		}
		if !e.has("GRPC_SERVER_TLS_CERT") || !e.has("GRPC_SERVER_TLS_KEY") {
			return "", false, errors.New("GRPC_SERVER_USE_TLS=true: GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY are both required")
		}
		return e.or("GRPC_SERVER_TLS_CERT", ""), true, nil
	}},
	{"tls-key", []string{"GRPC_SERVER_TLS_KEY"}, withTLS("GRPC_SERVER_USE_TLS", "GRPC_SERVER_TLS_KEY")},
	// The peer reads its client CA from GRPC_CLIENT_TLS_CACERT; Envoy Gateway sets
	// GRPC_SERVER_TLS_CA_CERT: either requires client certificates.
	{"tls-client-ca", []string{"GRPC_CLIENT_TLS_CACERT", "GRPC_SERVER_TLS_CA_CERT"}, func(e *peerEnv) (string, bool, error) {
		on, err := e.boolean("GRPC_SERVER_USE_TLS")
		if err != nil || !on {
			return "", false, err
		}
		a, b := e.or("GRPC_CLIENT_TLS_CACERT", ""), e.or("GRPC_SERVER_TLS_CA_CERT", "")
		if a != "" && b != "" && a != b {
			return "", false, fmt.Errorf("GRPC_CLIENT_TLS_CACERT=%s and GRPC_SERVER_TLS_CA_CERT=%s: two client CA files; set one", a, b)
		}
		if a == "" {
			a = b
		}
		return a, a != "", nil
	}},
	{"tls-client-san", []string{"GRPC_CLIENT_TLS_SAN"}, withTLS("GRPC_SERVER_USE_TLS", "GRPC_CLIENT_TLS_SAN")},
}

func init() { peerFlags = append(peerFlags, peerSourceFlags...) }

// withTLS maps name verbatim when the boolean variable on is true, as the peer reads its TLS
// files only then.
func withTLS(on, name string) func(e *peerEnv) (string, bool, error) {
	return func(e *peerEnv) (string, bool, error) {
		b, err := e.boolean(on)
		if err != nil || !b {
			return "", false, err
		}
		return verbatim(name)(e)
	}
}

// setDuration maps a duration variable when it is set.
func setDuration(name string) func(e *peerEnv) (string, bool, error) {
	return func(e *peerEnv) (string, bool, error) {
		v := e.or(name, "")
		if v == "" {
			return "", false, nil
		}
		if _, err := time.ParseDuration(v); err != nil {
			return "", false, fmt.Errorf("%s: want a duration like 10s, got %q", name, v)
		}
		return v, true, nil
	}
}
