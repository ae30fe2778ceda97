package hw

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// NCCL limits and defaults of the built-in network plugins.
const (
	maxSocketIfs     = 16     // MAX_IFS
	socketMaxConn    = 65536  // socket plugin maxComms
	socketSpeedMbps  = 10000  // socket speed when /sys/class/net/X/speed is unknown
	ibMaxConnDefault = 131072 // devAttr.max_qp of ConnectX-6 Dx and later; not in sysfs
)

// netDev is what a network plugin reports for one device
// (ncclNetProperties_t).
type netDev struct {
	name      string
	pciPath   string // sysfs path of the NIC's PCI device, "" if none
	speed     int    // Mb/s
	port      int
	guid      uint64
	maxConn   int
	latency   int
	ptrCUDA   bool // GPUDirect through a peer-memory module
	ptrDMABuf bool // GPUDirect through DMA-BUF, if the GPU supports it
}

// peerMemLoaded reports whether a GPU peer-memory kernel module is loaded
// (NCCL's ncclIbGdrSupport).
func (d *Discoverer) peerMemLoaded() bool {
	for _, p := range [][]string{
		{"kernel", "mm", "memory_peers", "nv_mem", "version"},
		{"kernel", "mm", "memory_peers", "nv_mem_nc", "version"},
		{"module", "nvidia_peermem", "version"},
	} {
		if _, err := os.Stat(d.sys(p...)); err == nil {
			return true
		}
	}
	return false
}

// netDevices returns the devices of the network plugin NCCL would use: IB
// when an RDMA port is active, else the socket plugin. NCCL_NET restricts
// the choice.
func (d *Discoverer) netDevices() ([]netDev, string, error) {
	want := d.opts.Getenv("NCCL_NET")
	ifs, err := d.opts.Interfaces()
	if err != nil {
		return nil, "", fmt.Errorf("list network interfaces: %w", err)
	}
	if want == "" || strings.EqualFold(want, "IB") {
		devs, err := d.ibDevices(ifs)
		if err != nil {
			d.log.Debug("IB plugin unavailable", "err", err)
		} else if len(devs) > 0 {
			return devs, "IB", nil
		}
	}
	if want == "" || strings.EqualFold(want, "Socket") {
		devs := d.socketDevices(ifs)
		if len(devs) > 0 {
			return devs, "Socket", nil
		}
		d.log.Warn("no network interface found for NCCL's socket plugin")
		return nil, "Socket", nil
	}
	return nil, "", fmt.Errorf("NCCL_NET=%q: no such network plugin here (want IB or Socket)", want)
}

// ifSpec is one element of an NCCL interface list ("name[:port]").
type ifSpec struct {
	prefix string
	port   int
}

// parseIfList parses NCCL's comma-separated "prefix[:port]" lists
// (parseStringList).
func parseIfList(s string) []ifSpec {
	var out []ifSpec
	for _, item := range strings.Split(s, ",") {
		if item == "" {
			continue
		}
		spec := ifSpec{prefix: item, port: -1}
		if name, port, ok := strings.Cut(item, ":"); ok {
			spec.prefix = name
			if p, err := strconv.Atoi(port); err == nil {
				spec.port = p
			}
		}
		out = append(out, spec)
	}
	return out
}

// matchIfList is NCCL's matchIfList: an empty list matches everything.
func matchIfList(name string, port int, list []ifSpec, exact bool) bool {
	if len(list) == 0 {
		return true
	}
	for _, s := range list {
		if s.port != -1 && port != -1 && s.port != port {
			continue
		}
		if exact && name == s.prefix || !exact && strings.HasPrefix(name, s.prefix) {
			return true
		}
	}
	return false
}

