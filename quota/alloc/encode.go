package alloc

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/sluicehq/sluice/internal/wire"
)

// errCorrupt is returned by DecodeClient for bytes AppendClient did not write.
var errCorrupt = errors.New("alloc: corrupt client state")

// AppendClient appends a compact binary form of c to dst, for a shared store.
func AppendClient(dst []byte, c *Client) []byte {
	dst = append(dst, 1) // version
	dst = binary.AppendVarint(dst, c.Seen)
	left := byte(0)
	if c.Left {
		left = 1
	}
	dst = append(dst, left)
	dst = binary.AppendUvarint(dst, uint64(len(c.History)))
	for _, s := range c.History {
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(s.Count))
		dst = binary.AppendVarint(dst, s.Elapsed)
	}
	dst = binary.AppendUvarint(dst, uint64(len(c.Held)))
	for _, a := range c.Held {
		dst = binary.AppendVarint(dst, a.Share)
		dst = binary.AppendVarint(dst, a.Expires)
	}
	return dst
}

// DecodeClient decodes what AppendClient wrote.
func DecodeClient(b []byte) (*Client, error) {
	d := wire.NewReader(b)
	if d.Byte() != 1 {
		return nil, errCorrupt
	}
	c := &Client{Seen: d.Varint(), Left: d.Byte() == 1}
	n := d.Uvarint()
	if n > 1024 {
		return nil, errCorrupt
	}
	for i := uint64(0); i < n && !d.Failed(); i++ {
		c.History = append(c.History, Sample{Count: math.Float64frombits(d.Uint64()), Elapsed: d.Varint()})
	}
	n = d.Uvarint()
	if n > MaxHeld {
		return nil, errCorrupt
	}
	for i := uint64(0); i < n && !d.Failed(); i++ {
		c.Held = append(c.Held, Assignment{Share: d.Varint(), Expires: d.Varint()})
	}
	if d.Failed() || d.Len() != 0 {
		return nil, errCorrupt
	}
	return c, nil
}
