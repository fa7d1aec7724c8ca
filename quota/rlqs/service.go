package rlqs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/logthrottle"
)

// Config configures a Service. The zero value of every field is a documented default.
type Config struct {
	// Rules returns the rules in force (called per report, so reloads apply at once). Nil:
	// no rules, so that no bucket gets an assignment (each is counted as Uncovered).
	Rules func() *config.Config
	// Ledger holds the allocation state (default NewMemoryLedger(): this replica alone).
	Ledger Ledger
	// Clock tells the time (default sluice.SystemClock).
	Clock sluice.Clock
	// Logger receives stream rejections and state errors (rate-limited); default discard.
	Logger *slog.Logger
	// MaxBuckets bounds the buckets of one stream (default DefaultMaxBuckets);
	// MaxBucketEntries the entries of a bucket id (default DefaultMaxBucketEntries);
	// MaxBucketIDBytes the bytes of its keys and values (default DefaultMaxBucketIDBytes);
	// MaxStreams the streams open at once (default DefaultMaxStreams);
	// MaxStreamsPerClient those of one client (ClientKey; default DefaultMaxStreamsPerClient).
	MaxBuckets, MaxBucketEntries, MaxBucketIDBytes, MaxStreams, MaxStreamsPerClient int
	// MaxBucketMemory bounds the memory of the bucket ids of every stream as a whole, in
	// bytes (default DefaultMaxBucketMemory): each distinct id is stored once and charged
	// about three times its bytes, each subscription of a stream to a bucket a fixed part; a
	// report that would subscribe past it ends its stream with RESOURCE_EXHAUSTED.
	MaxBucketMemory int64
	// StreamIdleTimeout closes a stream that sends no report for that long (default
	// DefaultStreamIdleTimeout), with DEADLINE_EXCEEDED.
	StreamIdleTimeout time.Duration
	// ClientKey names the client a stream counts against for MaxStreamsPerClient (default
	// PeerIdentity(IPv6Prefix): the verified client certificate's identity, else the peer's
	// IP address, an IPv6 one grouped by its prefix).
	ClientKey func(ctx context.Context) string
	// IPv6Prefix is how many leading bits of an IPv6 peer address name its client under the
	// default ClientKey (default DefaultIPv6Prefix, a /64), so one host cannot take the
	// streams of many clients by its addresses.
	IPv6Prefix int
	// NewcomerStreams is how many of MaxStreams are kept for clients with no stream open
	// (default DefaultNewcomerStreams percent of MaxStreams; negative: none), so the clients
	// already served, however many addresses they hold, never take the whole cap from one
	// not yet seen.
	NewcomerStreams int
	// AbandonAfter is how long a bucket may report no requests before it is abandoned,
	// when its rule does not say (default DefaultAbandonAfter).
	AbandonAfter time.Duration
	// Observer is told what the service does, for metrics (default: nothing). A Ledger made
	// by NewRedisLedger reports its transaction retries to it too.
	Observer Observer
	// Tracer, when set, records each usage report in a span (ReportSpan), a child of the
	// trace context of the stream's context. Nil: no spans.
	Tracer trace.Tracer
	// AnswerWait bounds how long the answer to a report waits for a share still held by
	// other clients whose shrinks are being delivered (default DefaultAnswerWait): a
	// newcomer is handed only what is free, and the rest once the others' shrinks are sent,
	// which takes milliseconds; the answer waits for it rather than hand a zero share
	// (DENY_ALL) first. Past the wait the answer goes with what is free, and the rest
	// follows as a push.
	AnswerWait time.Duration
}

// DefaultAnswerWait is Config.AnswerWait's default.
const DefaultAnswerWait = 250 * time.Millisecond

