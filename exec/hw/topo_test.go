package hw

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func render(t *testing.T, root *model.Element) string {
	t.Helper()
	var b bytes.Buffer
	if err := model.WriteXML(&b, root); err != nil {
		t.Fatalf("WriteXML: %v", err)
	}
	// What we write must read back with NCCL's rules.
	if _, warns, err := model.ParseTopologyXML(bytes.NewReader(b.Bytes()), "discovered"); err != nil || len(warns) > 0 {
		t.Fatalf("discovered XML does not parse back cleanly: err=%v warnings=%v\n%s", err, warns, b.String())
	}
	return b.String()
}

var hostHashAttr = regexp.MustCompile(`host_hash="0x[0-9a-f]+"`)

// h200VM builds the machine our baseline came from: a VM with two H200 SXM
// directly on the root complex, no NUMA information, the NVSwitches hidden
// (NVLink targets fffffff:ff:ff.0), and one virtio eth0.
func h200VM(t *testing.T) (Options, *fakeRoot) {
	r := newFakeRoot(t)
	h200 := pciDev{class: "0x030200", vendor: "0x10de", device: "0x2335", subVendor: "0x10de", subDevice: "0x18bf",
		speed: "32.0 GT/s PCIe", width: "16", numa: "-1"}
	r.addPCI(h200, "pci0000:00", "0000:00:06.0")
	r.addPCI(h200, "pci0000:00", "0000:00:07.0")
	nic := r.addPCI(pciDev{class: "0x020000", vendor: "0x1af4", device: "0x1041", subVendor: "0x1af4", subDevice: "0x1100", numa: "-1"}, "pci0000:00", "0000:00:03.0")
	virtio := r.mkdir(nic, "virtio2")
	r.symlink(filepath.Join(r.sys, "bus", "virtio"), filepath.Join(virtio, "subsystem"))
	r.addNetIf("eth0", virtio, "")
	r.addNetIf("lo", "", "")
	r.cpuinfo("GenuineIntel", 6, 207)
	r.bootID("5e4c1c6b-2f0a-4a57-9d3c-7f6a1d2e9b10")

	switchLinks := make([]fakeLink, 18)
	for i := range switchLinks {
		switchLinks[i] = fakeLink{p2p: true, active: true, remote: PCIInfo{BusID: "FFFFFFFF:FF:FF.0", BusIDLegacy: "fffffff:ff:ff.0"}}
	}
	gpus := &fakeNVML{gpus: []*fakeGPU{
		{pci: PCIInfo{BusID: "00000000:00:06.0", BusIDLegacy: "0000:00:06.0"}, major: 9, minor: 0, links: switchLinks},
		{pci: PCIInfo{BusID: "00000000:00:07.0", BusIDLegacy: "0000:00:07.0"}, major: 9, minor: 0, links: switchLinks},
	}}
	return Options{
		SysRoot:  r.sys,
		ProcRoot: r.proc,
		NVML:     gpus,
		CUDA:     fakeCUDA{"0000:00:06.0": {GPUDirectRDMA: true, DMABuf: true}, "0000:00:07.0": {GPUDirectRDMA: true, DMABuf: true}},
		Interfaces: func() ([]NetInterface, error) {
			return []NetInterface{{Name: "lo", Addrs: []string{"127.0.0.1", "::1"}}, {Name: "eth0", Addrs: []string{"192.0.2.2", "fe80::5054:ff:fe12:3456"}}}, nil
		},
		Getenv:   env(nil),
		Hostname: func() (string, error) { return "vm", nil },
		Arch:     "amd64",
		Logger:   quietLogger(),
	}, r
}

// TestDiscoverH200VM reproduces the dump NCCL 2.28.9 wrote on the
// nvidia-h200-x2 machine, byte for byte except host_hash (which hashes the
// host name and the boot id).
func TestDiscoverH200VM(t *testing.T) {
	opts, _ := h200VM(t)
	root, err := Discover(opts)
	if err != nil {
		t.Fatal(err)
	}
	got := render(t, root)

	ref, err := os.ReadFile(filepath.Join("..", "..", "testdata", "xml", "h200x2-nvswitch.xml"))
	if err != nil {
		t.Fatal(err)
	}
	want := hostHashAttr.ReplaceAllString(string(ref),
		fmt.Sprintf(`host_hash="0x%x"`, ncclHash("vm5e4c1c6b-2f0a-4a57-9d3c-7f6a1d2e9b10")))
	if got != want {
		t.Errorf("discovered XML differs from NCCL's dump\n--- got\n%s--- want\n%s", got, want)
	}
}

