package regions

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/wire"
)

// A Coordinator is where the instances of every region meet for escrow: each instance
// records its demand per key and its region's heartbeat, and reads the others'; each key's
// allocation (the escrow state) changes only by compare-and-set, so that every region reads
// the same shares of an epoch. No decision waits on it: instances exchange with it in the
// background. NewRedisCoordinator keeps it in one region's Redis; NewMemoryCoordinator in
// this process (tests, simulations, regions served by one process).
type Coordinator interface {
	// Exchange records x's heartbeat and demands and fills in the heartbeats of every
	// region and, for each key, its state and the demand of each region.
	Exchange(ctx context.Context, x *Exchange) error
	// Propose writes each proposal's New state where the key's state is still its Old, and
	// says which were written.
	Propose(ctx context.Context, ps []Proposal) error
}

// Exchange is one instance's sync with the Coordinator.
type Exchange struct {
	// Region and Instance name the instance; At is its clock (Unix ns).
	Region, Instance string
	At               int64
	// Live is how long a heartbeat or a demand counts after it was recorded.
	Live time.Duration
	// Keys are the keys the instance decides.
	Keys []KeyExchange
	// Heartbeats is filled in: each region's latest heartbeat (Unix ns).
	Heartbeats map[string]int64
}

// KeyExchange is one key of an Exchange.
type KeyExchange struct {
	// Key is the key; Demand the instance's demand for it, in units per period of its rule;
	// TTL how long the key's records live after this exchange.
	Key    string
	Demand float64
	TTL    time.Duration
	// State is filled in with the key's escrow state (nil: none yet), and Demands with
	// each region's demand: the sum of its instances' live records.
	State   []byte
	Demands map[string]float64
}

// Proposal is a compare-and-set of a key's escrow state, made at At (Unix ns), the new
// state to live TTL.
type Proposal struct {
	Key      string
	Old, New []byte
	At       int64
	TTL      time.Duration
	// Written is filled in: whether the state was Old, and is now New.
	Written bool
}

// demandRecord is what an instance records of its demand for a key.
type demandRecord struct {
	region string
	rate   float64
	at     int64
}

const demandVersion = 1

func (d demandRecord) encode() []byte {
	b := wire.AppendString([]byte{demandVersion}, d.region)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(d.rate))
	return binary.AppendVarint(b, d.at)
}

func decodeDemand(b []byte) (demandRecord, bool) {
	r := wire.NewReader(b)
	if r.Byte() != demandVersion {
		return demandRecord{}, false
	}
	d := demandRecord{region: r.String(256)}
	d.rate = math.Float64frombits(r.Uint64())
	d.at = r.Varint()
	return d, !r.Failed() && r.Len() == 0 && !math.IsNaN(d.rate)
}

// sumDemands adds the live records (recorded within live of at) per region.
func sumDemands(records [][]byte, at int64, live time.Duration) map[string]float64 {
	out := make(map[string]float64)
	for _, b := range records {
		if d, ok := decodeDemand(b); ok && at-d.at <= int64(live) && d.rate > 0 {
			out[d.region] += d.rate
		}
	}
	return out
}

// memoryCoordinator is a Coordinator in this process.
type memoryCoordinator struct {
	mu         sync.Mutex
	heartbeats map[string]int64
	keys       map[string]*memoryKey
}

type memoryKey struct {
	state   []byte
	expires int64
	demands map[string]memoryDemand
}

type memoryDemand struct {
	record  []byte
	expires int64
}

// NewMemoryCoordinator returns a Coordinator held in this process, for regions whose
// instances share it (tests, simulations). Expiries follow the instants the calls carry.
func NewMemoryCoordinator() Coordinator {
	return &memoryCoordinator{heartbeats: make(map[string]int64), keys: make(map[string]*memoryKey)}
}

func (m *memoryCoordinator) Exchange(_ context.Context, x *Exchange) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.heartbeats[x.Region] = max(m.heartbeats[x.Region], x.At)
	x.Heartbeats = make(map[string]int64, len(m.heartbeats))
	for r, at := range m.heartbeats {
		x.Heartbeats[r] = at
	}
	for i := range x.Keys {
		k := &x.Keys[i]
		mk := m.keys[k.Key]
		if mk == nil || mk.expires <= x.At && len(mk.demands) == 0 {
			mk = &memoryKey{demands: make(map[string]memoryDemand)}
			m.keys[k.Key] = mk
		}
		if mk.expires <= x.At {
			mk.state = nil
		}
		mk.demands[x.Instance] = memoryDemand{demandRecord{x.Region, k.Demand, x.At}.encode(), x.At + int64(k.TTL)}
		records := make([][]byte, 0, len(mk.demands))
		for id, d := range mk.demands {
			if d.expires <= x.At {
				delete(mk.demands, id)
				continue
			}
			records = append(records, d.record)
		}
		k.State = append([]byte(nil), mk.state...)
		if len(mk.state) == 0 {
			k.State = nil
		}
		k.Demands = sumDemands(records, x.At, x.Live)
	}
	return nil
}

func (m *memoryCoordinator) Propose(_ context.Context, ps []Proposal) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range ps {
		p := &ps[i]
		mk := m.keys[p.Key]
		if mk == nil {
			mk = &memoryKey{demands: make(map[string]memoryDemand)}
			m.keys[p.Key] = mk
		}
		if string(mk.state) != string(p.Old) {
			continue
		}
		mk.state = append([]byte(nil), p.New...)
		mk.expires = p.At + int64(p.TTL)
		p.Written = true
	}
	return nil
}
