package regions

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/monotime"
	"github.com/sluicehq/sluice/internal/shardmap"
)

// Mode is how the regions share a global limit.
type Mode uint8

// The modes.
const (
	// Escrow gives each region a share of the limit, decided on locally, moved between
	// regions by demand through the Coordinator: never over the limit, even cut off.
	Escrow Mode = iota
	// Async lets each region decide on its own store against the limit less what the
	// other regions admitted as last read from their stores: over by a bounded amount.
	Async
)

var modeNames = [...]string{Escrow: "escrow", Async: "async"}

// String returns the mode's configuration name.
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return "unknown"
}

// ParseMode parses a configuration name: escrow or async.
func ParseMode(s string) (Mode, error) {
	for m, n := range modeNames {
		if n == s {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("regions: mode: want escrow or async, got %q", s)
}

// Defaults of Config's zero values.
const (
	DefaultInterval     = 100 * time.Millisecond
	DefaultEpoch        = time.Second
	DefaultMaxClockSkew = 50 * time.Millisecond
	DefaultMaxKeys      = 100_000
)

// Region is one region: its name and its store (its own Redis, say).
type Region struct {
	Name  string
	Store sluice.Store
}

// Config configures a Store. The zero value of every field but Region, Regions and (for
// Escrow) Coordinator is a documented default.
type Config struct {
	// Region names this region; Regions lists every region, this one included, each with
	// its store. This region's store decides; in Async mode the others' stores are read.
	Region  string
	Regions []Region
	// Mode says how the regions share each limit (default Escrow).
	Mode Mode
	// Coordinator is where Escrow's instances meet (required in Escrow mode).
	Coordinator Coordinator
	// Interval is how often an instance syncs in the background (default
	// DefaultInterval): its demands and the escrow state (Escrow), the regions' counts
	// (Async).
	Interval time.Duration
	// Epoch is how long an escrow share lasts (default DefaultEpoch): shares are
	// allocated per epoch, one epoch ahead, so a region cut off from the Coordinator decides
	// on its share for at most two more epochs, then on nothing. A share moves to another
	// region only once what was admitted under it is out of the rule's memory (a period,
	// or the time to refill the burst) and MaxClockSkew.
	Epoch time.Duration
	// MaxClockSkew bounds how far the regions' clocks may disagree (default
	// DefaultMaxClockSkew): an instance decides, within it of an epoch's edge, on the smaller
	// of the two epochs' shares.
	MaxClockSkew time.Duration
	// Clock tells the time (default the system clock).
	Clock sluice.Clock
	// Instance names this instance at the Coordinator (default a random id).
	Instance string
	// MaxKeys bounds the keys held (default DefaultMaxKeys); past it a new key evicts an
	// idle one, or is denied (Escrow) until one is idle.
	MaxKeys int
	// Manual disables the background sync: call Sync (a simulation on virtual time).
	Manual bool
	// OnSyncError, when set, is called with each failed sync (for logs and metrics); it must
	// not block.
	OnSyncError func(error)
}

// Store decides global limits across regions: a sluice.Store for the keys whose limit is
// the whole fleet's, in every region. Build it with New, release it with Close (which does
// not close the regions' stores). A Store is safe for concurrent use.
type Store struct {
	cfg   Config
	local sluice.Store
	keys  *shardmap.Map[*keyState]
	async asyncStore // Async mode
	stop  chan struct{}
	done  chan struct{}
	wake  chan struct{}
	once  sync.Once

	syncMu sync.Mutex
	closed atomic.Bool
}

// asyncStore is what Async mode decides with (a distributed.Async over the regions' counts).
type asyncStore interface {
	sluice.Store
	Sync(context.Context) error
	Flush(context.Context) error
	Close() error
}

// keyState is what an instance holds of one key in Escrow mode.
type keyState struct {
	key   string
	rule  atomic.Pointer[sluice.Rule]
	hist  atomic.Pointer[history] // the escrow state last read or written
	count atomic.Int64            // units asked for since the last sync
	used  atomic.Int64            // the last decision (Unix ns)
	// guarded by the Store's syncMu:
	raw      []byte  // hist's bytes, for the compare-and-set
	rate     float64 // demand, units per period, smoothed
	lastSync int64   // when its demand was last measured (made: when the key was)
}

// New returns a Store over cfg, its background sync started (unless Manual).
func New(cfg Config) (*Store, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1)}
	for _, r := range cfg.Regions {
		if r.Name == cfg.Region {
			s.local = r.Store
		}
	}
	if cfg.Mode == Async {
		a, err := newAsync(&s.cfg)
		if err != nil {
			return nil, err
		}
		s.async = a
		close(s.done)
		return s, nil
	}
	s.keys = shardmap.New(cfg.MaxKeys, func(ks *keyState, now int64) int64 {
		return max(0, ks.used.Load()+int64(2*cfg.Epoch)-now) // an idle key goes first
	})
	if cfg.Manual {
		close(s.done)
	} else {
		go s.loop()
	}
	return s, nil
}

