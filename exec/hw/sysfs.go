package hw

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// maxSysStr is how much of a sysfs file NCCL reads (MAX_STR_LEN).
const maxSysStr = 256

// sys returns a path under the sysfs root.
func (d *Discoverer) sys(elem ...string) string {
	return filepath.Join(append([]string{d.opts.SysRoot}, elem...)...)
}

// proc returns a path under the procfs root.
func (d *Discoverer) proc(elem ...string) string {
	return filepath.Join(append([]string{d.opts.ProcRoot}, elem...)...)
}

// readSys reads dir/file like NCCL's ncclTopoGetStrFromSys: at most 256
// bytes, the last byte (the newline) dropped; "" when the file cannot be
// read or is empty. file may start with "../".
func (d *Discoverer) readSys(dir, file string) string {
	p := filepath.Join(dir, file)
	f, err := os.Open(p)
	if err != nil {
		d.log.Debug("topology detection: could not read, ignoring", "path", p, "err", err)
		return ""
	}
	defer f.Close()
	buf := make([]byte, maxSysStr)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		d.log.Debug("topology detection: could not read, ignoring", "path", p, "err", err)
	}
	if n == 0 {
		return ""
	}
	return string(buf[:n-1])
}

// setFromSys sets attr from dir/file when the file has a non-empty value.
func (d *Discoverer) setFromSys(n *xnode, dir, file, attr string) {
	if v := d.readSys(dir, file); v != "" {
		n.set(attr, v)
	}
}