// Service implements RateLimitQuotaService. Build it with New; it is safe for concurrent
// use.
type Service struct {
	rlqspb.UnimplementedRateLimitQuotaServiceServer
	rules                                     func() *config.Config
	ledger                                    Ledger
	clock                                     sluice.Clock
	log                                       *slog.Logger
	obs                                       Observer
	tracer                                    trace.Tracer
	maxBuckets, maxEntries, maxIDBytes, maxSt int
	maxPerClient, newcomers                   int
	abandonAfter, idleTimeout, answerWait     time.Duration
	clientKey                                 func(context.Context) string
	ids                                       *idTable
	prefix                                    string // this replica's part of client ids
	seq                                       atomic.Uint64
	errLog, uncoveredLog, endLog              logthrottle.Throttle
	unknownClass                              sync.Once // logs the first unknown criticality class

	mu        sync.Mutex
	streams   map[*stream]struct{}
	perClient map[string]int // streams open by client key
	draining  bool

	timers map[string]*rebalanceTimer // by bucket key: recomputations due at leavers' expiries (push.go), under mu

	regMu   sync.RWMutex
	holders map[holder]*sub // the subs of this replica by client record, for pushes
}

// replicaIDBytes is the size of a replica's random id, the prefix of its client ids.
const replicaIDBytes = 6

// New returns a Service over cfg.
func New(cfg Config) *Service {
	s := &Service{rules: cfg.Rules, ledger: cfg.Ledger, clock: cfg.Clock, log: cfg.Logger, obs: cfg.Observer, tracer: cfg.Tracer,
		maxBuckets: orDefault(cfg.MaxBuckets, DefaultMaxBuckets), maxEntries: orDefault(cfg.MaxBucketEntries, DefaultMaxBucketEntries),
		maxIDBytes: orDefault(cfg.MaxBucketIDBytes, DefaultMaxBucketIDBytes), maxSt: orDefault(cfg.MaxStreams, DefaultMaxStreams),
		abandonAfter: cfg.AbandonAfter, streams: make(map[*stream]struct{}),
		maxPerClient: orDefault(cfg.MaxStreamsPerClient, DefaultMaxStreamsPerClient), idleTimeout: cfg.StreamIdleTimeout,
		clientKey: cfg.ClientKey, perClient: make(map[string]int), holders: make(map[holder]*sub), timers: make(map[string]*rebalanceTimer)}
	budget := cfg.MaxBucketMemory
	if budget <= 0 {
		budget = DefaultMaxBucketMemory
	}
	s.ids = newIDTable(budget)
	if s.idleTimeout <= 0 {
		s.idleTimeout = DefaultStreamIdleTimeout
	}
	if s.answerWait = cfg.AnswerWait; s.answerWait <= 0 {
		s.answerWait = DefaultAnswerWait
	}
	if s.clientKey == nil {
		s.clientKey = PeerIdentity(cfg.IPv6Prefix)
	}
	switch s.newcomers = cfg.NewcomerStreams; {
	case s.newcomers == 0:
		s.newcomers = s.maxSt * DefaultNewcomerStreams / 100
	case s.newcomers < 0:
		s.newcomers = 0
	}
	s.newcomers = min(s.newcomers, s.maxSt-1)
	if s.rules == nil { // no rules: every bucket is uncovered, and said to be
		s.rules = func() *config.Config { return nil }
	}
	if s.ledger == nil {
		s.ledger = NewMemoryLedger()
	}
	if s.clock == nil {
		s.clock = sluice.SystemClock{}
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	if o, ok := s.ledger.(observedLedger); ok {
		o.observe(s.obs)
	}
	if s.abandonAfter <= 0 {
		s.abandonAfter = DefaultAbandonAfter
	}
	var b [replicaIDBytes]byte
	_, _ = rand.Read(b[:])
	s.prefix = hex.EncodeToString(b[:])
	if l, ok := s.ledger.(sharedLedger); ok {
		l.attach(s.prefix, s.deliverRemote)
	}
	return s
}

func orDefault(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// Register registers the service on g.
func (s *Service) Register(g *grpc.Server) { rlqspb.RegisterRateLimitQuotaServiceServer(g, s) }

// ServiceName is the gRPC service name, for health checks.
const ServiceName = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"

// StreamRateLimitQuotas implements RateLimitQuotaService.
func (s *Service) StreamRateLimitQuotas(srv grpc.BidiStreamingServer[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]) error {
	ctx, cancel := context.WithCancel(srv.Context())
	defer cancel()
	st := newStream(s, s.prefix+"-"+itoa(s.seq.Add(1)))
	st.srv, st.cancel, st.peer = srv, cancel, s.clientKey(srv.Context())
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		return s.rejected(reject(ReasonShutdown, "server shutting down"))
	}
	if r, refused := admit(len(s.streams), s.perClient[st.peer], s.maxSt, s.maxPerClient, s.newcomers); refused {
		s.mu.Unlock()
		switch r {
		case ReasonStreams:
			return s.rejected(reject(r, "%d streams open, the maximum", s.maxSt))
		case ReasonClientStreams:
			return s.rejected(reject(r, "%d streams open from this client, the maximum", s.maxPerClient))
		default:
			return s.rejected(reject(r, "the last %d of %d streams are kept for clients with none open", s.newcomers, s.maxSt))
		}
	}
	s.streams[st] = struct{}{}
	s.perClient[st.peer]++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.streams, st)
		if s.perClient[st.peer]--; s.perClient[st.peer] <= 0 {
			delete(s.perClient, st.peer)
		}
		s.mu.Unlock()
		st.leaveAll()
	}()
	err := st.run(ctx)
	s.rejected(err)
	if err != nil && status.Code(err) != codes.Canceled {
		// At most one line a second (a storm of streams ending is one line and a count).
		s.endLog.Log(context.Background(), s.log, s.clock.Now(), slog.LevelInfo, "rlqs stream ended",
			slog.String("stream", st.id), slog.String("domain", st.domain), slog.Any("err", err))
	}
	return err
}