// validate checks cfg and fills in its defaults.
func (cfg *Config) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &sluice.FieldError{Field: field, Err: fmt.Errorf("regions: "+field+": "+format, args...)})
	}
	names := map[string]bool{}
	self := false
	for i, r := range cfg.Regions {
		switch {
		case r.Name == "" || strings.ContainsAny(r.Name, "=, \t\n"):
			bad(fmt.Sprintf("regions[%d].name", i), "want a name without spaces, '=' or ',', got %q", r.Name)
		case names[r.Name]:
			bad(fmt.Sprintf("regions[%d].name", i), "%q listed twice", r.Name)
		case r.Store == nil:
			bad(fmt.Sprintf("regions[%d].store", i), "%q has no store", r.Name)
		}
		names[r.Name] = true
		self = self || r.Name == cfg.Region
	}
	switch {
	case len(cfg.Regions) == 0:
		bad("regions", "none listed")
	case !self:
		bad("region", "%q is not one of the regions listed", cfg.Region)
	}
	switch {
	case cfg.Mode != Escrow && cfg.Mode != Async:
		bad("mode", "unknown mode %d", cfg.Mode)
	case cfg.Mode == Escrow && cfg.Coordinator == nil:
		bad("coordinator", "escrow needs a coordinator")
	}
	if cfg.Mode == Async {
		for i, r := range cfg.Regions {
			if _, ok := r.Store.(sluice.WindowCounter); r.Store != nil && !ok {
				bad(fmt.Sprintf("regions[%d].store", i), "async mode reads window counters: %T does not implement sluice.WindowCounter", r.Store)
			}
		}
	}
	for _, d := range []struct {
		field    string
		v        *time.Duration
		def      time.Duration
		low, top time.Duration
	}{{"interval", &cfg.Interval, DefaultInterval, time.Millisecond, time.Minute},
		{"epoch", &cfg.Epoch, DefaultEpoch, 10 * time.Millisecond, time.Hour},
		{"max_clock_skew", &cfg.MaxClockSkew, DefaultMaxClockSkew, 0, time.Hour}} {
		switch {
		case *d.v == 0:
			*d.v = d.def
		case *d.v < d.low || *d.v > d.top:
			bad(d.field, "want %v to %v, got %v", d.low, d.top, *d.v)
		}
	}
	if cfg.Epoch > 0 && cfg.MaxClockSkew*2 >= cfg.Epoch {
		bad("max_clock_skew", "%v is half the epoch (%v) or more", cfg.MaxClockSkew, cfg.Epoch)
	}
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	if cfg.Instance == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.Instance = hex.EncodeToString(b[:])
	}
	return errors.Join(errs...)
}

func (s *Store) now() int64 {
	if s.cfg.Clock == nil {
		return monotime.UnixNano()
	}
	return s.cfg.Clock.Now().UnixNano()
}

