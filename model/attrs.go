package model

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Numeric attributes of a topology XML.
//
// NCCL 2.28.9 reads them with C's conversions and no check at all
// (xml.h: xmlGetAttrInt is strtol(str, NULL, 0) stored in an int,
// xmlGetAttrFloat is strtof(str, NULL); topo.cc reads guid and host_hash
// with strtoull(str, NULL, 16)): a value with trailing text keeps its
// leading number (speed="1e308" is 1 Mb/s), one beyond a C int wraps
// (count="999999999999" is -727379969 links, a negative bandwidth), and
// nothing parses to 0. None of these is what the file meant, so twinccl
// refuses them: every numeric attribute BuildSystem reads goes through
// topoAttrs, which says what the whole value must be and the range that is
// physical, and a value outside it is a *ParseError naming the file, line,
// element, attribute and value. Values inside the ranges read exactly as
// NCCL reads them.

// attrKind is how NCCL converts an attribute.
type attrKind int

const (
	attrInt   attrKind = iota // strtol(s, NULL, 0) into a C int
	attrFloat                 // strtof(s, NULL)
	attrHex                   // strtoull(s, NULL, 16)
)

// attrSpec is what twinccl accepts for one numeric attribute.
type attrSpec struct {
	kind attrKind
	// lo and hi bound an attrInt or attrFloat value (inclusive).
	lo, hi float64
	// empty accepts "" (read as 0), for the attributes NCCL itself writes
	// empty.
	empty bool
	// what names the value and note (optional) says more, for the error.
	what, note string
}

// topoAttrs are the numeric attributes BuildSystem reads, by
// "element.attribute".
var topoAttrs = map[string]attrSpec{
	// topo.cc ncclTopoAddCpu: NCCL_TOPO_ID(systemId, numaId); xml.cc
	// writes numaid="-1" when sysfs has no NUMA node.
	"cpu.numaid":   {kind: attrInt, lo: -1, hi: 65535, what: "a NUMA node number", note: "-1: none"},
	"cpu.familyid": {kind: attrInt, lo: 0, hi: math.MaxInt32, what: "the CPUID family"},
	"cpu.modelid":  {kind: attrInt, lo: 0, hi: math.MaxInt32, what: "the CPUID model"},
	// topo.cc ncclGetSystemId: strtoull(host_hash, NULL, 16).
	"cpu.host_hash": {kind: attrHex, what: "the host hash"},
	// topo.cc ncclTopoAddPci: each id is shifted into 16 bits of
	// pci.device; a larger one would spill into its neighbour.
	"pci.vendor":           {kind: attrInt, lo: 0, hi: 0xffff, what: "a 16-bit PCI id"},
	"pci.device":           {kind: attrInt, lo: 0, hi: 0xffff, what: "a 16-bit PCI id"},
	"pci.subsystem_vendor": {kind: attrInt, lo: 0, hi: 0xffff, what: "a 16-bit PCI id"},
	"pci.subsystem_device": {kind: attrInt, lo: 0, hi: 0xffff, what: "a 16-bit PCI id"},
	// topo.cc ncclTopoAddPci: width*speed/80 GB/s, width 0 meaning x16;
	// xml.cc writes link_width="" when sysfs has no width (strtol: 0).
	// PCIe has at most 32 lanes; NCCL adds up the widths of the NICs it
	// merges into one virtual NIC, hence the margin.
	"pci.link_width": {kind: attrInt, lo: 0, hi: 1024, empty: true, what: "the PCIe lane count", note: "0 or empty: x16"},
	// topo.cc ncclTopoAddGpu.
	"gpu.sm":   {kind: attrInt, lo: 0, hi: 9999, what: "the compute capability", note: "major*10+minor"},
	"gpu.rank": {kind: attrInt, lo: 0, hi: math.MaxInt32, what: "a rank"},
	"gpu.dev":  {kind: attrInt, lo: 0, hi: math.MaxInt32, what: "a CUDA device index"},
	"gpu.gdr":  {kind: attrInt, lo: 0, hi: 1, what: "GPUDirect RDMA support"},
	// topo.cc ncclTopoAddNvLinks: count*ncclTopoNVLinkBw(sm) GB/s. count
	// is the number of NVLinks from the GPU to that peer: xml.cc
	// ncclTopoGetXmlFromGpu adds one per link and scans at most
	// maxNvLinks = 18 links per GPU (sm90 and later; fewer before).
	"nvlink.count": {kind: attrInt, lo: 1, hi: 18, what: "the number of NVLinks to that peer", note: "NCCL 2.28.9 detects at most 18 per GPU"},
	// topo.cc ncclTopoAddC2c: bw*count/1000 GB/s, bw the MB/s of one link
	// (NVML_FI_DEV_C2C_LINK_GET_MAX_BW), count the links that are up.
	"c2c.count": {kind: attrInt, lo: 1, hi: 64, what: "the number of C2C links"},
	"c2c.bw":    {kind: attrInt, lo: 1, hi: 1e6, what: "the bandwidth of one C2C link in MB/s"},
	// topo.cc ncclTopoAddNet.
	"net.dev": {kind: attrInt, lo: 0, hi: math.MaxInt32, what: "a network device index"},
	// "if (mbps <= 0) mbps = 10000; // Some NICs define speed = -1":
	// -1 (ethtool's SPEED_UNKNOWN) and 0 are NCCL's 10 Gb/s.
	"net.speed":   {kind: attrInt, lo: -1, hi: 1e8, what: "the port speed in Mb/s", note: "-1 and 0 mean unknown, which NCCL takes as 10000"},
	"net.latency": {kind: attrFloat, lo: 0, hi: 1e6, what: "the latency in microseconds"},
	"net.port":    {kind: attrInt, lo: 0, hi: math.MaxInt32, what: "a port number"},
	"net.gdr":     {kind: attrInt, lo: 0, hi: 1, what: "GPUDirect RDMA support"},
	"net.maxconn": {kind: attrInt, lo: 1, hi: math.MaxInt32, what: "the connection limit"},
	"net.coll":    {kind: attrInt, lo: 0, hi: 1, what: "CollNet support"},
	// topo.cc ncclTopoAddNet: strtoull(guid, NULL, 16).
	"net.guid": {kind: attrHex, what: "the NIC GUID"},
}

