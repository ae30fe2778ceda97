package model

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// badInputXML is a valid one-host topology; the tests below change one
// attribute of one line (lines numbered from 1).
var badInputXML = []string{
	`<system version="1">`,
	`  <cpu host_hash="0x1" numaid="0" affinity="0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="0x8f">`,
	`    <pci busid="0000:17:00.0" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000" subsystem_device="0x100b" link_speed="32.0 GT/s PCIe" link_width="16">`,
	`      <pci busid="0000:19:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">`,
	`        <gpu dev="0" sm="90" rank="0" gdr="1">`,
	`          <nvlink target="fffffff:ffff:ff" count="18" tclass="0x068000"/>`,
	`          <c2c bw="44712" count="5"/>`,
	`        </gpu>`,
	`      </pci>`,
	`      <pci busid="0000:1a:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16">`,
	`        <nic>`,
	`          <net name="mlx5_0" dev="0" speed="400000" port="1" latency="0" guid="0x1" maxconn="131072" gdr="1" coll="0"/>`,
	`        </nic>`,
	`      </pci>`,
	`    </pci>`,
	`  </cpu>`,
	`</system>`,
}

// badInputWith returns badInputXML with attribute key of line set to v.
func badInputWith(t *testing.T, line int, key, v string) string {
	t.Helper()
	lines := append([]string(nil), badInputXML...)
	l := lines[line-1]
	i := strings.Index(l, " "+key+`="`)
	require.GreaterOrEqual(t, i, 0, "line %d has no %s", line, key)
	start := i + len(key) + 3
	end := start + strings.IndexByte(l[start:], '"')
	lines[line-1] = l[:start] + v + l[end:]
	return strings.Join(lines, "\n") + "\n"
}

func loadBadInput(xml string) (*Cluster, error) {
	root, _, err := ParseTopologyXML(strings.NewReader(xml), "test.xml")
	if err != nil {
		return nil, err
	}
	return LoadCluster(root, "test.xml", LoadOptions{Params: DefaultParams()})
}