// TestRecordedDump checks testdata/xml/h200x2-nvswitch-twinccl-dump.xml,
// written by `run topo --dump` on the nvidia-h200-x2 machine: it is NCCL's
// reference dump up to host_hash, and its host_hash is NCCL's hash of that
// boot's host name and boot id (NCCL 2.28.9 dumped the same bytes on that
// boot).
func TestRecordedDump(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "xml")
	ours, err := os.ReadFile(filepath.Join(dir, "h200x2-nvswitch-twinccl-dump.xml"))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := os.ReadFile(filepath.Join(dir, "h200x2-nvswitch.xml"))
	if err != nil {
		t.Fatal(err)
	}
	hash := fmt.Sprintf(`host_hash="0x%x"`, ncclHash("vm19afad10-3611-4f83-b055-85a70bf85150"))
	if !strings.Contains(string(ours), hash) {
		t.Errorf("recorded dump lacks %s", hash)
	}
	if hostHashAttr.ReplaceAllString(string(ours), "H") != hostHashAttr.ReplaceAllString(string(ref), "H") {
		t.Errorf("recorded dump differs from NCCL's beyond host_hash")
	}
}

// pcieSwitchIB builds a two-socket machine: on socket 0 a PCIe switch
// (upstream port 0000:17:00.0) holds GPU 0 (19:00.0), GPU 1 (1a:00.0) and a
// dual-port ConnectX NIC (1c:00.0 and 1c:00.1, mlx5_0 and mlx5_1); the GPUs
// share an NVLink bridge (4 links). On socket 1, GPU 2 (9a:00.0, an A100
// without NVLink) sits on a root port. A Broadcom switch lists a P2P link.
func pcieSwitchIB(t *testing.T) Options {
	r := newFakeRoot(t)
	rp := pciDev{class: "0x060400", vendor: "0x8086", device: "0x352a", subVendor: "0x8086", subDevice: "0x0000", speed: "32.0 GT/s PCIe", width: "16", numa: "0"}
	up := pciDev{class: "0x060400", vendor: "0x1000", device: "0xc030", subVendor: "0x1000", subDevice: "0x100b", speed: "32.0 GT/s PCIe", width: "16", numa: "0"}
	down := up
	down.subDevice = "0x1000"
	gpu := pciDev{class: "0x030200", vendor: "0x10de", device: "0x2330", subVendor: "0x10de", subDevice: "0x16c1", speed: "32.0 GT/s PCIe", width: "16", numa: "0"}
	nic := pciDev{class: "0x020700", vendor: "0x15b3", device: "0x1021", subVendor: "0x15b3", subDevice: "0x0041", speed: "32.0 GT/s PCIe", width: "16", numa: "0"}

	base := []string{"pci0000:16", "0000:16:02.0"}
	r.addPCI(rp, base...)
	r.addPCI(up, append(base, "0000:17:00.0")...)
	r.addPCI(down, append(base, "0000:17:00.0", "0000:18:00.0")...)
	r.addPCI(down, append(base, "0000:17:00.0", "0000:18:01.0")...)
	r.addPCI(down, append(base, "0000:17:00.0", "0000:18:02.0")...)
	r.addPCI(gpu, append(base, "0000:17:00.0", "0000:18:00.0", "0000:19:00.0")...)
	r.addPCI(gpu, append(base, "0000:17:00.0", "0000:18:01.0", "0000:1a:00.0")...)
	nic0 := r.addPCI(nic, append(base, "0000:17:00.0", "0000:18:02.0", "0000:1c:00.0")...)
	nic1 := r.addPCI(nic, append(base, "0000:17:00.0", "0000:18:02.0", "0000:1c:00.1")...)
	// Slower root port above the switch: the switch's link runs at Gen4 x8.
	r.write(filepath.Join(r.sys, "devices", "pci0000:16", "0000:16:02.0", "max_link_speed"), "16.0 GT/s PCIe\n")
	r.write(filepath.Join(r.sys, "devices", "pci0000:16", "0000:16:02.0", "max_link_width"), "8\n")
	// Broadcom virtual switch link (its target must exist as a PCI device).
	r.mkdir(r.sys, "kernel", "pci_switch_link", "virtual_switch_links", "0000:17:00.0", "0000:18:02.0")
	r.mkdir(r.sys, "kernel", "pci_switch_link", "virtual_switch_links", "0000:17:00.0", "junk")

	a100 := pciDev{class: "0x030200", vendor: "0x10de", device: "0x20b0", subVendor: "0x10de", subDevice: "0x134f", speed: "16.0 GT/s PCIe", width: "16", numa: "1"}
	r.addPCI(pciDev{class: "0x060400", vendor: "0x8086", device: "0x352b", speed: "16.0 GT/s PCIe", width: "16", numa: "1"}, "pci0000:98", "0000:98:01.0")
	r.addPCI(a100, "pci0000:98", "0000:98:01.0", "0000:9a:00.0")

	r.write(filepath.Join(r.sys, "devices", "system", "node", "node0", "cpumap"), "00000000,0000ffff\n")
	r.write(filepath.Join(r.sys, "devices", "system", "node", "node1", "cpumap"), "00000000,ffff0000\n")
	r.write(filepath.Join(r.sys, "module", "nvidia_peermem", "version"), "1.0\n")

	r.addIB("mlx5_1", nic1, "946d:ae03:0050:709a", ibPortSpec{1, "4: ACTIVE", "InfiniBand", "400 Gb/sec (4X NDR)"})
	r.addIB("mlx5_0", nic0, "946d:ae03:0050:709a", ibPortSpec{1, "4: ACTIVE", "InfiniBand", "400 Gb/sec (4X NDR)"})
	r.addIB("mlx5_2", nic0, "946d:ae03:0050:709b", ibPortSpec{1, "1: DOWN", "InfiniBand", "10 Gb/sec (4X SDR)"})
	r.addNetIf("eno1", "", "1000")
	r.cpuinfo("AuthenticAMD", 25, 17) // Zen 4: CPUID family 0xF+0xA = 175
	r.bootID("0b9b9a56-0000-4000-8000-000000000001")

	bridge := func(remote string) []fakeLink {
		l := make([]fakeLink, 18)
		for i := 0; i < 4; i++ {
			l[i] = fakeLink{p2p: true, active: true, remote: PCIInfo{BusID: "0000" + remote, BusIDLegacy: remote}}
		}
		l[5] = fakeLink{p2p: false, active: true, remote: PCIInfo{BusIDLegacy: remote}} // not P2P capable
		l[6] = fakeLink{p2p: true, active: false, remote: PCIInfo{BusIDLegacy: remote}} // down
		return l
	}
	gpus := &fakeNVML{gpus: []*fakeGPU{
		{pci: PCIInfo{BusID: "00000000:19:00.0"}, major: 9, minor: 0, links: bridge("0000:1A:00.0")},
		{pci: PCIInfo{BusID: "00000000:1A:00.0"}, major: 9, minor: 0, links: bridge("0000:19:00.0")},
		{pci: PCIInfo{BusID: "00000000:9A:00.0"}, major: 8, minor: 0},
	}}
	return Options{
		SysRoot:  r.sys,
		ProcRoot: r.proc,
		NVML:     gpus,
		// CUDA's answer wins over the peer-memory module for the GPU's gdr.
		CUDA: fakeCUDA{"0000:19:00.0": {GPUDirectRDMA: true}, "0000:1a:00.0": {GPUDirectRDMA: true}, "0000:9a:00.0": {}},
		Interfaces: func() ([]NetInterface, error) {
			return []NetInterface{{Name: "lo", Addrs: []string{"127.0.0.1"}}, {Name: "eno1", Addrs: []string{"10.0.0.5"}}}, nil
		},
		Getenv:   env(nil),
		Hostname: func() (string, error) { return "node17", nil },
		Arch:     "amd64",
		Logger:   quietLogger(),
	}
}

