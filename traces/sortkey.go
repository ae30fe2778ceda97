package traces

import (
	"math/bits"
	"slices"
)

// Row groups are sorted by packing each row's sort key into one uint64 and
// radix-sorting those words. Every key column is mapped to an
// order-preserving unsigned image, offset by its minimum in the row group and
// given just the bits its range needs; the communicator id, a hash, is first
// replaced by its rank among the distinct ids of the row group. The row's
// position fills the low bits, so the sort is stable, and only the key bits
// are sorted. When the key does not fit in 64 bits the writer falls back to a
// comparison sort with the same order.

// maxKeyFields is the most sort columns a row kind has (events: rank, comm,
// call, channel, step, start_ns).
const maxKeyFields = 6

// sortKey holds the order-preserving images of one row's sort columns.
type sortKey [maxKeyFields]uint64

// signedKey maps a signed value to an unsigned one of the same order.
func signedKey(v int64) uint64 { return uint64(v) ^ (1 << 63) }

// commField is the index of the communicator id in both kinds' sort keys.
const commField = 1

// maxCommIDs bounds the distinct communicator ids the packer ranks; beyond it
// the comparison sort is used.
const maxCommIDs = 1 << 12

// eventKeys sets out[i] to the sort key of rows[i] (see eventLess).
func eventKeys(rows []EventRow, out []sortKey) {
	out = out[:len(rows)]
	for i := range rows {
		r := &rows[i]
		out[i] = sortKey{signedKey(int64(r.Rank)), r.Comm, signedKey(r.Call), signedKey(int64(r.Channel)),
			signedKey(r.Step), signedKey(r.StartNs)}
	}
}

// callKeys sets out[i] to the sort key of rows[i] (see callLess).
func callKeys(rows []CallRow, out []sortKey) {
	out = out[:len(rows)]
	for i := range rows {
		r := &rows[i]
		out[i] = sortKey{signedKey(int64(r.Rank)), r.Comm, signedKey(r.Call), signedKey(r.StartNs)}
	}
}

// keyChunk is the number of rows whose keys packKeys extracts at a time.
const keyChunk = 256

// keyPacker packs sort keys into words: field f takes width[f] bits at
// shift[f], holding its value minus lo[f].
type keyPacker struct {
	lo, hi, width, shift [maxKeyFields]uint64
	comms                map[uint64]uint64 // communicator id -> rank among the ids; nil if not ranked
	idxBits              uint              // bits of the row position
	keyBits              uint              // bits of the packed key above idxBits
}

// packKeys fills keys[i] with row i's packed key and position and returns the
// number of position bits and key bits above them, or ok false if the keys do
// not fit in 64 bits. key extracts the sort keys of a few rows at a time.
func packKeys[T any](rows []T, keys []uint64, key func([]T, []sortKey), p *keyPacker) (idxBits, keyBits uint, ok bool) {
	*p = keyPacker{comms: p.comms}
	clear(p.comms)
	p.lo = sortKey{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
	var chunk [keyChunk]sortKey
	for i := 0; i < len(rows); i += keyChunk {
		ks := chunk[:min(keyChunk, len(rows)-i)]
		key(rows[i:i+len(ks)], ks)
		for j := range ks {
			for f := range maxKeyFields {
				p.lo[f] = min(p.lo[f], ks[j][f])
				p.hi[f] = max(p.hi[f], ks[j][f])
			}
		}
	}
	rankComms := false
	if bits.Len64(p.hi[commField]-p.lo[commField]) > 16 {
		// Communicator ids are hashes: rank the few distinct ones.
		if p.comms == nil {
			p.comms = make(map[uint64]uint64)
		}
		last, have := uint64(0), false
		for i := 0; i < len(rows); i += keyChunk {
			ks := chunk[:min(keyChunk, len(rows)-i)]
			key(rows[i:i+len(ks)], ks)
			for j := range ks {
				c := ks[j][commField]
				if have && c == last {
					continue
				}
				last, have = c, true
				p.comms[c] = 0
				if len(p.comms) > maxCommIDs {
					return 0, 0, false
				}
			}
		}
		ids := make([]uint64, 0, len(p.comms))
		for c := range p.comms {
			ids = append(ids, c)
		}
		slices.Sort(ids)
		for i, c := range ids {
			p.comms[c] = uint64(i)
		}
		p.lo[commField], p.hi[commField] = 0, uint64(len(ids)-1)
		rankComms = true
	}
	idxBits = uint(bits.Len(uint(len(rows))))
	total := idxBits
	for f := maxKeyFields - 1; f >= 0; f-- {
		w := uint(bits.Len64(p.hi[f] - p.lo[f]))
		p.shift[f] = uint64(total)
		total += w
		if total > 64 {
			return 0, 0, false
		}
	}
	for i := 0; i < len(rows); i += keyChunk {
		ks := chunk[:min(keyChunk, len(rows)-i)]
		key(rows[i:i+len(ks)], ks)
		out := keys[i : i+len(ks)]
		for j := range ks {
			k := &ks[j]
			if rankComms {
				k[commField] = p.comms[k[commField]]
			}
			w := uint64(i + j)
			for f := range maxKeyFields {
				w |= (k[f] - p.lo[f]) << p.shift[f]
			}
			out[j] = w
		}
	}
	return idxBits, total - idxBits, true
}

// radixBits is the digit width of radixSort.
const radixBits = 11

// radixSort sorts keys stably by bits [lo, lo+n) using tmp (as long as keys)
// and returns the slice holding the result (keys or tmp). It counts every
// digit in one pass and skips digits that take one value.
func radixSort(keys, tmp []uint64, lo, n uint) []uint64 {
	if len(keys) == 0 || n == 0 {
		return keys
	}
	const mask = 1<<radixBits - 1
	passes := int((n + radixBits - 1) / radixBits)
	count := make([][1 << radixBits]int, passes)
	for _, k := range keys {
		k >>= lo
		for p := range count {
			count[p][k&mask]++
			k >>= radixBits
		}
	}
	for p := range count {
		c := &count[p]
		shift := lo + uint(p)*radixBits
		if c[(keys[0]>>shift)&mask] == len(keys) {
			continue // one digit value: nothing moves
		}
		sum := 0
		for d, v := range c {
			c[d] = sum
			sum += v
		}
		for _, k := range keys {
			d := (k >> shift) & mask
			tmp[c[d]] = k
			c[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}