// TestBadTopologyAttributes: a numeric attribute that is not entirely a
// number of its kind, or is outside what is physical, is a *ParseError
// naming the file, line, element, attribute and value (NCCL would read a
// prefix, wrap to a C int, or read 0, and go on with a wrong system).
func TestBadTopologyAttributes(t *testing.T) {
	cl, err := loadBadInput(strings.Join(badInputXML, "\n"))
	require.NoError(t, err, "the template itself")
	require.Len(t, cl.Nodes, 1)

	for _, tc := range []struct {
		line     int
		key, val string
		want     string // the whole message when it starts with "test.xml:", else a part
	}{
		// The cases, whole messages.
		{6, "count", "999999999999", `test.xml:6: <nvlink> count="999999999999": out of range (NCCL would read -727379969, wrapped to a C int); want the number of NVLinks to that peer, an integer in 1..18 (NCCL 2.28.9 detects at most 18 per GPU)`},
		{12, "speed", "1e308", `test.xml:12: <net> speed="1e308": not an integer (NCCL would read 1); want the port speed in Mb/s, an integer in -1..100000000 (-1 and 0 mean unknown, which NCCL takes as 10000)`},
		// NVLink and C2C counts and bandwidths.
		{6, "count", "0", `<nvlink> count="0": out of range`},
		{6, "count", "19", `<nvlink> count="19": out of range`},
		{6, "count", "-2", `<nvlink> count="-2": out of range`},
		{6, "count", "2x", `<nvlink> count="2x": not an integer (NCCL would read 2)`},
		{6, "count", "", `<nvlink> count="": not an integer (NCCL would read 0)`},
		{7, "count", "4294967297", `<c2c> count="4294967297": out of range (NCCL would read 1, wrapped to a C int)`},
		{7, "bw", "-44712", `<c2c> bw="-44712": out of range; want the bandwidth of one C2C link in MB/s, an integer in 1..1000000`},
		{7, "bw", "44.7", `<c2c> bw="44.7": not an integer (NCCL would read 44)`},
		// NIC speed, latency and the other net attributes.
		{12, "speed", "-5", `<net> speed="-5": out of range`},
		{12, "speed", "nan", `<net> speed="nan": not an integer (NCCL would read 0)`},
		{12, "speed", "99999999999999999999", `<net> speed="99999999999999999999": out of range (NCCL would read -1, wrapped to a C int)`},
		{12, "latency", "nan", `test.xml:12: <net> latency="nan": out of range; want the latency in microseconds, a number in 0..1000000`},
		{12, "latency", "inf", `<net> latency="inf": out of range`},
		{12, "latency", "-1", `<net> latency="-1": out of range`},
		{12, "latency", "1e308", `<net> latency="1e308": out of range`},
		{12, "latency", "1e999", `<net> latency="1e999": out of range`},
		{12, "latency", "2us", `<net> latency="2us": not a number (NCCL would read 2)`},
		{12, "dev", "-1", `<net> dev="-1": out of range; want a network device index, an integer in 0..2147483647`},
		{12, "dev", "08", `<net> dev="08": not an integer (NCCL would read 0)`},
		{12, "port", "one", `<net> port="one": not an integer`},
		{12, "gdr", "2", `<net> gdr="2": out of range; want GPUDirect RDMA support, an integer in 0..1`},
		{12, "maxconn", "0", `<net> maxconn="0": out of range`},
		{12, "coll", "yes", `<net> coll="yes": not an integer`},
		{12, "guid", "0xZZ", `<net> guid="0xZZ": not hexadecimal (NCCL would read 0x0); want the NIC GUID, at most 16 hexadecimal digits (optionally after 0x)`},
		{12, "guid", "0x10000000000000000", `<net> guid="0x10000000000000000": more than 64 bits`},
		// GPU, PCI and CPU attributes.
		{5, "dev", "-3", `<gpu> dev="-3": out of range`},
		{5, "rank", "-1", `<gpu> rank="-1": out of range; want a rank`},
		{5, "rank", "0.5", `<gpu> rank="0.5": not an integer`},
		{5, "sm", "9a", `<gpu> sm="9a": not an integer (NCCL would read 9)`},
		{5, "gdr", "-1", `<gpu> gdr="-1": out of range`},
		{4, "link_width", "x16", `<pci> link_width="x16": not an integer (NCCL would read 0)`},
		{4, "link_width", "-16", `<pci> link_width="-16": out of range`},
		{3, "vendor", "0x10000", `<pci> vendor="0x10000": out of range; want a 16-bit PCI id, an integer in 0..65535`},
		{3, "subsystem_device", "0xg", `<pci> subsystem_device="0xg": not an integer (NCCL would read 0)`},
		{2, "numaid", "-2", `<cpu> numaid="-2": out of range; want a NUMA node number, an integer in -1..65535 (-1: none)`},
		{2, "numaid", "abc", `<cpu> numaid="abc": not an integer (NCCL would read 0)`},
		{2, "modelid", "0x8fz", `<cpu> modelid="0x8fz": not an integer (NCCL would read 143)`},
		{2, "familyid", "6.0", `<cpu> familyid="6.0": not an integer (NCCL would read 6)`},
		{2, "host_hash", "host1", `<cpu> host_hash="host1": not hexadecimal (NCCL would read 0x0)`},
	} {
		name := tc.key + "=" + tc.val
		_, err := loadBadInput(badInputWith(t, tc.line, tc.key, tc.val))
		require.Error(t, err, name)
		var pe *ParseError
		require.True(t, errors.As(err, &pe), "%s: not a *ParseError: %v", name, err)
		require.Equal(t, "test.xml", pe.File, name)
		require.Equal(t, tc.line, pe.Line, "%s: %v", name, err)
		if strings.HasPrefix(tc.want, "test.xml:") {
			require.EqualError(t, err, tc.want, name)
		} else {
			require.ErrorContains(t, err, tc.want, name)
		}
	}
}

// TestTopologyAttributesNCCLAccepts: values inside the ranges read as
// NCCL reads them, the forms NCCL itself writes or documents included.
func TestTopologyAttributesNCCLAccepts(t *testing.T) {
	load := func(line int, key, v string) *System {
		t.Helper()
		cl, err := loadBadInput(badInputWith(t, line, key, v))
		require.NoError(t, err, "%s=%q", key, v)
		return cl.Nodes[0].System
	}
	net := func(s *System) *NETInfo { return &s.Nodes[NET][0].NET }
	// speed -1 and 0: NCCL's 10 Gb/s (topo.cc: "Some NICs define speed = -1").
	require.Equal(t, float32(1.25), net(load(12, "speed", "-1")).BW)
	require.Equal(t, float32(1.25), net(load(12, "speed", "0")).BW)
	require.Equal(t, float32(50), net(load(12, "speed", " +400000 ")).BW)
	// guid is strtoull(guid, NULL, 16): the 0x prefix is optional.
	require.Equal(t, uint64(0x1a), net(load(12, "guid", "1a")).Asic)
	require.Equal(t, uint64(0xffffffffffffffff), net(load(12, "guid", "0xffffffffffffffff")).Asic)
	require.Equal(t, float32(0.5), net(load(12, "latency", "0.500000")).Latency)
	require.Equal(t, 3, net(load(12, "dev", "0x3")).Dev)
	require.Equal(t, 8, net(load(12, "port", "010")).Port) // octal, as strtol
	// link_width="" (NCCL writes it when sysfs has no width) is x16.
	s := load(4, "link_width", "")
	g := s.Nodes[GPU][0]
	for _, l := range g.Links {
		if l.Type == LinkPCI {
			require.Equal(t, float32(16*240/80), l.BW)
		}
	}
	require.Equal(t, CPU, load(2, "numaid", "-1").Nodes[CPU][0].Type)
	nvl := 0
	for _, l := range load(6, "count", "1").Nodes[GPU][0].Links {
		if l.Type == LinkNVL {
			require.Equal(t, NVLinkBW(90), l.BW)
			nvl++
		}
	}
	require.Equal(t, 1, nvl)
}

