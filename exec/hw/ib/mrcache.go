package ib

import (
	"errors"
	"fmt"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// mrCacheMax bounds the entries of one device in an endpoint's cache.
const mrCacheMax = 64

// mrCache is an endpoint's memory registrations, per local device, after
// NCCL's ncclIbMrCache: a buffer that lies inside a region cached with
// at least the access it needs uses that region's keys instead of a
// registration of its own. Entries count the requests using them. An
// entry no request uses stays registered for the next request on that
// memory (the proxy sends from and receives into the same connection
// buffers over and over) until the endpoint closes, a larger
// registration covers it, or the cache is over mrCacheMax entries and it
// is the least recently used idle one. It is used under the endpoint's
// lock.
type mrCache struct {
	devs []*device
	ents [][]*mrEntry // per device
	tick uint64
}

// mrEntry is one registered region.
type mrEntry struct {
	addr   uint64
	n      int
	access verbs.Access
	mr     verbs.MR
	buf    []byte // keeps the memory alive while it is registered
	refs   int
	used   uint64
}

func newMRCache(devs []*device) *mrCache {
	return &mrCache{devs: devs, ents: make([][]*mrEntry, len(devs))}
}

// covers reports whether e holds [addr, addr+n) with access.
func (e *mrEntry) covers(addr uint64, n int, access verbs.Access) bool {
	return addr >= e.addr && addr+uint64(n) <= e.addr+uint64(e.n) && e.access&access == access
}

// get returns a registration of b on device dev with access, counting
// one more user.
func (c *mrCache) get(dev int, b []byte, access verbs.Access) (*mrEntry, error) {
	c.tick++
	addr := addrOf(b)
	ents := c.ents[dev]
	for _, e := range ents {
		if e.covers(addr, len(b), access) {
			e.refs++
			e.used = c.tick
			return e, nil
		}
	}
	d := c.devs[dev]
	mr, err := d.pd.RegMR(b, access)
	if err != nil {
		return nil, fmt.Errorf("ib plugin: register %d bytes on %s: %w", len(b), d.ctx.Name(), err)
	}
	ne := &mrEntry{addr: addr, n: len(b), access: access, mr: mr, buf: b, refs: 1, used: c.tick}
	// Idle entries the new one covers are redundant.
	keep := ents[:0]
	var errs []error
	for _, e := range ents {
		if e.refs == 0 && ne.covers(e.addr, e.n, e.access) {
			errs = append(errs, e.mr.Close())
			continue
		}
		keep = append(keep, e)
	}
	clear(ents[len(keep):])
	ents = append(keep, ne)
	for len(ents) > mrCacheMax {
		lru := -1
		for i, e := range ents {
			if e.refs == 0 && (lru < 0 || e.used < ents[lru].used) {
				lru = i
			}
		}
		if lru < 0 {
			break // every entry is in use
		}
		errs = append(errs, ents[lru].mr.Close())
		ents = append(ents[:lru], ents[lru+1:]...)
	}
	c.ents[dev] = ents
	if err := errors.Join(errs...); err != nil {
		return ne, fmt.Errorf("ib plugin: deregister on %s: %w", d.ctx.Name(), err)
	}
	return ne, nil
}

// put drops one user of e.
func (c *mrCache) put(e *mrEntry) {
	if e.refs > 0 {
		e.refs--
	}
}

// close deregisters every entry.
func (c *mrCache) close() error {
	var errs []error
	for d, ents := range c.ents {
		for _, e := range ents {
			errs = append(errs, e.mr.Close())
		}
		c.ents[d] = nil
	}
	return errors.Join(errs...)
}
