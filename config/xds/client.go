package xds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v5"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/client/sotw/v3"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/redact"
)

// Defaults of Options' zero values: envoyproxy/ratelimit's (CONFIG_GRPC_XDS_NODE_ID,
// XDS_CLIENT_BACKOFF_*, CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL).
const (
	DefaultNodeID               = "default"
	DefaultInitialBackoff       = 10 * time.Second
	DefaultMaxBackoff           = 60 * time.Second
	DefaultBackoffRandomFactor  = 0.5
	DefaultConnectRetryInterval = 3 * time.Second
)

// maxNackBytes bounds the error message sent back with a NACK.
const maxNackBytes = 4 << 10

// Options configure a Client. The zero value of every field but Server is a documented
// default.
type Options struct {
	// Server is the xDS server's address, host:port (or any gRPC target). Required.
	Server string
	// NodeID identifies this instance to the server, which keys its snapshots by it (default
	// DefaultNodeID); NodeMetadata is sent as the node's metadata (string values).
	NodeID       string
	NodeMetadata map[string]string
	// Headers are added as gRPC metadata to the stream (the peer's
	// CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS).
	Headers map[string]string
	// TLS, when not nil, secures the connection (see ClientTLS); nil is plain text.
	TLS *TLS
	// InitialBackoff and MaxBackoff bound the wait before reconnecting after the stream is
	// lost (defaults DefaultInitialBackoff and DefaultMaxBackoff): it doubles from the first
	// to the second, and starts again from the first once a stream delivered a snapshot.
	// BackoffRandomFactor spreads each wait by up to that share either way (default
	// DefaultBackoffRandomFactor); NoJitter makes the waits exact.
	InitialBackoff, MaxBackoff time.Duration
	BackoffRandomFactor        float64
	NoJitter                   bool
	// ConnectRetryInterval is the first delay of gRPC's own reconnection of the channel
	// (default DefaultConnectRetryInterval).
	ConnectRetryInterval time.Duration
	// MaxMessageBytes bounds a response from the server (0: gRPC's default, 4 MiB).
	MaxMessageBytes int
	// Rules say how the snapshot's rules are compiled (default algorithm, merged domains),
	// as for rules files.
	Rules config.Options
	// Logger receives the connection's and the snapshots' lines (default: discard).
	Logger *slog.Logger
}

// Client follows the RateLimitConfig resources of an xDS server. It is an rls.RulesSource:
// Run delivers each valid snapshot. A Client is safe for concurrent use; Run may run once at
// a time.
type Client struct {
	opts Options
	log  *slog.Logger
	node *core.Node
}