// TestParamsBadValues: the path settings' bad values are errors naming
// the variable (NCCL would read strtoll's prefix), except a value beyond
// 64 bits, which NCCL's ncclLoadParam ignores with "Invalid value ...,
// using default" (src/misc/param.cc): the default, and that warning.
func TestParamsBadValues(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	for _, tc := range []struct{ kv []string }{
		{[]string{"NCCL_P2P_DISABLE", "yes"}},
		{[]string{"NCCL_NET_GDR_READ", "1x"}},
		{[]string{"NCCL_SHM_DISABLE", "0b1"}},
		{[]string{"NCCL_PXN_DISABLE", "1.0"}},
	} {
		_, err := ParamsFromEnv(env(tc.kv...))
		require.EqualError(t, err, tc.kv[0]+`="`+tc.kv[1]+`": not an integer`)
	}
	_, err := ParamsFromEnv(env("NCCL_P2P_LEVEL", "NVLINK"))
	require.EqualError(t, err, `NCCL_P2P_LEVEL="NVLINK": expected one of LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS or a number 0-5`)

	var buf strings.Builder
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	p, err := ParamsFromEnv(env("NCCL_NET_GDR_READ", "99999999999999999999", "NCCL_SHM_DISABLE", " 1 "))
	slog.SetDefault(old)
	require.NoError(t, err)
	require.Equal(t, DefaultParams().NetGDRRead, p.NetGDRRead)
	require.True(t, p.SHMDisable)
	require.Contains(t, buf.String(), `level=WARN msg="Invalid value 99999999999999999999 for NCCL_NET_GDR_READ, using default (beyond 64 bits: NCCL 2.28.9 ignores it, src/misc/param.cc ncclLoadParam)"`)
}

// TestP2PLevelBadNumbers: a legacy numeric NCCL_P2P_LEVEL or
// NCCL_NET_GDR_LEVEL must be a whole non-negative integer (4294967295
// wrapped to -1 and indexed out of bounds, a panic); above 5 is SYS as in
// NCCL's ncclGetLevel.
func TestP2PLevelBadNumbers(t *testing.T) {
	for _, v := range []string{"4294967295", "2abc", "99999999999999999999", "1.5"} {
		_, err := ParamsFromEnv(func(k string) (string, bool) { return v, k == "NCCL_P2P_LEVEL" })
		require.EqualError(t, err, `NCCL_P2P_LEVEL="`+v+`": expected one of LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS or a number 0-5`)
	}
	for v, want := range map[string]PathType{"0": PathLOC, "2": PathPXB, "7": PathSYS, "0x3": PathPHB} {
		p, err := ParamsFromEnv(func(k string) (string, bool) { return v, k == "NCCL_NET_GDR_LEVEL" })
		require.NoError(t, err, v)
		require.Equal(t, want, p.GDRLevel, v)
	}
}

// TestKeepRanksReadsRanksAsNCCL: KeepRanks reads a rank as BuildSystem
// does (strtol: 0x1 is rank 1), so that it drops what the system would
// hold.
func TestKeepRanksReadsRanksAsNCCL(t *testing.T) {
	root, _, err := ParseTopologyXML(strings.NewReader(strings.Replace(strings.Join(badInputXML, "\n"), `rank="0"`, `rank="0x1"`, 1)), "test.xml")
	require.NoError(t, err)
	KeepRanks(root, 1)
	_, err = LoadCluster(root, "test.xml", LoadOptions{Params: DefaultParams()})
	require.ErrorContains(t, err, "no <gpu> element with a rank")
}