// TestDiscoverPCIeSwitchIB checks a bare-metal shape against a golden file
// (go test -update rewrites it; review the diff by hand against NCCL's
// rules described in the file's comments).
func TestDiscoverPCIeSwitchIB(t *testing.T) {
	root, err := Discover(pcieSwitchIB(t))
	if err != nil {
		t.Fatal(err)
	}
	got := render(t, root)
	golden := filepath.Join("testdata", "pcie-switch-ib.xml")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("discovered XML differs from %s\n--- got\n%s--- want\n%s", golden, got, want)
	}
	// Facts the golden file must show, stated independently.
	for _, s := range []string{
		`<cpu host_hash="0x`,
		`numaid="0" affinity="00000000,0000ffff" arch="x86_64" vendor="AuthenticAMD" familyid="175" modelid="17">`,
		// The switch hangs off the CPU; its link is the slower root port's.
		`<pci busid="0000:17:00.0" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000" subsystem_device="0x100b" link_speed="16.0 GT/s PCIe" link_width="8">`,
		`<pcilink target="0000:18:02.0"/>`,
		`<nvlink target="0000:1a:00.0" count="4" tclass="0x030200"/>`,
		`<net name="mlx5_0" dev="0" latency="0" speed="400000" port="1" guid="0x9a70500003ae6d94" maxconn="131072" gdr="1"/>`,
		`<net name="mlx5_1" dev="1" latency="0" speed="400000" port="2" guid="0x9a70500003ae6d94" maxconn="131072" gdr="1"/>`,
		`<gpu dev="2" sm="80" rank="2" gdr="0"/>`,
	} {
		if !strings.Contains(got, s) {
			t.Errorf("discovered XML lacks %s", s)
		}
	}
	if strings.Contains(got, "mlx5_2") || strings.Contains(got, "eno1") {
		t.Errorf("a down RDMA port or a socket NIC made it into an IB topology:\n%s", got)
	}
}

