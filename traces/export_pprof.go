package traces

import (
	"cmp"
	"fmt"
	"io"
	"slices"

	"github.com/google/pprof/profile"
)

// maxProfileKeys bounds the distinct (rank, channel, link, primitive)
// stacks of a profile.
const maxProfileKeys = 1 << 20

type profKey struct {
	rank, channel int32
	from, to      int32 // the link; -1, -1 for steps that move nothing between ranks
	prim, proto   string
}

// Profile builds a pprof profile of where time went in an event trace. Each
// sample is a stack rank → channel → link → primitive (protocol) with three
// values: step time (ns), bytes and steps. A link is "a->b" for the peer a
// step sends to (else the peer it receives from). `go tool pprof -top`
// then ranks primitives, -tagfocus/-focus narrow to a rank or link, and
// -diff_base compares a simulated profile with a measured one.
func Profile(events *EventReader) (*profile.Profile, error) {
	agg := map[profKey]*[3]int64{}
	err := events.Scan(Filter{}, func(rows []EventRow) error {
		for i := range rows {
			r := &rows[i]
			k := profKey{rank: r.Rank, channel: r.Channel, from: -1, to: -1, prim: r.Primitive, proto: r.Protocol}
			switch {
			case r.SendPeer >= 0:
				k.from, k.to = r.Rank, r.SendPeer
			case r.RecvPeer >= 0:
				k.from, k.to = r.RecvPeer, r.Rank
			}
			v := agg[k]
			if v == nil {
				if len(agg) >= maxProfileKeys {
					return fmt.Errorf("%s: more than %d distinct rank/channel/link/primitive stacks", events.Info().Name, maxProfileKeys)
				}
				v = new([3]int64)
				agg[k] = v
			}
			v[0] += max(r.EndNs-r.StartNs, 0)
			v[1] += r.Bytes
			v[2]++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	keys := make([]profKey, 0, len(agg))
	for k := range agg {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b profKey) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.channel, b.channel), cmp.Compare(a.from, b.from),
			cmp.Compare(a.to, b.to), cmp.Compare(a.prim, b.prim), cmp.Compare(a.proto, b.proto))
	})
	p := &profile.Profile{
		SampleType: []*profile.ValueType{
			{Type: "time", Unit: "nanoseconds"},
			{Type: "bytes", Unit: "bytes"},
			{Type: "steps", Unit: "count"},
		},
		DefaultSampleType: "time",
		PeriodType:        &profile.ValueType{Type: "time", Unit: "nanoseconds"},
		Period:            1,
		Mapping:           []*profile.Mapping{{ID: 1, File: "twinccl-trace", HasFunctions: true}},
	}
	locs := map[string]*profile.Location{}
	loc := func(name string) *profile.Location {
		if l, ok := locs[name]; ok {
			return l
		}
		f := &profile.Function{ID: uint64(len(p.Function) + 1), Name: name, SystemName: name}
		p.Function = append(p.Function, f)
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Mapping: p.Mapping[0], Line: []profile.Line{{Function: f}}}
		p.Location = append(p.Location, l)
		locs[name] = l
		return l
	}
	for _, k := range keys {
		v := agg[k]
		link := "local"
		if k.from >= 0 {
			link = fmt.Sprintf("link %d->%d", k.from, k.to)
		}
		p.Sample = append(p.Sample, &profile.Sample{
			Location: []*profile.Location{ // leaf first
				loc(fmt.Sprintf("%s (%s)", k.prim, k.proto)),
				loc(link),
				loc(fmt.Sprintf("channel %02d", k.channel)),
				loc(fmt.Sprintf("rank %d", k.rank)),
			},
			Value:    []int64{v[0], v[1], v[2]},
			NumLabel: map[string][]int64{"rank": {int64(k.rank)}, "channel": {int64(k.channel)}},
			Label:    map[string][]string{"protocol": {k.proto}},
		})
	}
	if err := p.CheckValid(); err != nil {
		return nil, fmt.Errorf("building profile: %w", err)
	}
	return p, nil
}

// WritePprof writes Profile(events) in pprof's gzipped protobuf format.
func WritePprof(w io.Writer, events *EventReader) error {
	p, err := Profile(events)
	if err != nil {
		return err
	}
	return p.Write(w)
}
