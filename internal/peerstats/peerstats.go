// Package peerstats sends envoyproxy/ratelimit's statsd stats, which package rls counts in a
// gostats store (rls.Config.PeerStats), where the peer sends them: to a statsd server
// (USE_STATSD, STATSD_HOST, STATSD_PORT, STATSD_PROTOCOL, every STATS_FLUSH_INTERVAL) and,
// with a statsd_exporter mapping file (PROMETHEUS_MAPPER_YAML), into Prometheus series named
// by that mapping, as the peer's Prometheus sink makes them.
//
// The stats are sent by github.com/lyft/gostats, the peer's own statsd client, and mapped by
// github.com/prometheus/statsd_exporter's mapper and exporter, as in the peer.
package peerstats

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gostats "github.com/lyft/gostats"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/statsd_exporter/pkg/event"
	"github.com/prometheus/statsd_exporter/pkg/exporter"
	"github.com/prometheus/statsd_exporter/pkg/mapper"
)

// DefaultFlushInterval is the peer's STATS_FLUSH_INTERVAL default.
const DefaultFlushInterval = 10 * time.Second

// Config says where the stats go. The zero value sends them nowhere.
type Config struct {
	// StatsdAddr is the statsd server, host:port; "" sends no statsd.
	StatsdAddr string
	// StatsdProtocol is tcp (the peer's default, through gostats) or udp.
	StatsdProtocol string
	// FlushInterval is how often the counters are sent; DefaultFlushInterval when 0.
	FlushInterval time.Duration
	// MapperFile is a statsd_exporter mapping file, read as the peer's statsd_exporter v0.26.1
	// reads it (mapping.go); "" maps nothing.
	MapperFile string
	// Logger gets the statsd client's errors and what the mapping file holds that v0.26.1
	// read differently (ignored keys, legacy fields); nil discards them.
	Logger *slog.Logger
}

// Stats is the running store and its sinks. Close it to send the last counts.
type Stats struct {
	// Store is the gostats store for rls.Config.PeerStats.
	Store gostats.Store
	// Mapped holds the series of the mapping file (nil without one).
	Mapped *prometheus.Registry

	ticker *time.Ticker
	done   chan struct{}
	events chan event.Events
	once   sync.Once
	wg     sync.WaitGroup
	closed atomic.Bool // the statsd client's log is closed
}

// Start checks c, opens its sinks and starts flushing every c.FlushInterval. It returns nil,
// nil when c sends nowhere.
func Start(c Config) (*Stats, error) {
	if c.StatsdAddr == "" && c.MapperFile == "" {
		return nil, nil
	}
	if c.FlushInterval < 0 {
		return nil, fmt.Errorf("peerstats: flush interval: must not be negative, got %v", c.FlushInterval)
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	s := &Stats{done: make(chan struct{})}
	var sinks multiSink
	if c.StatsdAddr != "" {
		if err := checkStatsd(c); err != nil {
			return nil, err
		}
		sinks = append(sinks, &lazySink{open: func() gostats.FlushableSink { sink, _ := statsdSink(c, &s.closed); return sink }})
	}
	if c.MapperFile != "" {
		m, ignored, upgraded, err := loadMapping(c.MapperFile)
		if err != nil {
			return nil, fmt.Errorf("peerstats: mapping file %s: %w", c.MapperFile, err)
		}
		if log := c.Logger; log != nil && len(ignored) > 0 {
			log.Warn("mapping file: keys ignored, as the peer's statsd_exporter v0.26.1 ignores them", "file", c.MapperFile, "keys", ignored)
		}
		if log := c.Logger; log != nil && len(upgraded) > 0 {
			log.Info("mapping file: fields of statsd_exporter v0.26.1 (the peer's) read as it reads them", "file", c.MapperFile, "fields", upgraded)
		}
		s.Mapped = prometheus.NewRegistry()
		m.Registerer = s.Mapped
		exp := newExporter(s.Mapped, m)
		s.events = make(chan event.Events, 64)
		s.wg.Add(1)
		go func() { defer s.wg.Done(); exp.Listen(s.events) }()
		sinks = append(sinks, eventSink{s.events})
	}
	s.Store = gostats.NewStore(sinks, false)
	s.ticker = time.NewTicker(c.FlushInterval)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.ticker.C:
				s.Store.Flush()
			case <-s.done:
				return
			}
		}
	}()
	return s, nil
}

// Close stops the flushing, sends the last counts and waits for the mapping to take them.
// A nil Stats is closed.
func (s *Stats) Close() {
	if s == nil {
		return
	}
	s.once.Do(func() {
		s.ticker.Stop()
		close(s.done)
		s.Store.Flush()
		if s.events != nil {
			close(s.events)
		}
		s.wg.Wait()
		s.closed.Store(true)
	})
}

// checkStatsd checks the statsd settings of c.
func checkStatsd(c Config) error {
	_, err := statsdSink(c, nil)
	return err
}