// attrNumber checks the value v of attribute key of e against topoAttrs
// and returns it as NCCL reads it: an int's strtol truncated to a C int
// or a float's strtof (f), a hex value's strtoull (u). A value that is
// not entirely one number of its kind, or is outside the attribute's
// range, is a *ParseError naming file, line, element, attribute and
// value, what NCCL would have read, and what is wanted.
func attrNumber(file string, e *Element, key, v string) (f float64, u uint64, err error) {
	spec, ok := topoAttrs[e.Name+"."+key]
	if !ok {
		panic("model: no attrSpec for " + e.Name + "." + key)
	}
	bad := func(problem string) error {
		want := spec.what
		switch spec.kind {
		case attrHex:
			want += ", at most 16 hexadecimal digits (optionally after 0x)"
		case attrInt:
			want += ", an integer in " + fmtBound(spec.lo) + ".." + fmtBound(spec.hi)
		default:
			want += ", a number in " + fmtBound(spec.lo) + ".." + fmtBound(spec.hi)
		}
		if spec.note != "" {
			want += " (" + spec.note + ")"
		}
		return xmlError(file, e, "<%s> %s=%q: %s; want %s", e.Name, key, v, problem, want)
	}
	if v == "" && spec.empty {
		return 0, 0, nil
	}
	switch spec.kind {
	case attrHex:
		u, whole, overflow := cWholeUint(v, 16)
		switch {
		case !whole:
			return 0, 0, bad(fmt.Sprintf("not hexadecimal (NCCL would read 0x%x)", cStrtoull(v, 16)))
		case overflow:
			return 0, 0, bad("more than 64 bits")
		}
		return 0, u, nil
	case attrFloat:
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil && !isRangeErr(err) {
			return 0, 0, bad(fmt.Sprintf("not a number (NCCL would read %g)", cStrtof(v)))
		}
		if err != nil || math.IsNaN(x) || x < spec.lo || x > spec.hi {
			return 0, 0, bad("out of range")
		}
		return float64(cStrtof(v)), 0, nil
	}
	n, whole := cWholeInt(v)
	if !whole {
		return 0, 0, bad(fmt.Sprintf("not an integer (NCCL would read %d)", cStrtol(v)))
	}
	if float64(n) < spec.lo || float64(n) > spec.hi {
		msg := "out of range"
		if int64(int32(n)) != n {
			msg += fmt.Sprintf(" (NCCL would read %d, wrapped to a C int)", cStrtol(v))
		}
		return 0, 0, bad(msg)
	}
	return float64(cStrtol(v)), 0, nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// fmtBound prints a range bound in full.
func fmtBound(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// cWholeInt parses s as strtoll(s, NULL, 0) does and reports whether the
// number took all of s but surrounding blanks (an empty s does not).
// n saturates as strtoll does.
func cWholeInt(s string) (n int64, whole bool) {
	t := strings.TrimLeft(s, cBlanks)
	body := t
	if body != "" && (body[0] == '+' || body[0] == '-') {
		body = body[1:]
	}
	digits, rest := cIntDigits(body, 0)
	whole = digits > 0 && strings.TrimRight(rest, cBlanks) == ""
	return cStrtoll(s), whole
}

// cWholeUint parses s as strtoull(s, NULL, base) without a sign and
// reports whether the number took all of s but surrounding blanks, and
// whether it overflowed 64 bits.
func cWholeUint(s string, base int) (u uint64, whole, overflow bool) {
	t := strings.TrimLeft(s, cBlanks)
	digits, rest := cIntDigits(t, base)
	whole = digits > 0 && strings.TrimRight(rest, cBlanks) == ""
	u, overflow = cParseUint(t, base)
	return u, whole, overflow
}

const cBlanks = " \t\n\v\f\r"

// cIntDigits returns how many digits strtol's parse of s (after the sign)
// takes in base (0: from the prefix, as cParseUint), and what is left.
// The "0" of a "0x" that no hex digit follows counts as the number.
func cIntDigits(s string, base int) (int, string) {
	if (base == 0 || base == 16) && len(s) >= 3 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && isHexDigit(s[2]) {
		s, base = s[2:], 16
	} else if base == 0 && s != "" && s[0] == '0' {
		base = 8
	} else if base == 0 {
		base = 10
	}
	i := 0
	for i < len(s) {
		d := digitVal(s[i])
		if d < 0 || d >= base {
			break
		}
		i++
	}
	return i, s[i:]
}