// pciPath returns the resolved sysfs directory of the PCI device busID, or
// "" when there is none.
func (d *Discoverer) pciPath(busID string) string {
	busID = strings.ToLower(busID)
	if busID == "" || strings.ContainsAny(busID, `/\`) || busID == "." || busID == ".." {
		return ""
	}
	p, err := filepath.EvalSymlinks(d.sys("bus", "pci", "devices", busID))
	if err != nil {
		d.log.Debug("could not find real path of PCI device", "busid", busID, "err", err)
		return ""
	}
	return p
}

// realpath resolves p, returning "" on error.
func realpath(p string) string {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	return r
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// isBDF reports whether s has the form "dddd:bb:dd.f" (NCCL's
// checkBDFFormat).
func isBDF(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	for _, i := range []int{0, 1, 2, 3, 5, 6, 8, 9, 11} {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

var leadingFloat = regexp.MustCompile(`^[ \t\n\r\f\v]*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?`)

// scanSpeed parses a "%f GT/s" link speed; unparsable strings give
// FLT_MAX as in NCCL.
func scanSpeed(s string) float32 {
	m := leadingFloat.FindString(s)
	if m == "" {
		return math.MaxFloat32
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(m), 32)
	if err != nil {
		return math.MaxFloat32
	}
	return float32(f)
}

// fillPCI completes a <pci> node from sysfs and attaches it (and its
// ancestors) to the tree, like NCCL's ncclTopoGetXmlFromSys: attributes
// already present are kept (class is always refreshed), then the parent is
// found by walking the sysfs path upwards. A PCI switch is represented by
// its upstream port (the grandparent of the device in sysfs); the first
// component that is not a bus id is the CPU root complex.
func (b *builder) fillPCI(n *xnode) error {
	d := b.d
	busID, _ := n.get("busid")
	path := d.pciPath(busID)
	if path != "" {
		d.setFromSys(n, path, "class", "class")
	}
	for _, attr := range []string{"vendor", "device", "subsystem_vendor", "subsystem_device"} {
		if !n.has(attr) && path != "" {
			d.setFromSys(n, path, attr, attr)
		}
	}
	if !n.has("link_speed") {
		if path != "" {
			devStr := d.readSys(path, "max_link_speed")
			portStr := d.readSys(path, "../max_link_speed")
			if scanSpeed(portStr) < scanSpeed(devStr) {
				n.set("link_speed", portStr)
			} else {
				n.set("link_speed", devStr)
			}
		} else {
			n.set("link_speed", "")
		}
	}
	if !n.has("link_width") {
		if path != "" {
			devW := model.Strtol(d.readSys(path, "max_link_width"))
			portW := model.Strtol(d.readSys(path, "../max_link_width"))
			n.set("link_width", strconv.FormatInt(min(devW, portW), 10))
		} else {
			n.set("link_width", "")
		}
	}
	if v, _ := n.get("vendor"); v == "0x1000" {
		b.addBcmLinks(n, busID)
	}

	parent := n.parent
	if parent == nil {
		var err error
		if path != "" {
			parent, err = b.parentFromPath(path)
			if err != nil {
				return err
			}
		} else {
			// No sysfs information: attach to an unknown CPU.
			parent = b.doc.findTagKv("cpu", "numaid", "-1")
			if parent == nil {
				parent = b.newCPU("-1")
				if err := b.fillCPU(parent); err != nil {
					return err
				}
			}
		}
		attachSorted(parent, n)
	}
	switch parent.el.Name {
	case "pci":
		return b.fillPCI(parent)
	case "cpu":
		return b.fillCPU(parent)
	}
	return nil
}

// parentFromPath finds (or creates) the parent of the PCI device at path:
// the <pci> of the switch above it, or the <cpu> of its root complex.
func (b *builder) parentFromPath(path string) (*xnode, error) {
	numa := b.d.readSys(path, "numa_node")
	comps := strings.Split(path, "/")
	slashes := 0
	for i := len(comps) - 2; i >= 1; i-- {
		slashes++
		c := comps[i]
		if !isBDF(c) {
			sys := b.doc.root()
			cpu := sys.subKv("cpu", "numaid", numa)
			if cpu == nil {
				cpu = b.newCPU(numa)
			}
			return cpu, nil
		}
		if slashes == 2 {
			p := b.doc.findTagKv("pci", "busid", c)
			if p == nil {
				p = b.doc.add(nil, "pci")
				p.set("busid", c)
			}
			return p, nil
		}
	}
	return nil, fmt.Errorf("%s: no CPU root complex found above this PCI device", path)
}

// newCPU adds a <cpu> with host_hash and numaid under <system>.
func (b *builder) newCPU(numa string) *xnode {
	cpu := b.doc.add(b.doc.root(), "cpu")
	cpu.set("host_hash", fmt.Sprintf("0x%x", b.hostHash))
	cpu.set("numaid", numa)
	return cpu
}

// addBcmLinks adds the <pcilink> children of a Broadcom PCIe switch from
// /sys/kernel/pci_switch_link/virtual_switch_links/<busid>.
func (b *builder) addBcmLinks(n *xnode, busID string) {
	dir := b.d.sys("kernel", "pci_switch_link", "virtual_switch_links", strings.ToLower(busID))
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if len(name) != 12 || b.d.pciPath(name) == "" {
			continue
		}
		if n.subKv("pcilink", "target", name) == nil {
			l := b.doc.add(n, "pcilink")
			l.set("target", name)
		}
	}
}

// fillCPU completes a <cpu> node like NCCL's ncclTopoGetXmlFromCpu:
// affinity from the NUMA node's cpumap, arch, and on x86 the CPUID vendor,
// family and model.
func (b *builder) fillCPU(cpu *xnode) error {
	d := b.d
	if !cpu.has("affinity") {
		numa, ok := cpu.get("numaid")
		if !ok {
			return errors.New("<cpu> has no numaid")
		}
		d.setFromSys(cpu, d.sys("devices", "system", "node", "node"+numa), "cpumap", "affinity")
	}
	if !cpu.has("arch") {
		switch d.opts.Arch {
		case "amd64":
			cpu.set("arch", "x86_64")
		case "arm64":
			cpu.set("arch", "arm64")
		case "ppc64", "ppc64le":
			cpu.set("arch", "ppc64")
		}
	}
	if d.opts.Arch != "amd64" {
		return nil
	}
	info, err := d.cpuInfo()
	if err != nil {
		d.log.Warn("cannot read CPU vendor and model; leaving them out of <cpu>", "err", err)
		return nil
	}
	if !cpu.has("vendor") {
		cpu.set("vendor", info.vendor)
	}
	if !cpu.has("familyid") {
		cpu.set("familyid", strconv.Itoa(info.family))
		cpu.set("modelid", strconv.Itoa(info.model))
	}
	return nil
}