func TestDiscoverNoNVML(t *testing.T) {
	_, err := Discover(Options{Logger: quietLogger()})
	if !errors.Is(err, ErrNoNVML) {
		t.Fatalf("Discover without NVML: got %v, want ErrNoNVML", err)
	}
	if !strings.Contains(err.Error(), "NVML not available") {
		t.Errorf("error %q does not say NVML is not available", err)
	}
}

func TestDiscoverNoGPU(t *testing.T) {
	opts, _ := h200VM(t)
	opts.NVML = &fakeNVML{}
	if _, err := Discover(opts); err == nil || !strings.Contains(err.Error(), "no GPU") {
		t.Fatalf("Discover with zero GPUs: got %v, want a no-GPU error", err)
	}
}

// A GPU that sysfs does not know goes under a <cpu numaid="-1"> with empty
// link attributes, as in NCCL.
func TestDiscoverGPUWithoutSysfs(t *testing.T) {
	opts, _ := h200VM(t)
	opts.NVML = &fakeNVML{gpus: []*fakeGPU{{pci: PCIInfo{BusID: "00000000:00:08.0"}, major: 8, minor: 6}}}
	opts.CUDA = nil
	root, err := Discover(opts)
	if err != nil {
		t.Fatal(err)
	}
	got := render(t, root)
	for _, s := range []string{
		`numaid="-1" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="207">`,
		`<pci busid="0000:00:08.0" class="0x03" link_speed="" link_width="">`,
		`<gpu dev="0" sm="86" rank="0" gdr="0"/>`,
		`<net name="eth0" dev="0" latency="0" speed="10000" port="0" guid="0x0" maxconn="65536" gdr="0"/>`,
	} {
		if !strings.Contains(got, s) {
			t.Errorf("discovered XML lacks %s:\n%s", s, got)
		}
	}
}

