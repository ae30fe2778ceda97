package traces

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// maxSummaryGroups bounds the rows of each summary table; further groups
// are counted in a last "(other)" row.
const maxSummaryGroups = 1 << 14

type callGroup struct {
	op, algo, proto string
	bytes           int64
}

type stat struct {
	n             int64
	sum, min, max int64
	bytes         int64
	first, last   int64
	hasFirst      bool
}

func (s *stat) add(d, bytes, start, end int64) {
	if s.n == 0 || d < s.min {
		s.min = d
	}
	if s.n == 0 || d > s.max {
		s.max = d
	}
	if !s.hasFirst || start < s.first {
		s.first = start
	}
	if !s.hasFirst || end > s.last {
		s.last = end
	}
	s.hasFirst = true
	s.n++
	s.sum += d
	s.bytes += bytes
}

func usStr(ns int64) string { return string(us(nil, ns)) }

// WriteSummary writes summary tables of the traces (either may be nil):
// calls per (op, algorithm, protocol, message size) with their durations,
// steps per (primitive, protocol) and per rank with busy time and bytes.
func WriteSummary(w io.Writer, calls *CallReader, events *EventReader) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if calls != nil {
		groups := map[callGroup]*stat{}
		var other stat
		err := calls.Scan(Filter{}, func(rows []CallRow) error {
			for i := range rows {
				r := &rows[i]
				size, ok := DatatypeSize(r.Datatype)
				if !ok {
					size = 0
				}
				g := callGroup{r.Op, r.Algorithm, r.Protocol, r.Count * int64(size)}
				s := groups[g]
				if s == nil {
					if len(groups) >= maxSummaryGroups {
						other.add(r.EndNs-r.StartNs, g.bytes, r.StartNs, r.EndNs)
						continue
					}
					s = &stat{}
					groups[g] = s
				}
				s.add(r.EndNs-r.StartNs, g.bytes, r.StartNs, r.EndNs)
			}
			return nil
		})
		if err != nil {
			return err
		}
		keys := make([]callGroup, 0, len(groups))
		for k := range groups {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b callGroup) int {
			return cmp.Or(cmp.Compare(a.op, b.op), cmp.Compare(a.bytes, b.bytes), cmp.Compare(a.algo, b.algo), cmp.Compare(a.proto, b.proto))
		})
		fmt.Fprintf(w, "# calls (%s): durations in µs, per rank\n", calls.Info().Name)
		fmt.Fprintln(tw, "op\talgorithm\tprotocol\tbytes\tcalls\tmean\tmin\tmax\talgbw GB/s\t")
		row := func(op, algo, proto, bytes string, s *stat) {
			mean := s.sum / max(s.n, 1)
			bw := "-"
			if s.sum > 0 && s.bytes > 0 {
				bw = fmt.Sprintf("%.2f", float64(s.bytes)/float64(s.sum))
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t\n", op, dash(algo), dash(proto), bytes, s.n, usStr(mean), usStr(s.min), usStr(s.max), bw)
		}
		for _, k := range keys {
			row(k.op, k.algo, k.proto, fmt.Sprint(k.bytes), groups[k])
		}
		if other.n > 0 {
			row("(other)", "", "", "-", &other)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if events != nil {
		type pk struct{ prim, proto string }
		prims := map[pk]*stat{}
		ranks := map[int32]*stat{}
		var other, otherRanks stat
		err := events.Scan(Filter{}, func(rows []EventRow) error {
			for i := range rows {
				r := &rows[i]
				d := max(r.EndNs-r.StartNs, 0)
				k := pk{r.Primitive, r.Protocol}
				s := prims[k]
				if s == nil && len(prims) < maxSummaryGroups {
					s = &stat{}
					prims[k] = s
				}
				if s == nil {
					s = &other
				}
				s.add(d, r.Bytes, r.StartNs, r.EndNs)
				rs := ranks[r.Rank]
				if rs == nil && len(ranks) < maxSummaryGroups {
					rs = &stat{}
					ranks[r.Rank] = rs
				}
				if rs == nil {
					rs = &otherRanks
				}
				rs.add(d, r.Bytes, r.StartNs, r.EndNs)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if calls != nil {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "# steps (%s): times in µs\n", events.Info().Name)
		fmt.Fprintln(tw, "primitive\tprotocol\tsteps\tbytes\tbusy\tmean\tmax\t")
		pkeys := make([]pk, 0, len(prims))
		for k := range prims {
			pkeys = append(pkeys, k)
		}
		slices.SortFunc(pkeys, func(a, b pk) int { return cmp.Or(cmp.Compare(a.prim, b.prim), cmp.Compare(a.proto, b.proto)) })
		prow := func(a, b string, s *stat) {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t\n", a, dash(b), s.n, s.bytes, usStr(s.sum), usStr(s.sum/max(s.n, 1)), usStr(s.max))
		}
		for _, k := range pkeys {
			prow(k.prim, k.proto, prims[k])
		}
		if other.n > 0 {
			prow("(other)", "", &other)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "\n# ranks (%s): busy = sum of step times over channels, span = first start to last end, µs\n", events.Info().Name)
		fmt.Fprintln(tw, "rank\tsteps\tbytes\tbusy\tspan\t")
		rkeys := make([]int32, 0, len(ranks))
		for k := range ranks {
			rkeys = append(rkeys, k)
		}
		slices.Sort(rkeys)
		rrow := func(name string, s *stat) {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t\n", name, s.n, s.bytes, usStr(s.sum), usStr(s.last-s.first))
		}
		for _, k := range rkeys {
			rrow(fmt.Sprint(k), ranks[k])
		}
		if otherRanks.n > 0 {
			rrow("(other)", &otherRanks)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
