package alloc

import (
	"encoding/binary"
	"errors"
	"math"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/wire"
)

// errCorrupt is returned by DecodeClient for bytes AppendClient did not write.
var errCorrupt = errors.New("alloc: corrupt client state")

// The versions of the encoding: version 1 has no class (Critical, the default); version 2,
// written only for a client of another class, has the class after the Left flag. A client
// without classes is therefore written as before classes existed.
const (
	encodingV1 = 1
	encodingV2 = 2
)

// AppendClient appends a compact binary form of c to dst, for a shared store.
func AppendClient(dst []byte, c *Client) []byte {
	version := byte(encodingV1)
	if c.Class != sluice.Critical {
		version = encodingV2
	}
	dst = append(dst, version)
	dst = binary.AppendVarint(dst, c.Seen)
	left := byte(0)
	if c.Left {
		left = 1
	}
	dst = append(dst, left)
	if version == encodingV2 {
		dst = append(dst, byte(c.Class))
	}
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
	version := d.Byte()
	if version != encodingV1 && version != encodingV2 {
		return nil, errCorrupt
	}
	c := &Client{Seen: d.Varint(), Left: d.Byte() == 1}
	if version == encodingV2 {
		c.Class = sluice.Criticality(d.Byte())
		if !knownClass(c.Class) {
			return nil, errCorrupt
		}
	}
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