func TestSocketNICs(t *testing.T) {
	opts, r := h200VM(t)
	// A PCI Ethernet NIC with a known speed, a docker bridge and a veth.
	nic := r.addPCI(pciDev{class: "0x020000", vendor: "0x14e4", device: "0x16d8", subVendor: "0x1028", subDevice: "0x07e5", speed: "8.0 GT/s PCIe", width: "4", numa: "-1"}, "pci0000:00", "0000:00:02.0")
	r.addNetIf("eno1", nic, "25000")
	r.addNetIf("docker0", "", "")
	ifs := []NetInterface{
		{Name: "lo", Addrs: []string{"127.0.0.1", "::1"}},
		{Name: "eth0", Addrs: []string{"fe80::1"}},
		{Name: "eno1", Addrs: []string{"10.1.2.3"}},
		{Name: "docker0", Addrs: []string{"172.17.0.1"}},
		{Name: "veth1", Addrs: []string{"fe80::2"}},
	}
	opts.Interfaces = func() ([]NetInterface, error) { return ifs, nil }
	root, err := Discover(opts)
	if err != nil {
		t.Fatal(err)
	}
	got := render(t, root)
	// IPv4 interfaces come first (getifaddrs order), docker0 and lo are left
	// out, and the PCI NIC sits in its <pci> at its bus-id position.
	want := `<system version="1">
  <cpu host_hash="HASH" numaid="-1" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="207">
    <pci busid="0000:00:02.0" class="0x020000" vendor="0x14e4" device="0x16d8" subsystem_vendor="0x1028" subsystem_device="0x07e5" link_speed="8.0 GT/s PCIe" link_width="0">
      <nic>
        <net name="eno1" dev="0" latency="0" speed="25000" port="0" guid="0x0" maxconn="65536" gdr="0"/>
      </nic>
    </pci>
    <pci busid="0000:00:06.0" class="0x030200" vendor="0x10de" device="0x2335" subsystem_vendor="0x10de" subsystem_device="0x18bf" link_speed="32.0 GT/s PCIe" link_width="0">
      <gpu dev="0" sm="90" rank="0" gdr="1">
        <nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>
      </gpu>
    </pci>
    <nic>
      <net name="eth0" dev="1" latency="0" speed="10000" port="0" guid="0x1" maxconn="65536" gdr="0"/>
      <net name="veth1" dev="2" latency="0" speed="10000" port="0" guid="0x2" maxconn="65536" gdr="0"/>
    </nic>
    <pci busid="0000:00:07.0" class="0x030200" vendor="0x10de" device="0x2335" subsystem_vendor="0x10de" subsystem_device="0x18bf" link_speed="32.0 GT/s PCIe" link_width="0">
      <gpu dev="1" sm="90" rank="1" gdr="1">
        <nvlink target="fffffff:ff:ff.0" count="18" tclass="0x068000"/>
      </gpu>
    </pci>
  </cpu>
</system>
`
	got = hostHashAttr.ReplaceAllString(got, `host_hash="HASH"`)
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	// NCCL_SOCKET_IFNAME selects interfaces by prefix, "=" by exact name.
	opts.Getenv = env(map[string]string{"NCCL_SOCKET_IFNAME": "=eth0"})
	root, err = Discover(opts)
	if err != nil {
		t.Fatal(err)
	}
	got = render(t, root)
	if strings.Contains(got, "eno1") || !strings.Contains(got, `<net name="eth0" dev="0"`) {
		t.Errorf("NCCL_SOCKET_IFNAME==eth0 not honoured:\n%s", got)
	}
}

func TestFindInterfaces(t *testing.T) {
	ifs := []NetInterface{
		{Name: "lo", Addrs: []string{"127.0.0.1", "::1"}},
		{Name: "ib0", Addrs: []string{"fe80::10"}},
		{Name: "eth0", Addrs: []string{"192.0.2.2", "fe80::1"}},
		{Name: "eth1", Addrs: nil},
		{Name: "docker0", Addrs: []string{"172.17.0.1"}},
		{Name: "ib1", Addrs: []string{"10.0.0.1"}},
	}
	for _, tc := range []struct {
		list, family string
		max          int
		want         string
	}{
		{"ib", "", 16, "ib1,ib0"},
		{"^docker,lo", "", 16, "eth0,ib1,ib0"},
		{"^docker,lo", "", 1, "eth0"},
		{"^docker,lo", "AF_INET6", 16, "ib0,eth0"},
		{"=eth", "", 16, ""},
		{"eth", "", 16, "eth0"},
		{"docker", "", 16, "docker0"},
		{"lo", "", 16, "lo"},
		{"", "", 16, "lo,eth0,docker0,ib1,ib0"},
	} {
		got := strings.Join(findInterfaces(ifs, tc.list, tc.family, tc.max), ",")
		if got != tc.want {
			t.Errorf("findInterfaces(%q, %q, %d) = %q, want %q", tc.list, tc.family, tc.max, got, tc.want)
		}
	}
}

func TestHostHash(t *testing.T) {
	// Host name and boot id of the nvidia-h200-x2 machine, and the host_hash
	// NCCL 2.28.9 dumped on that boot.
	if got := ncclHash("vm37895f32-b4a5-40a8-90d4-aa1294572f7b"); got != 0xc0119414f88cdbd3 {
		t.Errorf("ncclHash = %#x, want 0xc0119414f88cdbd3 (NCCL 2.28.9 on the same boot)", got)
	}
	if ncclHash("") == ncclHash("\x00") || ncclHash("abcdefgh") == ncclHash("abcdefgh\x00") {
		t.Error("ncclHash ignores the length")
	}

	opts, _ := h200VM(t)
	d, err := NewDiscoverer(opts)
	if err != nil {
		t.Fatal(err)
	}
	if s := d.hostHashString(); s != "vm5e4c1c6b-2f0a-4a57-9d3c-7f6a1d2e9b10" {
		t.Errorf("host hash string = %q", s)
	}
	opts.Getenv = env(map[string]string{"NCCL_HOSTID": "myhost"})
	d, _ = NewDiscoverer(opts)
	if s := d.hostHashString(); s != "myhost" {
		t.Errorf("host hash string with NCCL_HOSTID = %q, want myhost", s)
	}
}