// statsdSink is gostats' statsd client for c; with closed nil, only c is checked.
func statsdSink(c Config, closed *atomic.Bool) (gostats.FlushableSink, error) {
	host, portText, err := net.SplitHostPort(c.StatsdAddr)
	if err != nil {
		return nil, fmt.Errorf("peerstats: statsd address: want host:port, got %q", c.StatsdAddr)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("peerstats: statsd port: want 1 to 65535, got %q", portText)
	}
	proto := strings.ToLower(c.StatsdProtocol)
	switch proto {
	case "":
		proto = "tcp"
	case "tcp", "udp":
	default:
		return nil, fmt.Errorf("peerstats: statsd protocol: want tcp or udp, got %q", c.StatsdProtocol)
	}
	if closed == nil {
		return nil, nil
	}
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return gostats.NewNetSink(gostats.WithStatsdHost(host), gostats.WithStatsdPort(port),
		gostats.WithStatsdProtocol(proto), gostats.WithLogger(slogLogger{log, closed})), nil
}

// slogLogger gives gostats' errors to slog until closed: gostats' statsd client has no Close,
// its goroutine outlives the Stats (idle once nothing more is sent), and must not write to a
// log its caller may have closed.
type slogLogger struct {
	log    *slog.Logger
	closed *atomic.Bool
}

func (l slogLogger) Errorf(msg string, args ...any) {
	if !l.closed.Load() {
		l.log.Error("statsd: " + fmt.Sprintf(msg, args...))
	}
}

func (l slogLogger) Warnf(msg string, args ...any) {
	if !l.closed.Load() {
		l.log.Warn("statsd: " + fmt.Sprintf(msg, args...))
	}
}

// lazySink opens the statsd client when it first has something to send: the client dials at
// once and logs when it cannot, which a serve that fails to start must not do.
type lazySink struct {
	open func() gostats.FlushableSink
	mu   sync.Mutex
	sink gostats.FlushableSink
}

// get returns the client, opening it first if need be; with open false, nil when it is not.
func (l *lazySink) get(open bool) gostats.FlushableSink {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sink == nil && open {
		l.sink = l.open()
	}
	return l.sink
}

func (l *lazySink) FlushCounter(name string, v uint64) { l.get(true).FlushCounter(name, v) }
func (l *lazySink) FlushGauge(name string, v uint64)   { l.get(true).FlushGauge(name, v) }
func (l *lazySink) FlushTimer(name string, v float64)  { l.get(true).FlushTimer(name, v) }

// Flush flushes the client, if it is open.
func (l *lazySink) Flush() {
	if s := l.get(false); s != nil {
		s.Flush()
	}
}

// multiSink sends every stat to each of its sinks.
type multiSink []gostats.Sink

func (m multiSink) FlushCounter(name string, v uint64) {
	for _, s := range m {
		s.FlushCounter(name, v)
	}
}

func (m multiSink) FlushGauge(name string, v uint64) {
	for _, s := range m {
		s.FlushGauge(name, v)
	}
}

func (m multiSink) FlushTimer(name string, v float64) {
	for _, s := range m {
		s.FlushTimer(name, v)
	}
}

// Flush flushes the sinks that buffer (the statsd client).
func (m multiSink) Flush() {
	for _, s := range m {
		if f, ok := s.(gostats.FlushableSink); ok {
			f.Flush()
		}
	}
}

// eventSink hands the stats to statsd_exporter's exporter, as the peer's Prometheus sink does.
type eventSink struct{ events chan<- event.Events }

func (e eventSink) FlushCounter(name string, v uint64) {
	e.events <- event.Events{&event.CounterEvent{CMetricName: name, CValue: float64(v), CLabels: map[string]string{}}}
}

func (e eventSink) FlushGauge(name string, v uint64) {
	e.events <- event.Events{&event.GaugeEvent{GMetricName: name, GValue: float64(v), GLabels: map[string]string{}}}
}

func (e eventSink) FlushTimer(name string, v float64) {
	e.events <- event.Events{&event.ObserverEvent{OMetricName: name, OValue: v, OLabels: map[string]string{}}}
}

// newExporter is statsd_exporter's exporter over reg, with its own bookkeeping series.
func newExporter(reg *prometheus.Registry, m *mapper.MetricMapper) *exporter.Exporter {
	counterVec := func(name, help, label string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
		reg.MustRegister(v)
		return v
	}
	unmapped := prometheus.NewCounter(prometheus.CounterOpts{Name: "statsd_exporter_events_unmapped_total",
		Help: "The total number of StatsD events no mapping was found for."})
	count := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "statsd_exporter_metrics_total",
		Help: "The total number of metrics."}, []string{"type"})
	reg.MustRegister(unmapped, count)
	return exporter.NewExporter(reg, m, slog.New(slog.DiscardHandler),
		counterVec("statsd_exporter_events_actions_total", "The total number of StatsD events by action.", "action"),
		unmapped,
		counterVec("statsd_exporter_events_error_total", "The total number of StatsD events discarded due to errors.", "reason"),
		counterVec("statsd_exporter_events_total", "The total number of StatsD events seen.", "type"),
		counterVec("statsd_exporter_events_conflict_total", "The total number of StatsD events with conflicting names.", "type"),
		count)
}

// Gatherer is what the peer's PROMETHEUS_ADDR shows with a mapping file: the mapped series in
// place of the default mapping's ratelimit_service_* series of own, and the rest of own.
func Gatherer(mapped, own prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.Gatherers{mapped, withoutPeerSeries{own}}
}

// withoutPeerSeries gathers g without the ratelimit_service_* families.
type withoutPeerSeries struct{ g prometheus.Gatherer }

func (w withoutPeerSeries) Gather() ([]*dto.MetricFamily, error) {
	fams, err := w.g.Gather()
	kept := fams[:0]
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "ratelimit_service_") {
			kept = append(kept, f)
		}
	}
	return kept, err
}