// findInterfaces is NCCL's findInterfaces: interfaces with an IPv4 or IPv6
// (non-loopback) address whose name matches prefixList ("^" negates, "="
// asks for exact names), in getifaddrs order (IPv4 addresses first, then
// IPv6, each by interface index), each name once.
func findInterfaces(ifs []NetInterface, prefixList, family string, maxIfs int) []string {
	not := strings.HasPrefix(prefixList, "^")
	if not {
		prefixList = prefixList[1:]
	}
	exact := strings.HasPrefix(prefixList, "=")
	if exact {
		prefixList = prefixList[1:]
	}
	list := parseIfList(prefixList)
	var found []string
	seen := map[string]bool{}
	for _, fam := range []string{"AF_INET", "AF_INET6"} {
		if family != "" && family != fam {
			continue
		}
		for _, it := range ifs {
			for _, a := range it.Addrs {
				ip := net.ParseIP(a)
				if ip == nil {
					continue
				}
				is4 := ip.To4() != nil
				if (fam == "AF_INET") != is4 {
					continue
				}
				if !is4 && ip.IsLoopback() {
					continue
				}
				if matchIfList(it.Name, -1, list, exact) == not {
					continue
				}
				if !seen[it.Name] && len(found) < maxIfs {
					seen[it.Name] = true
					found = append(found, it.Name)
				}
			}
		}
	}
	return found
}

// ncclFindInterfaces picks interfaces the way NCCL's ncclFindInterfaces does:
// NCCL_SOCKET_IFNAME when set; otherwise "ib*", then anything but docker*
// and lo, then docker*, then lo.
func (d *Discoverer) ncclFindInterfaces(ifs []NetInterface, maxIfs int) []string {
	family := d.opts.Getenv("NCCL_SOCKET_FAMILY")
	if family != "AF_INET" && family != "AF_INET6" {
		family = ""
	}
	if env := d.opts.Getenv("NCCL_SOCKET_IFNAME"); len(env) > 1 {
		return findInterfaces(ifs, env, family, maxIfs)
	}
	for _, list := range []string{"ib", "^docker,lo", "docker", "lo"} {
		if found := findInterfaces(ifs, list, family, maxIfs); len(found) > 0 {
			return found
		}
	}
	return nil
}

// socketDevices lists the socket plugin's devices.
func (d *Discoverer) socketDevices(ifs []NetInterface) []netDev {
	var out []netDev
	for i, name := range d.ncclFindInterfaces(ifs, maxSocketIfs) {
		dev := netDev{
			name:    name,
			pciPath: realpath(d.sys("class", "net", name, "device")),
			speed:   socketSpeedMbps,
			guid:    uint64(i),
			maxConn: socketMaxConn,
		}
		p := d.sys("class", "net", name, "speed")
		if data, err := os.ReadFile(p); err == nil {
			if s := model.Strtol(truncate(string(data), 8)); s > 0 {
				dev.speed = int(s)
			}
		}
		if dev.speed == socketSpeedMbps {
			d.log.Debug("could not get speed; defaulting to 10 Gbps", "path", p)
		}
		out = append(out, dev)
	}
	return out
}

// ibPort is one active port of an RDMA device, before NCCL's sorting.
type ibPort struct {
	dev      netDev
	fullPath string // unmodified sysfs path of the device's PCI function
}