func TestCPUIDFamily(t *testing.T) {
	for linux, want := range map[int]int{6: 6, 7: 7, 15: 15, 23: 143, 25: 175, 26: 191} {
		if got := cpuidFamily(linux); got != want {
			t.Errorf("cpuidFamily(%d) = %d, want %d", linux, got, want)
		}
	}
}

func TestHelpers(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{{"16", 16}, {"0x10", 16}, {"010", 8}, {"", 0}, {"x", 0}, {"-1", -1}, {" 25000\n", 25000}, {"8 lanes", 8}} {
		if got := model.Strtol(tc.in); got != tc.want {
			t.Errorf("model.Strtol(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
	if scanSpeed("32.0 GT/s PCIe") != 32 || scanSpeed("8 GT/s") != 8 || scanSpeed("Unknown") <= 1e30 || scanSpeed("") <= 1e30 {
		t.Error("scanSpeed")
	}
	for in, want := range map[string]string{
		"00000000:00:06.0": "0000:00:06.0", "0000:9A:00.1": "0000:9a:00.1", "00000001:c1:1f.7": "0001:c1:1f.7",
	} {
		if got, err := parseBusID(in); err != nil || got != want {
			t.Errorf("parseBusID(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0000:00:06", "00:06.0", "zz:00:00.0"} {
		if _, err := parseBusID(bad); err == nil {
			t.Errorf("parseBusID(%q) accepted", bad)
		}
	}
	if !isBDF("0000:00:06.0") || isBDF("pci0000:00") || isBDF("0000:00:06.00") || isBDF("virtio2") {
		t.Error("isBDF")
	}
	if got := parseGUID("946d:ae03:0050:709a"); got != 0x9a70500003ae6d94 {
		t.Errorf("parseGUID = %#x", got)
	}
	for in, want := range map[string]int{"400 Gb/sec (4X NDR)": 400000, "2.5 Gb/sec (1X SDR)": 2500, "56 Gb/sec (4X FDR)": 56000, "": 0} {
		if got := parseRate(in); got != want {
			t.Errorf("parseRate(%q) = %d, want %d", in, got, want)
		}
	}
	if got := ibMergedPath("/sys/devices/pci0000:16/0000:1c:02.3", true); got != "/sys/devices/pci0000:16/0000:1c:00.0" {
		t.Errorf("ibMergedPath = %q", got)
	}
	if !naturalLess("mlx5_2", "mlx5_10") || naturalLess("mlx5_10", "mlx5_2") || !naturalLess("a", "b") {
		t.Error("naturalLess")
	}
}

// Fusion appends what an earlier rank did not have; it does not sort.
func TestFuseAppends(t *testing.T) {
	a := model.NewElement("system", "version", "1")
	cpu := a.Add(model.NewElement("cpu", "numaid", "0"))
	cpu.Add(model.NewElement("pci", "busid", "0000:02:00.0"))
	cpu.Add(model.NewElement("nic")).Add(model.NewElement("net", "name", "eth0", "dev", "0"))
	b := model.NewElement("system", "version", "1")
	cpub := b.Add(model.NewElement("cpu", "numaid", "0"))
	cpub.Add(model.NewElement("pci", "busid", "0000:01:00.0"))
	cpub.Add(model.NewElement("nic")).Add(model.NewElement("net", "name", "eth0", "dev", "0"))
	b.Add(model.NewElement("cpu", "numaid", "1"))
	fuse(a, b)
	var names []string
	for _, c := range a.Children[0].Children {
		v, _ := c.Get("busid")
		names = append(names, c.Name+v)
	}
	if got := strings.Join(names, " "); got != "pci0000:02:00.0 nic pci0000:01:00.0" {
		t.Errorf("fused children = %s", got)
	}
	if len(a.Children) != 2 || len(a.Children[0].ChildrenNamed("nic")[0].Children) != 1 {
		t.Errorf("fusion duplicated or lost nodes")
	}
}
