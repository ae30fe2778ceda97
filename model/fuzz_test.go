package model

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// skipRecorder lets a fuzz target call sharedDir without being skipped when
// the shared data is absent: the skip is recorded instead.
type skipRecorder struct {
	testing.TB
	skipped bool
}

func (s *skipRecorder) Skipf(string, ...any) { s.skipped = true }

// fuzzSeeds are hand-written inputs, so that the fuzz target has seeds
// without the shared data.
var fuzzSeeds = []string{
	// The example of nccl-facts.md §1.2: one H100-class GPU and one NIC
	// under a Gen5 switch, NVLinks to the NVSwitch fabric.
	`<system version="1">
  <cpu numaid="0" affinity="0000ffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="0x8f">
    <pci busid="0000:17:00.0" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000" subsystem_device="0x100b" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:19:00.0" class="0x030200" vendor="0x10de" device="0x2330" subsystem_vendor="0x10de" subsystem_device="0x16c1" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="90" rank="0" gdr="1">
          <nvlink target="fffffff:ffff:ff" count="18" tclass="0x068000"/>
        </gpu>
      </pci>
      <pci busid="0000:1a:00.0" class="0x020700" link_speed="32.0 GT/s PCIe" link_width="16">
        <nic>
          <net name="mlx5_0" dev="0" speed="400000" port="1" guid="0x1" maxconn="131072" gdr="1"/>
        </nic>
      </pci>
    </pci>
  </cpu>
</system>
`,
	// Two GPUs joined by an NVLink bridge, two sockets, a CPU-attached NIC.
	`<system version="1">
  <cpu numaid="0" affinity="ff" arch="x86_64" vendor="AuthenticAMD" familyid="23" modelid="49">
    <pci busid="0000:01:00.0" class="0x030000" link_speed="16.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="86" rank="0" gdr="1">
        <nvlink target="0000:81:00.0" count="4" tclass="0x030000"/>
      </gpu>
    </pci>
    <nic>
      <net name="eth0" dev="0" speed="10000" port="0" latency="0.5" guid="0x2" maxconn="65536" gdr="0"/>
    </nic>
  </cpu>
  <cpu numaid="1" affinity="ff00" arch="x86_64" vendor="AuthenticAMD" familyid="23" modelid="49">
    <pci busid="0000:81:00.0" class="0x030000" link_speed="16.0 GT/s PCIe" link_width="16">
      <gpu dev="1" sm="86" rank="1" gdr="1">
        <nvlink target="0000:01:00.0" count="4" tclass="0x030000"/>
      </gpu>
    </pci>
  </cpu>
</system>
`,
	// Grace-style C2C GPU, arm64, two hosts.
	`<system version="1">
  <cpu host_hash="0x1" numaid="0" arch="arm64" affinity="ff">
    <pci busid="0000:01:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="100" rank="0" gdr="1">
        <nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>
        <c2c bw="44712" count="5"/>
      </gpu>
    </pci>
  </cpu>
  <cpu host_hash="0x2" numaid="0" arch="arm64" affinity="ff">
    <pci busid="0000:01:00.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="100" rank="1" gdr="1">
        <nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>
        <c2c bw="44712" count="5"/>
      </gpu>
    </pci>
  </cpu>
</system>
`,
	// Broadcom switch with a pcilink, POWER CPU NVLink.
	`<system version="1">
  <cpu numaid="0" arch="ppc64" affinity="ff">
    <pci busid="0000:10:00.0" class="0x060400" vendor="0x1000" device="0xc010" subsystem_vendor="0x1000" subsystem_device="0xa064" link_speed="16.0 GT/s PCIe" link_width="16">
      <pcilink target="0000:20:00.0"/>
      <pci busid="0000:11:00.0" class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="70" rank="0" gdr="1">
          <nvlink target="0000:00:00.0" count="2" tclass="0x068001"/>
        </gpu>
      </pci>
    </pci>
    <pci busid="0000:20:00.0" class="0x060400" vendor="0x1000" device="0xc010" subsystem_vendor="0x1000" subsystem_device="0xa064" link_speed="16.0 GT/s PCIe" link_width="16">
      <pcilink target="0000:10:00.0"/>
      <pci busid="0000:21:00.0" class="0x020000" link_speed="16.0 GT/s PCIe" link_width="16">
        <nic><net name="ib0" dev="0" speed="100000" gdr="1" coll="1"/></nic>
      </pci>
    </pci>
  </cpu>
</system>
`,
	`<system version='1'><cpu numaid='0' arch='x86_64' vendor='GenuineIntel' familyid='6' modelid='85'><pci busid='0000:01:00.0' class='0x030200' link_speed='8 GT/s' link_width='0'><gpu dev='0' sm='80' rank='0' gdr='0'/></pci></cpu></system>`,
	"<!-- c -->\r\n<system version=\"0x1\" >\r\n<cpu numaid=\"0\" arch=\"x86_64\" />\r\n</system>\r\n",
	"<system version=\"1\">\n<cpu numaid=\"0\">\n<gpu dev=\"0\"/>\n<xgmi target=\"x\" count=\"1\"/>\n</cpu>\n</system>\n",
	"<system version=\"2\"><cpu numaid=\"0\"/></system>",
	"<?xml version=\"1.0\"?>\n<system version=\"1\"/>\n",
	"<system version=\"1\">\n\t<cpu numaid=\"0\"/>\n</system>\n",
	"<system version=\"1\">\n<cpu numaid=\"0\"\n arch=\"x86_64\"/>\n</system>\n",
	"<system version=\"1\">\n<cpu>\n<nic>\n</cpu>\n</system>\n",
	"<system version=\"1\">\n<!-- unterminated\n",
	"<system version=\"1\">" + strings.Repeat(`<cpu numaid="0"/>`, 300) + "</system>",
	"",
}