// ibDevices lists the IB plugin's devices from /sys/class/infiniband. It
// returns an error when the plugin would not initialise.
func (d *Discoverer) ibDevices(ifs []NetInterface) ([]netDev, error) {
	if v := d.opts.Getenv("NCCL_IB_DISABLE"); v != "" && model.Strtol(v) != 0 {
		return nil, errors.New("NCCL_IB_DISABLE is set")
	}
	dir := d.sys("class", "infiniband")
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list RDMA devices: %w", err)
	}
	if len(ents) == 0 {
		return nil, nil
	}
	if len(d.ncclFindInterfaces(ifs, 1)) != 1 {
		return nil, errors.New("no IP interface found for IB's out-of-band connection")
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Slice(names, func(i, j int) bool { return naturalLess(names[i], names[j]) })

	hca := d.opts.Getenv("NCCL_IB_HCA")
	not := strings.HasPrefix(hca, "^")
	if not {
		hca = hca[1:]
	}
	exact := strings.HasPrefix(hca, "=")
	if exact {
		hca = hca[1:]
	}
	userIfs := parseIfList(hca)
	mergeVfs := true
	if v := d.opts.Getenv("NCCL_IB_MERGE_VFS"); v != "" {
		mergeVfs = model.Strtol(v) != 0
	}
	peerMem := d.peerMemLoaded()
	dmaBuf := d.kernelDMABuf()

	var ports []ibPort
	for _, name := range names {
		devDir := filepath.Join(dir, name)
		full := realpath(filepath.Join(devDir, "device"))
		pciPath := ""
		if full != "" {
			pciPath = ibMergedPath(full, mergeVfs)
		} else {
			d.log.Warn("could not find real path of RDMA device", "device", name, "path", filepath.Join(devDir, "device"))
		}
		guid := parseGUID(d.readSys(devDir, "sys_image_guid"))
		pents, err := os.ReadDir(filepath.Join(devDir, "ports"))
		if err != nil {
			d.log.Debug("RDMA device without ports", "device", name, "err", err)
			continue
		}
		var pnums []int
		for _, pe := range pents {
			if n, err := strconv.Atoi(pe.Name()); err == nil {
				pnums = append(pnums, n)
			}
		}
		sort.Ints(pnums)
		for _, pn := range pnums {
			pdir := filepath.Join(devDir, "ports", strconv.Itoa(pn))
			state := d.readSys(pdir, "state")
			if !strings.Contains(state, "ACTIVE") || strings.Contains(state, "INACTIVE") {
				continue
			}
			ll := d.readSys(pdir, "link_layer")
			if ll != "InfiniBand" && ll != "Ethernet" {
				continue
			}
			if matchIfList(name, pn, userIfs, exact) == not {
				continue
			}
			ports = append(ports, ibPort{
				fullPath: full,
				dev: netDev{
					name:      name,
					pciPath:   pciPath,
					speed:     parseRate(d.readSys(pdir, "rate")),
					port:      pn,
					guid:      guid,
					maxConn:   ibMaxConnDefault,
					ptrCUDA:   peerMem,
					ptrDMABuf: dmaBuf,
				},
			})
		}
	}
	// NCCL sorts the devices by PCI address so that ranks agree, then
	// numbers the ports of one PCI device.
	sort.SliceStable(ports, func(i, j int) bool {
		a, b := ports[i].fullPath, ports[j].fullPath
		if a == "" || b == "" {
			return a != "" && b == ""
		}
		return pathBusID(a) < pathBusID(b)
	})
	out := make([]netDev, 0, len(ports))
	for i := range ports {
		real := 0
		for j := 0; j < i; j++ {
			if ibMatchVfPath(ports[i].dev.pciPath, ports[j].dev.pciPath, mergeVfs) {
				real++
			}
		}
		dev := ports[i].dev
		dev.port += real
		out = append(out, dev)
	}
	return out, nil
}

// ibMergedPath merges the ports (functions) of a multi-port NIC, and with
// NCCL_IB_MERGE_VFS its virtual functions, into one PCI device path.
func ibMergedPath(p string, mergeVfs bool) string {
	b := []byte(p)
	if len(b) >= 4 {
		b[len(b)-1] = '0'
		if mergeVfs {
			b[len(b)-3], b[len(b)-4] = '0', '0'
		}
	}
	return string(b)
}

// ibMatchVfPath is NCCL's ncclIbMatchVfPath.
func ibMatchVfPath(p1, p2 string, mergeVfs bool) bool {
	if p1 == "" || p2 == "" {
		return false
	}
	n := len(p1) - 1
	if mergeVfs {
		n = len(p1) - 4
	}
	if n < 0 {
		n = 0
	}
	if len(p2) < n {
		return false
	}
	return p1[:n] == p2[:n]
}

// pathBusID returns the bus id at the end of a sysfs path as a number
// (NCCL's pciPathToInt64).
func pathBusID(p string) int64 {
	id := filepath.Base(p)
	var v int64
	for i := 0; i < len(id); i++ {
		c := id[i]
		var dgt int64
		switch {
		case c >= '0' && c <= '9':
			dgt = int64(c - '0')
		case c >= 'a' && c <= 'f':
			dgt = int64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			dgt = int64(c-'A') + 10
		default:
			continue
		}
		v = v<<4 | dgt
	}
	return v
}

// parseGUID turns sysfs's "b83f:d203:00a1:b2c4" (network byte order) into
// the value NCCL prints: the 8 bytes read as a little-endian integer.
func parseGUID(s string) uint64 {
	hexs := strings.ReplaceAll(strings.TrimSpace(s), ":", "")
	v, err := strconv.ParseUint(hexs, 16, 64)
	if err != nil || len(hexs) != 16 {
		return 0
	}
	var out uint64
	for i := 0; i < 8; i++ {
		out = out<<8 | (v>>(8*i))&0xff
	}
	return out
}

