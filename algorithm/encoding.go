package algorithm

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/wire"
)

// ErrBadEncoding reports bytes that AppendState did not write (another program's value, or a
// truncated one).
var ErrBadEncoding = errors.New("algorithm: bad state encoding")

// AppendState appends the compact binary encoding of s to dst and returns the extended
// buffer: a byte naming the algorithm, then the state's fields as varints (a sliding log's
// timestamps as the first one and then the gaps between them, so a busy log takes one or two
// bytes a unit). Stores that keep state outside the process (store/memcached) write it and
// read it back with DecodeState, which returns a state that decides exactly as s would.
func AppendState(dst []byte, s State) []byte {
	if l, ok := s.(*Ledger); ok {
		return l.append(dst)
	}
	dst = append(dst, byte(s.Algorithm()))
	switch s := s.(type) {
	case *FixedWindow:
		dst = binary.AppendVarint(dst, s.End)
		dst = binary.AppendVarint(dst, s.Count)
	case *SlidingWindow:
		dst = binary.AppendVarint(dst, s.Newest)
		dst = binary.AppendVarint(dst, s.Sub)
		dst = binary.AppendUvarint(dst, uint64(len(s.Counts)))
		for _, c := range s.Counts {
			dst = binary.AppendVarint(dst, c)
		}
	case *TokenBucket:
		dst = s.level.append(dst)
	case *LeakyBucket:
		dst = s.level.append(dst)
	case *GCRA:
		dst = binary.AppendVarint(dst, s.TAT)
	case *SlidingLog:
		dst = binary.AppendVarint(dst, s.limit)
		dst = binary.AppendUvarint(dst, uint64(s.count))
		prev := int64(0)
		for i := 0; i < s.count; i++ {
			t := s.at(i)
			if i == 0 {
				dst = binary.AppendVarint(dst, t)
			} else {
				dst = binary.AppendUvarint(dst, uint64(t-prev))
			}
			prev = t
		}
	}
	return dst
}

func (b *level) append(dst []byte) []byte {
	dst = binary.AppendVarint(dst, b.Level)
	return binary.AppendVarint(dst, b.Last)
}

// DecodeState returns the state AppendState encoded in b, or an error wrapping
// ErrBadEncoding when b is not such an encoding (nothing in b can make it panic or allocate
// more than a valid state of its size would).
func DecodeState(b []byte) (State, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrBadEncoding)
	}
	if b[0] == ledgerTag {
		return decodeLedger(b[1:])
	}
	s := New(sluice.Algorithm(b[0]))
	if s == nil {
		return nil, fmt.Errorf("%w: unknown algorithm %d", ErrBadEncoding, b[0])
	}
	r := wire.NewReader(b[1:])
	switch s := s.(type) {
	case *FixedWindow:
		s.End, s.Count = r.Varint(), r.Varint()
	case *SlidingWindow:
		s.Newest, s.Sub = r.Varint(), r.Varint()
		n := r.Uvarint()
		if n > sluice.MaxSubWindows+1 || n > uint64(r.Len()) {
			return nil, fmt.Errorf("%w: %d sliding-window counters", ErrBadEncoding, n)
		}
		if n > 0 {
			s.Counts = make([]int64, n)
			for i := range s.Counts {
				s.Counts[i] = r.Varint()
			}
		}
	case *TokenBucket:
		s.Level, s.Last = r.Varint(), r.Varint()
	case *LeakyBucket:
		s.Level, s.Last = r.Varint(), r.Varint()
	case *GCRA:
		s.TAT = r.Varint()
	case *SlidingLog:
		s.limit = r.Varint()
		n := r.Uvarint()
		// up to Limit timestamps, and as many more in debt (see SlidingLog and Params.MaxDebt)
		if s.limit < 0 || s.limit > sluice.MaxSlidingLogLimit || n > 2*uint64(s.limit) || n > uint64(r.Len()) {
			return nil, fmt.Errorf("%w: %d timestamps in a log of limit %d", ErrBadEncoding, n, s.limit)
		}
		if n > 0 {
			s.ring = make([]int64, max(int(n), min(minLogRing, int(s.limit))))
			t := r.Varint()
			for i := range int(n) {
				if i > 0 {
					t += int64(r.Uvarint())
				}
				s.ring[i] = t
			}
			s.count = int(n)
		}
	}
	if r.Failed() || r.Len() != 0 {
		return nil, fmt.Errorf("%w: %s state of %d bytes", ErrBadEncoding, s.Algorithm(), len(b))
	}
	return s, nil
}

// ledgerTag starts a Ledger's encoding, where a state's starts with its algorithm.
const ledgerTag = 0x80

// append is AppendState for a Ledger: ledgerTag, the length of the state's encoding and that
// encoding, then the number of open reservations and each one's id (16 bytes), Held,
// Counted, Until, Expires (varints) and Free (a byte).
func (l *Ledger) append(dst []byte) []byte {
	dst = append(dst, ledgerTag)
	inner := AppendState(nil, l.State)
	dst = binary.AppendUvarint(dst, uint64(len(inner)))
	dst = append(dst, inner...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Open)))
	for i := range l.Open {
		r := &l.Open[i]
		dst = append(dst, r.ID[:]...)
		dst = binary.AppendVarint(dst, r.Held)
		dst = binary.AppendVarint(dst, r.Counted)
		dst = binary.AppendVarint(dst, r.Until)
		dst = binary.AppendVarint(dst, r.Expires)
		free := byte(0)
		if r.Free {
			free = 1
		}
		dst = append(dst, free)
	}
	return dst
}

// reservationBytes is the fewest bytes an encoded reservation takes: its id, four varints and
// the free byte.
const reservationBytes = 16 + 4 + 1

func decodeLedger(b []byte) (State, error) {
	r := wire.NewReader(b)
	n := r.Uvarint()
	if r.Failed() || n == 0 || n > uint64(r.Len()) {
		return nil, fmt.Errorf("%w: ledger state of %d bytes", ErrBadEncoding, n)
	}
	inner, err := DecodeState(b[len(b)-r.Len() : len(b)-r.Len()+int(n)])
	if err != nil {
		return nil, err
	}
	if _, nested := inner.(*Ledger); nested {
		return nil, fmt.Errorf("%w: a ledger in a ledger", ErrBadEncoding)
	}
	r = wire.NewReader(b[len(b)-r.Len()+int(n):])
	count := r.Uvarint()
	if count > sluice.MaxOpenReservations || count > uint64(r.Len()/reservationBytes) {
		return nil, fmt.Errorf("%w: %d reservations", ErrBadEncoding, count)
	}
	l := &Ledger{State: inner, Open: make([]Reservation, count)}
	for i := range l.Open {
		o := &l.Open[i]
		for j := range o.ID {
			o.ID[j] = r.Byte()
		}
		o.Held, o.Counted, o.Until, o.Expires = r.Varint(), r.Varint(), r.Varint(), r.Varint()
		switch r.Byte() {
		case 0:
		case 1:
			o.Free = true
		default:
			return nil, fmt.Errorf("%w: reservation %d", ErrBadEncoding, i)
		}
	}
	if r.Failed() || r.Len() != 0 {
		return nil, fmt.Errorf("%w: ledger of %d bytes", ErrBadEncoding, len(b))
	}
	return l, nil
}
