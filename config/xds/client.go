package xds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/cenkalti/backoff/v5"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/certfile"
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
	// DefaultMaxMessageBytes bounds a snapshot when Options.MaxMessageBytes is 0: 64 MiB,
	// sixteen times gRPC's default of 4 MiB (a snapshot of 100,000 limits takes about 5 MB).
	DefaultMaxMessageBytes = 64 << 20
)

// The errors of snapshots refused whatever their rules (each is NACKed, and the rules in
// force stay).
var (
	// ErrEmptySnapshot: a snapshot with no RateLimitConfig would remove every limit in
	// force (Options.AllowEmpty applies it).
	ErrEmptySnapshot = errors.New("xds: empty snapshot refused")
	// ErrSnapshotTooLarge: a snapshot larger than Options.MaxMessageBytes.
	ErrSnapshotTooLarge = errors.New("xds: snapshot too large")
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
	TLS *ClientTLS
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
	// MaxMessageBytes bounds a snapshot (default DefaultMaxMessageBytes): a larger one is
	// NACKed, naming its size and this bound, and the rules in force stay; the stream stays
	// open, so the snapshot is not fetched again until the server sends another version. So
	// that it can be NACKed, a response of up to twice the bound is received; a larger one
	// ends the stream (gRPC refuses it), which is logged as an error naming the bound, and the
	// client reconnects after MaxBackoff.
	MaxMessageBytes int
	// AllowEmpty applies a snapshot with no RateLimitConfig that would remove every limit in
	// force (the rules of an earlier snapshot), as envoyproxy/ratelimit does. By default it is
	// refused: NACKed, logged as an error, and the rules in force keep serving, so that a
	// control plane that lost its state does not silently lift every limit. An empty first
	// snapshot, with nothing in force to remove, is applied either way.
	AllowEmpty bool
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
	if o.MaxMessageBytes == 0 {
		o.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if o.TLS != nil {
		t := *o.TLS // the caller's TLS is not written to
		if err := t.load(); err != nil {
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
	var inForce snapshotState
	for {
		delivered, err := c.stream(ctx, &inForce, apply, reject)
		if ctx.Err() != nil {
			return
		}
		if delivered {
			b.Reset()
		}
		wait := b.NextBackOff()
		if status.Code(err) == codes.ResourceExhausted {
			wait = c.opts.MaxBackoff // the same response would come again at once
			c.log.Error("xds: the xDS server sent a response too large to receive (more than twice the max message bytes); the rules in force stay. "+
				"Raise the max message bytes (--xds-max-message-bytes) to apply it", "server", redact.Setting(c.opts.Server, true), "max_message_bytes", c.opts.MaxMessageBytes, "err", err, "reconnect_in", wait)
		}
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
func (c *Client) stream(ctx context.Context, inForce *snapshotState, apply func(*config.Config), reject func(error)) (delivered bool, err error) {
	conn, err := grpc.NewClient(c.opts.Server, c.dialOptions()...)
	if err != nil {
		return false, fmt.Errorf("xds: server %s: %w", c.opts.Server, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if len(c.opts.Headers) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, metadata.New(c.opts.Headers))
	}
	ads, err := openADS(ctx, conn, c.node)
	if err != nil {
		return false, fmt.Errorf("xds: server %s: %w", c.opts.Server, err)
	}
	var again refusal // the last version refused, which the server may send again at once
	for {
		resp, err := ads.recv()
		if err != nil {
			return delivered, fmt.Errorf("xds: server %s: %w", c.opts.Server, err)
		}
		delivered = true
		if again.is(resp) { // refused already: NACK again, after a growing wait
			if err := again.wait(ctx, c.log); err != nil {
				return delivered, err
			}
			if err := ads.nack(resp, again.msg); err != nil {
				return delivered, fmt.Errorf("xds: NACK: %w", err)
			}
			continue
		}
		cfg, err := c.compile(resp.GetResources(), inForce)
		if err != nil {
			reject(err)
			again = c.refused(resp, nackMessage(err))
			if err := ads.nack(resp, again.msg); err != nil {
				return delivered, fmt.Errorf("xds: NACK: %w", err)
			}
			continue
		}
		again = refusal{}
		apply(cfg)
		inForce.domains = len(cfg.Domains())
		if err := ads.ack(resp); err != nil {
			return delivered, fmt.Errorf("xds: ACK: %w", err)
		}
	}
}

// refusal is a version of the server's snapshot the client refused. A NACK names the version
// applied before, so a server that answers every request whose version differs from its own
// (go-control-plane's snapshot cache, which Envoy Gateway serves from) sends the refused
// version again at once: the client NACKs it again only after a wait that doubles from
// InitialBackoff to MaxBackoff, so a refused snapshot is not fetched in a loop. The server
// answers the next request with its newest version, which a fix of the rules then is.
type refusal struct {
	version string
	msg     string
	b       *backoff.ExponentialBackOff // nil: no refusal
}

func (c *Client) refused(resp *discovery.DiscoveryResponse, msg string) refusal {
	b := &backoff.ExponentialBackOff{InitialInterval: c.opts.InitialBackoff, RandomizationFactor: c.opts.BackoffRandomFactor,
		Multiplier: 2, MaxInterval: c.opts.MaxBackoff}
	b.Reset()
	return refusal{version: resp.GetVersionInfo(), msg: msg, b: b}
}

// is reports whether resp is the refused version again.
func (r *refusal) is(resp *discovery.DiscoveryResponse) bool {
	return r.b != nil && resp.GetVersionInfo() == r.version
}

// wait waits before the refused version is NACKed again; an error when ctx ends.
func (r *refusal) wait(ctx context.Context, log *slog.Logger) error {
	d := r.b.NextBackOff()
	log.Warn("xds: the server sent a refused snapshot again; NACKing it again after a wait (the rules in force stay)",
		"version", r.version, "in", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// snapshotState is what the client applied last, across its streams.
type snapshotState struct {
	domains int // of the last snapshot applied
}

// compile checks a snapshot's size and emptiness, then compiles it (Compile).
func (c *Client) compile(resources []*anypb.Any, inForce *snapshotState) (*config.Config, error) {
	size := 0
	for _, r := range resources {
		size += proto.Size(r)
	}
	switch {
	case size > c.opts.MaxMessageBytes:
		return nil, fmt.Errorf("%w: %d bytes, more than the max message bytes, %d; the rules in force stay (raise --xds-max-message-bytes to apply it)",
			ErrSnapshotTooLarge, size, c.opts.MaxMessageBytes)
	case len(resources) == 0 && inForce.domains > 0 && !c.opts.AllowEmpty:
		return nil, fmt.Errorf("%w: it has no RateLimitConfig and would remove every limit of the %d domains in force; the rules in force stay "+
			"(--xds-allow-empty applies such a snapshot)", ErrEmptySnapshot, inForce.domains)
	}
	return Compile(c.opts.Rules, resources)
}

func nackMessage(err error) string {
	msg := err.Error()
	if len(msg) > maxNackBytes {
		msg = msg[:maxNackBytes] + "..."
	}
	return msg
}

func (c *Client) dialOptions() []grpc.DialOption {
	creds := insecure.NewCredentials()
	if c.opts.TLS != nil {
		creds = credentials.NewTLS(c.opts.TLS.config())
	}
	bc := grpcbackoff.DefaultConfig
	bc.BaseDelay = c.opts.ConnectRetryInterval
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: 20 * time.Second}),
	}
	// twice the bound, so that a snapshot above it is received and NACKed (compile)
	opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(int(min(2*int64(c.opts.MaxMessageBytes), math.MaxInt32)))))
	return opts
}

// ClientTLS secures the connection to the xDS server. The files are read again when they
// change (internal/certfile, as a shared store's store.ClientTLS): the CA bundle at the next
// connection, the key pair at the next handshake; a rotated file that does not load keeps the previous one.
type ClientTLS struct {
	// CAFile is a PEM bundle of the CAs the server's certificate must chain to (the peer's
	// CONFIG_GRPC_XDS_SERVER_TLS_CACERT); empty: the system's roots.
	CAFile string
	// CertFile and KeyFile are the client certificate for mutual TLS (the peer's
	// CONFIG_GRPC_XDS_CLIENT_TLS_CERT and _KEY); both or neither.
	CertFile, KeyFile string
	// ServerName is the name the server's certificate must carry (the peer's
	// CONFIG_GRPC_XDS_SERVER_TLS_SAN); empty: the host of Server.
	ServerName string

	files *certfile.Client // read by New
}