// parseRate turns a port rate such as "200 Gb/sec (4X HDR)" into Mb/s.
func parseRate(s string) int {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0
	}
	g, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return int(g*1000 + 0.5)
}

// kernelDMABuf reports whether the kernel is recent enough for RDMA
// DMA-BUF registration (5.12), our stand-in for NCCL's verbs probe.
func (d *Discoverer) kernelDMABuf() bool {
	if v := d.opts.Getenv("NCCL_DMABUF_ENABLE"); v != "" && model.Strtol(v) == 0 {
		return false
	}
	data, err := os.ReadFile(d.proc("sys", "kernel", "osrelease"))
	if err != nil {
		return false
	}
	rel := strings.TrimSpace(string(data))
	maj, rest, _ := strings.Cut(rel, ".")
	minS, _, _ := strings.Cut(rest, ".")
	ma, err1 := strconv.Atoi(maj)
	mi, err2 := strconv.Atoi(strings.TrimRight(minS, "-+abcdefghijklmnopqrstuvwxyz"))
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > 5 || ma == 5 && mi >= 12
}

// naturalLess orders names with embedded numbers numerically
// ("mlx5_2" < "mlx5_10").
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		ad, bd := isDigit(a[0]), isDigit(b[0])
		if ad && bd {
			i, j := 0, 0
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na, _ := strconv.ParseUint(a[:i], 10, 64)
			nb, _ := strconv.ParseUint(b[:j], 10, 64)
			if na != nb {
				return na < nb
			}
			a, b = a[i:], b[j:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// systemInterfaces lists the machine's interfaces with their addresses.
func systemInterfaces() ([]NetInterface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]NetInterface, 0, len(ifs))
	for _, it := range ifs {
		addrs, err := it.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", it.Name, err)
		}
		ni := NetInterface{Name: it.Name}
		for _, a := range addrs {
			switch v := a.(type) {
			case *net.IPNet:
				ni.Addrs = append(ni.Addrs, v.IP.String())
			case *net.IPAddr:
				ni.Addrs = append(ni.Addrs, v.IP.String())
			}
		}
		out = append(out, ni)
	}
	return out, nil
}

// fillNet adds NIC n (device index dev) to the rank's XML, like NCCL's
// ncclTopoFillNet followed by ncclTopoPopulateNics: a NIC on a PCI device
// goes under that device's <pci>, any other one into a <nic> under the
// first <cpu> created.
func (b *builder) fillNet(n netDev, dev int, g gpuInfo) error {
	d := b.d
	netNode := b.doc.findTagKv("net", "name", n.name)
	if netNode == nil {
		pciPath := n.pciPath
		if pciPath != "" {
			sub := filepath.Base(realpath(filepath.Join(pciPath, "subsystem")))
			if sub != "pci" {
				d.log.Debug("network device is not a PCI device; attaching to the first CPU", "name", n.name, "path", pciPath, "subsystem", sub)
				pciPath = ""
			}
		}
		var parent *xnode
		if pciPath != "" {
			busID := filepath.Base(pciPath)
			parent = b.doc.findTagKv("pci", "busid", busID)
			if parent == nil {
				parent = b.doc.add(nil, "pci")
				parent.set("busid", busID)
			}
			parent.setIfUnset("class", "0x02")
			if err := b.fillPCI(parent); err != nil {
				return err
			}
		} else {
			parent = b.doc.findTag("cpu")
			if parent == nil {
				return errors.New("no <cpu> to attach a virtual NIC to")
			}
		}
		nic := parent.sub("nic")
		if nic == nil {
			nic = b.doc.add(parent, "nic")
		}
		netNode = b.doc.add(nic, "net")
		netNode.set("name", n.name)
	}
	netNode.set("keep", "1")
	netNode.set("dev", strconv.Itoa(dev))
	netNode.setIfUnset("latency", strconv.Itoa(n.latency))
	netNode.setIfUnset("speed", strconv.Itoa(n.speed))
	netNode.setIfUnset("port", strconv.Itoa(n.port))
	netNode.setIfUnset("guid", fmt.Sprintf("0x%x", n.guid))
	netNode.setIfUnset("maxconn", strconv.Itoa(n.maxConn))
	netNode.setIfUnset("gdr", boolInt(n.ptrCUDA || g.dmaBuf && n.ptrDMABuf))
	return nil
}