// sent tells the observer the kinds of the actions of resp, delivered; push says they
// were pushed (not answers to a report).
func (s *Service) sent(resp *rlqspb.RateLimitQuotaResponse, push bool) {
	var n [numActionKinds]int
	for _, a := range resp.BucketAction {
		switch q := a.GetQuotaAssignmentAction(); {
		case q == nil:
			n[ActionAbandon]++
		case q.GetAssignmentTimeToLive().AsDuration() == 0:
			n[ActionExpire]++
		case push:
			n[ActionPush]++
		default:
			n[ActionAssignment]++
		}
	}
	for k, c := range n {
		if c > 0 {
			s.obs.Sent(ActionKind(k), c)
		}
	}
}

// rejected tells the observer when err is a rejection, and returns err.
func (s *Service) rejected(err error) error {
	var r *rejection
	if errors.As(err, &r) {
		s.obs.Rejected(r.reason)
	}
	return err
}

// Drain expires every assignment of every open stream (TTL 0), so that clients fall back
// to their expired-assignment behaviour at once, and ends the streams with Unavailable;
// new streams are refused. Call it before a planned stop (Server does, before its
// graceful stop).
func (s *Service) Drain() {
	s.mu.Lock()
	s.draining = true
	for _, t := range s.timers {
		t.Stop()
	}
	clear(s.timers)
	streams := make([]*stream, 0, len(s.streams))
	for st := range s.streams {
		streams = append(streams, st)
	}
	s.mu.Unlock()
	for _, st := range streams {
		st.expireAll()
		st.cancel()
	}
}

// Streams returns the number of open streams.
func (s *Service) Streams() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams)
}

// stateError counts a state failure, and logs it at most once a second (internal/logthrottle:
// the lines held back are counted in the next one's "suppressed"). A call cut short because
// its stream ended (ctx done: the client cancelled or went away) is not a state failure.
func (s *Service) stateError(ctx context.Context, err error) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return
	}
	s.obs.StateError()
	s.errLog.Log(context.Background(), s.log, time.Now(), slog.LevelError,
		"rlqs: quota state unavailable; clients keep their assignments until they expire", slog.Any("err", err))
}

// uncovered counts a bucket usage no quota rule covers, and logs it at most once a second.
// The bucket id's values and an undefined domain come from the client: only the id's keys,
// and a domain the rules define, are logged.
func (s *Service) uncovered(defined bool, domain string, id map[string]string) {
	if !defined {
		domain = ""
	}
	s.obs.Uncovered(domain)
	suppressed, ok := s.uncoveredLog.Allow(s.clock.Now())
	if !ok {
		return
	}
	keys := make([]string, 0, len(id))
	for k := range id {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := []any{"domain", domain, "domain_defined", defined, "bucket_keys", keys}
	if suppressed > 0 {
		attrs = append(attrs, logthrottle.SuppressedKey, suppressed)
	}
	s.log.Warn("rlqs: no quota rule covers a reported bucket: the client gets no assignment and decides by its no-assignment behaviour", attrs...)
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