// Take implements sluice.Store: in Escrow mode, the request is decided on this region's
// store under its rule scaled to the region's share of the epoch (denied, consuming
// nothing, while the region holds none); in Async mode, on the local view of the regions'
// counts.
func (s *Store) Take(ctx context.Context, req sluice.Request) (sluice.Decision, error) {
	if s.closed.Load() {
		return sluice.Decision{}, fmt.Errorf("regions: %w", sluice.ErrClosed)
	}
	if s.async != nil {
		return s.async.Take(ctx, req)
	}
	if err := req.Rule.Validate(); err != nil {
		return sluice.Decision{}, err
	}
	t := s.now()
	ks, ok := s.key(req.Key, req.Rule, t)
	if !ok {
		return s.none(t), nil // no room to hold the key: nothing is known of its share
	}
	if req.N > 0 {
		ks.count.Add(req.N)
	}
	scaled, ok := scale(req.Rule, s.parts(ks, t))
	if !ok {
		return s.none(t), nil
	}
	req.Rule = scaled
	return s.local.Take(ctx, req)
}

// Share returns the units of rule's limit this region may admit for key now: in Escrow
// mode its share, scaled (0 while it holds none, or for a key it does not hold); in Async
// mode the whole limit. It reads what the last sync left, and changes nothing.
func (s *Store) Share(key string, rule sluice.Rule) int64 {
	if s.async != nil {
		return rule.Limit
	}
	sh := s.keys.Shard(key)
	sh.Lock()
	ks, ok := sh.Get(key)
	sh.Unlock()
	if !ok {
		return 0
	}
	scaled, ok := scale(rule, s.parts(ks, s.now()))
	if !ok {
		return 0
	}
	return scaled.Limit
}

// none is the decision of a request while this region holds no share of its limit: denied,
// to be tried again at the next sync.
func (s *Store) none(now int64) sluice.Decision {
	return sluice.Decision{RetryAfter: max(s.cfg.Interval, time.Duration(s.cfg.Epoch.Nanoseconds()-now%s.cfg.Epoch.Nanoseconds()))}
}

// key returns the state of key, made (and the sync woken) when new.
func (s *Store) key(key string, rule sluice.Rule, now int64) (*keyState, bool) {
	sh := s.keys.Shard(key)
	sh.Lock()
	ks, found := sh.Get(key)
	if !found {
		if !sh.MakeRoom(now) {
			sh.Unlock()
			return nil, false
		}
		ks = &keyState{key: strings.Clone(key), lastSync: now}
		ks.rule.Store(&rule)
		sh.Set(ks.key, ks)
	} else if r := ks.rule.Load(); *r != rule {
		ks.rule.Store(&rule)
	}
	sh.Unlock()
	ks.used.Store(now)
	if !found {
		select {
		case s.wake <- struct{}{}: // a new key: its first share, without waiting for the tick
		default:
		}
	}
	return ks, true
}

// parts returns the parts of the limit this region holds at now: the smaller of the shares
// of the epochs MaxClockSkew before and after, so that no clock within the skew sees this
// region in an epoch of a larger share than the one it is in.
func (s *Store) parts(ks *keyState, now int64) int64 {
	h := ks.hist.Load()
	if h == nil {
		return 0
	}
	r := h.index(s.cfg.Region, false)
	g := int64(s.cfg.MaxClockSkew)
	return min(h.share(r, (now-g)/h.epoch), h.share(r, (now+g)/h.epoch))
}

// loop syncs every interval, and at once when a new key wakes it.
func (s *Store) loop() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.wake:
		}
		// A sync is two round trips to the Coordinator; it must end within an epoch for the
		// next epoch to be allocated in time.
		ctx, cancel := context.WithTimeout(context.Background(), max(s.cfg.Epoch, 2*s.cfg.Interval))
		if err := s.Sync(ctx); err != nil && s.cfg.OnSyncError != nil {
			s.cfg.OnSyncError(err)
		}
		cancel()
	}
}