// New checks o, reads the TLS files (an error names the file) and returns a Client; nothing
// is dialled before Run.
func New(o Options) (*Client, error) {
	if o.Server == "" {
		return nil, errors.New("xds: server: empty (want host:port of the xDS server)")
	}
	if o.NodeID == "" {
		o.NodeID = DefaultNodeID
	}
	switch {
	case o.InitialBackoff < 0:
		return nil, fmt.Errorf("xds: initial backoff: must not be negative, got %v", o.InitialBackoff)
	case o.MaxBackoff < 0:
		return nil, fmt.Errorf("xds: max backoff: must not be negative, got %v", o.MaxBackoff)
	case o.BackoffRandomFactor < 0 || o.BackoffRandomFactor >= 1:
		return nil, fmt.Errorf("xds: backoff random factor: must be in [0, 1), got %v", o.BackoffRandomFactor)
	case o.MaxMessageBytes < 0:
		return nil, fmt.Errorf("xds: max message bytes: must not be negative, got %d", o.MaxMessageBytes)
	}
	if o.InitialBackoff == 0 {
		o.InitialBackoff = DefaultInitialBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = max(DefaultMaxBackoff, o.InitialBackoff)
	}
	if o.MaxBackoff < o.InitialBackoff {
		return nil, fmt.Errorf("xds: max backoff %v is less than the initial backoff %v", o.MaxBackoff, o.InitialBackoff)
	}
	if o.BackoffRandomFactor == 0 {
		o.BackoffRandomFactor = DefaultBackoffRandomFactor
	}
	if o.NoJitter {
		o.BackoffRandomFactor = 0
	}
	if o.ConnectRetryInterval <= 0 {
		o.ConnectRetryInterval = DefaultConnectRetryInterval
	}
	if o.TLS != nil {
		t := *o.TLS // the caller's TLS is not written to
		t.files = &tlsFiles{}
		if _, err := t.config(); err != nil {
			return nil, err
		}
		o.TLS = &t
	}
	c := &Client{opts: o, log: o.Logger}
	if c.log == nil {
		c.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	md := make(map[string]*structpb.Value, len(o.NodeMetadata))
	for k, v := range o.NodeMetadata {
		md[k] = structpb.NewStringValue(v)
	}
	c.node = &core.Node{Id: o.NodeID, Metadata: &structpb.Struct{Fields: md}, UserAgentName: "sluice"}
	return c, nil
}

// Run follows the server until ctx is done: each valid snapshot is passed to apply and
// ACKed, each invalid one is passed to reject and NACKed (the rules in force stay). A lost
// or refused connection (an untrusted server among them) is retried after a backoff.
func (c *Client) Run(ctx context.Context, apply func(*config.Config), reject func(error)) {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     c.opts.InitialBackoff,
		RandomizationFactor: c.opts.BackoffRandomFactor,
		Multiplier:          2,
		MaxInterval:         c.opts.MaxBackoff,
	}
	b.Reset()
	for {
		delivered, err := c.stream(ctx, apply, reject)
		if ctx.Err() != nil {
			return
		}
		if delivered {
			b.Reset()
		}
		wait := b.NextBackOff()
		c.log.Warn("xds: stream to the xDS server lost; reconnecting", "server", redact.Setting(c.opts.Server, true), "err", err, "in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// stream runs one ADS stream until it fails; delivered reports whether it received a
// snapshot.
func (c *Client) stream(ctx context.Context, apply func(*config.Config), reject func(error)) (delivered bool, err error) {
	opts, err := c.dialOptions()
	if err != nil {
		return false, err
	}
	conn, err := grpc.NewClient(c.opts.Server, opts...)
	if err != nil {
		return false, fmt.Errorf("xds: server %s: %w", c.opts.Server, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if len(c.opts.Headers) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, metadata.New(c.opts.Headers))
	}
	ads := sotw.NewADSClient(ctx, c.node, TypeURL)
	if err := ads.InitConnect(conn); err != nil {
		return false, fmt.Errorf("xds: server %s: %w", c.opts.Server, err)
	}
	for {
		resp, err := ads.Fetch()
		if err != nil {
			return delivered, fmt.Errorf("xds: server %s: %w", c.opts.Server, err)
		}
		delivered = true
		cfg, err := Compile(c.opts.Rules, resp.Resources)
		if err != nil {
			reject(err)
			if err := ads.Nack(nackMessage(err)); err != nil {
				return delivered, fmt.Errorf("xds: NACK: %w", err)
			}
			continue
		}
		apply(cfg)
		if err := ads.Ack(); err != nil {
			return delivered, fmt.Errorf("xds: ACK: %w", err)
		}
	}
}

func nackMessage(err error) string {
	msg := err.Error()
	if len(msg) > maxNackBytes {
		msg = msg[:maxNackBytes] + "..."
	}
	return msg
}

func (c *Client) dialOptions() ([]grpc.DialOption, error) {
	creds := insecure.NewCredentials()
	if c.opts.TLS != nil {
		tc, err := c.opts.TLS.config()
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(tc)
	}
	bc := grpcbackoff.DefaultConfig
	bc.BaseDelay = c.opts.ConnectRetryInterval
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: 20 * time.Second}),
	}
	if c.opts.MaxMessageBytes > 0 {
		opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(c.opts.MaxMessageBytes)))
	}
	return opts, nil
}

// TLS secures the connection to the xDS server. The files are read again when they change
// (at the next connection for the CA bundle, at the next handshake for the key pair).
type TLS struct {
	// CAFile is a PEM bundle of the CAs the server's certificate must chain to (the peer's
	// CONFIG_GRPC_XDS_SERVER_TLS_CACERT); empty: the system's roots.
	CAFile string
	// CertFile and KeyFile are the client certificate for mutual TLS (the peer's
	// CONFIG_GRPC_XDS_CLIENT_TLS_CERT and _KEY); both or neither.
	CertFile, KeyFile string
	// ServerName is the name the server's certificate must carry (the peer's
	// CONFIG_GRPC_XDS_SERVER_TLS_SAN); empty: the host of Server.
	ServerName string

	files *tlsFiles
}