func FuzzParseTopology(f *testing.F) {
	rec := &skipRecorder{TB: f}
	sharedDir(rec)
	if !rec.skipped {
		for _, file := range sharedTopologyFiles(f) {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 64<<10 {
			t.Skip("input larger than 64 KiB")
		}
		checkTopologyInput(t, data)
	})
}

// checkTopologyInput runs one fuzz input through the parser, the writer and
// the system builder, and checks their invariants.
func checkTopologyInput(t *testing.T, data []byte) {
	root, _, err := ParseTopologyXML(bytes.NewReader(data), "fuzz")
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) || pe.File != "fuzz" {
			t.Fatalf("error is not a *ParseError for the input: %T %v", err, err)
		}
		return
	}
	var out bytes.Buffer
	if err := WriteXML(&out, root); err != nil {
		if !xmlUnwritable(root) {
			t.Fatalf("WriteXML: %v", err)
		}
	} else {
		root2, warns2, err := ParseTopologyXML(bytes.NewReader(out.Bytes()), "rewritten")
		if err != nil {
			t.Fatalf("re-parse of WriteXML output: %v\n%s", err, out.Bytes())
		}
		if len(warns2) > 0 {
			t.Fatalf("re-parse of WriteXML output warns: %v", warns2)
		}
		if d := xmlTreeDiff(root, root2); d != "" {
			t.Fatalf("re-parsed tree differs: %s", d)
		}
		var out2 bytes.Buffer
		if err := WriteXML(&out2, root2); err != nil || !bytes.Equal(out.Bytes(), out2.Bytes()) {
			t.Fatalf("second write differs (err %v)", err)
		}
	}
	cl, err := LoadCluster(root, "fuzz", LoadOptions{Params: DefaultParams()})
	if err != nil {
		return
	}
	for _, node := range cl.Nodes {
		if err := CheckPathInvariants(node.System); err != nil {
			t.Fatalf("node %d: %v", node.Index, err)
		}
	}
}

// xmlUnwritable reports whether some name or value of the tree is one WriteXML
// must refuse: a value with a double quote (only a single-quoted value can
// hold one) or a name with a quote.
func xmlUnwritable(e *Element) bool {
	if strings.ContainsAny(e.Name, `"'`) {
		return true
	}
	for _, a := range e.Attrs {
		if strings.ContainsAny(a.Key, `"'`) || strings.Contains(a.Value, `"`) {
			return true
		}
	}
	for _, c := range e.Children {
		if xmlUnwritable(c) {
			return true
		}
	}
	return false
}