// Sync exchanges with the regions once: in Escrow mode, this instance's demands and the
// escrow states of the keys decided on within the last two epochs, allocating the epochs
// not yet allocated (up to the next one); in Async mode, the regions' counts. The
// background loop calls it every interval; call it yourself with Config.Manual.
func (s *Store) Sync(ctx context.Context) error {
	if s.async != nil {
		return s.async.Sync(ctx)
	}
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	t := s.now()
	var active []*keyState
	for i := range shardmap.Shards {
		sh := s.keys.At(i)
		sh.Lock()
		sh.Range(func(_ string, ks *keyState) {
			if t-ks.used.Load() <= int64(2*s.cfg.Epoch) {
				active = append(active, ks)
			}
		})
		sh.Unlock()
	}
	live := 4*s.cfg.Interval + s.cfg.Epoch
	x := &Exchange{Region: s.cfg.Region, Instance: s.cfg.Instance, At: t, Live: live, Keys: make([]KeyExchange, len(active))}
	for i, ks := range active {
		rule := ks.rule.Load()
		// The demand: what was asked for per period, smoothed over about an epoch (a new
		// key's first sample over at least an interval, so one request is not a flood).
		el := max(t-ks.lastSync, int64(s.cfg.Interval))
		sample := float64(ks.count.Swap(0)) * float64(rule.Period) / float64(el)
		ks.rate += min(1, float64(el)/float64(s.cfg.Epoch)) * (sample - ks.rate)
		ks.lastSync = t
		x.Keys[i] = KeyExchange{Key: ks.key, Demand: ks.rate, TTL: s.ttl(rule)}
	}
	if err := s.cfg.Coordinator.Exchange(ctx, x); err != nil { // the heartbeat, also without keys
		return err
	}
	alive := func(region string) bool {
		at, ok := x.Heartbeats[region]
		return ok && t-at <= int64(live)
	}
	var props []Proposal
	var owners []*keyState
	var next []*history
	for i, ks := range active {
		k := &x.Keys[i]
		h, err := s.read(ks, k.State)
		if err != nil {
			continue // a state this instance cannot read: left alone
		}
		e := t / h.epoch
		if h.any && h.last > e {
			continue // the next epoch is allocated
		}
		n := h.clone()
		for _, r := range s.cfg.Regions {
			n.index(r.Name, true)
		}
		rule := ks.rule.Load()
		cool := (ruleMemory(*rule) + int64(s.cfg.MaxClockSkew) + n.epoch - 1) / n.epoch
		m := e
		if n.any {
			m = max(n.last+1, e)
		}
		for ; m <= e+1; m++ {
			n.record(m, n.allocate(m, cool, n.targets(rule.Limit, k.Demands, alive), forgets(*rule)), m-cool-1)
		}
		props = append(props, Proposal{Key: ks.key, Old: k.State, New: n.encode(nil), At: t, TTL: time.Duration((cool + 3) * n.epoch)})
		owners, next = append(owners, ks), append(next, n)
	}
	if len(props) == 0 {
		return nil
	}
	if err := s.cfg.Coordinator.Propose(ctx, props); err != nil {
		return err
	}
	for i, p := range props {
		if p.Written {
			owners[i].raw = p.New
			owners[i].hist.Store(next[i])
		}
	}
	return nil
}

// read decodes a key's state as the Coordinator holds it (none: a history of this
// instance's epoch) and keeps it as the key's.
func (s *Store) read(ks *keyState, state []byte) (*history, error) {
	if len(state) == 0 {
		h := &history{epoch: int64(s.cfg.Epoch)}
		ks.raw = nil
		ks.hist.Store(h)
		return h, nil
	}
	if slices.Equal(state, ks.raw) {
		return ks.hist.Load(), nil
	}
	h, err := decodeHistory(state)
	if err != nil {
		return nil, err
	}
	ks.raw = state
	ks.hist.Store(h)
	return h, nil
}

// ttl is how long a key's records live at the Coordinator after an exchange: while what
// was allocated may still count.
func (s *Store) ttl(rule *sluice.Rule) time.Duration {
	return time.Duration(ruleMemory(*rule)) + s.cfg.MaxClockSkew + 4*s.cfg.Epoch
}

// WindowsOnly reports whether the Store decides only limits counted in windows (Async
// mode), so that rules can refuse the others when they load (rls does).
func (s *Store) WindowsOnly() bool { return s.async != nil }

// Flush syncs what is pending (Async mode: the counts not yet written).
func (s *Store) Flush(ctx context.Context) error {
	if s.async != nil {
		return s.async.Flush(ctx)
	}
	return nil
}

// Close stops the background sync (Async mode: after writing the counts not yet written).
// It does not close the regions' stores or the Coordinator.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		s.closed.Store(true)
		if s.async != nil {
			err = s.async.Close()
			return
		}
		close(s.stop)
		<-s.done
	})
	return err
}
