package hw

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeRoot is a fake machine: a sysfs tree and a procfs tree under a
// temporary directory, shaped like the real ones (devices under
// sys/devices, symlinks from sys/bus/pci/devices and sys/class).
type fakeRoot struct {
	t    *testing.T
	dir  string
	sys  string
	proc string
}

func newFakeRoot(t *testing.T) *fakeRoot {
	t.Helper()
	dir := t.TempDir()
	r := &fakeRoot{t: t, dir: dir, sys: filepath.Join(dir, "sys"), proc: filepath.Join(dir, "proc")}
	r.mkdir(r.sys, "bus", "pci", "devices")
	r.mkdir(r.sys, "bus", "virtio")
	r.mkdir(r.sys, "class", "net")
	return r
}

func (r *fakeRoot) mkdir(elem ...string) string {
	r.t.Helper()
	p := filepath.Join(elem...)
	if err := os.MkdirAll(p, 0o755); err != nil {
		r.t.Fatal(err)
	}
	return p
}

func (r *fakeRoot) write(path, content string) {
	r.t.Helper()
	r.mkdir(filepath.Dir(path))
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

// symlink makes link point to target, with a relative target like sysfs.
func (r *fakeRoot) symlink(target, link string) {
	r.t.Helper()
	r.mkdir(filepath.Dir(link))
	rel, err := filepath.Rel(filepath.Dir(link), target)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.Symlink(rel, link); err != nil {
		r.t.Fatal(err)
	}
}

// pciDev describes one PCI function in the fake sysfs.
type pciDev struct {
	class, vendor, device, subVendor, subDevice string
	speed                                       string // max_link_speed, "" for none
	width                                       string // max_link_width, "" for none
	numa                                        string // numa_node, "" for none
}

// addPCI creates the PCI function at path (components below sys/devices,
// e.g. "pci0000:00", "0000:00:06.0") and its sys/bus/pci/devices link.
func (r *fakeRoot) addPCI(d pciDev, path ...string) string {
	r.t.Helper()
	dir := r.mkdir(append([]string{r.sys, "devices"}, path...)...)
	for file, v := range map[string]string{
		"class": d.class, "vendor": d.vendor, "device": d.device,
		"subsystem_vendor": d.subVendor, "subsystem_device": d.subDevice,
		"max_link_speed": d.speed, "max_link_width": d.width, "numa_node": d.numa,
	} {
		if v != "" {
			r.write(filepath.Join(dir, file), v+"\n")
		}
	}
	r.symlink(filepath.Join(r.sys, "bus", "pci"), filepath.Join(dir, "subsystem"))
	r.symlink(dir, filepath.Join(r.sys, "bus", "pci", "devices", path[len(path)-1]))
	return dir
}

// addNetIf adds /sys/class/net/<name>, its device link (when dev is not
// empty) and speed file (when speed is not empty).
func (r *fakeRoot) addNetIf(name, dev, speed string) {
	r.t.Helper()
	dir := r.mkdir(r.sys, "class", "net", name)
	if dev != "" {
		r.symlink(dev, filepath.Join(dir, "device"))
	}
	if speed != "" {
		r.write(filepath.Join(dir, "speed"), speed+"\n")
	}
}

// ibPortSpec is one port of a fake RDMA device.
type ibPortSpec struct {
	num                    int
	state, linkLayer, rate string
}

// addIB adds /sys/class/infiniband/<name> for the PCI function at dev.
func (r *fakeRoot) addIB(name, dev, sysImageGUID string, ports ...ibPortSpec) {
	r.t.Helper()
	dir := r.mkdir(r.sys, "class", "infiniband", name)
	r.symlink(dev, filepath.Join(dir, "device"))
	r.write(filepath.Join(dir, "sys_image_guid"), sysImageGUID+"\n")
	for _, p := range ports {
		pd := filepath.Join(dir, "ports", fmt.Sprint(p.num))
		r.write(filepath.Join(pd, "state"), p.state+"\n")
		r.write(filepath.Join(pd, "link_layer"), p.linkLayer+"\n")
		r.write(filepath.Join(pd, "rate"), p.rate+"\n")
	}
}

func (r *fakeRoot) cpuinfo(vendor string, family, model int) {
	r.t.Helper()
	var b strings.Builder
	for cpu := 0; cpu < 2; cpu++ {
		fmt.Fprintf(&b, "processor\t: %d\nvendor_id\t: %s\ncpu family\t: %d\nmodel\t\t: %d\nmodel name\t: Fake CPU\n\n", cpu, vendor, family, model)
	}
	r.write(filepath.Join(r.proc, "cpuinfo"), b.String())
}

func (r *fakeRoot) bootID(id string) {
	r.write(filepath.Join(r.proc, "sys", "kernel", "random", "boot_id"), id+"\n")
}

// fakeLink is one NVLink of a fake GPU.
type fakeLink struct {
	p2p, active bool
	remote      PCIInfo
}

// fakeGPU is an NVML device.
type fakeGPU struct {
	pci          PCIInfo
	major, minor int
	links        []fakeLink
	c2c          []uint32 // max bandwidth of each active C2C link
	noFields     bool     // nvmlDeviceGetFieldValues is missing
}

func (g *fakeGPU) PCIInfo() (PCIInfo, error) { return g.pci, nil }
func (g *fakeGPU) ComputeCapability() (int, int, error) {
	return g.major, g.minor, nil
}

func (g *fakeGPU) link(l int) (fakeLink, error) {
	if l >= len(g.links) {
		return fakeLink{}, fmt.Errorf("link %d: %w", l, ErrNotSupported)
	}
	return g.links[l], nil
}

func (g *fakeGPU) NvLinkP2PSupported(l int) (bool, error) {
	k, err := g.link(l)
	return k.p2p, err
}

func (g *fakeGPU) NvLinkActive(l int) (bool, error) {
	k, err := g.link(l)
	return k.active, err
}

func (g *fakeGPU) NvLinkRemotePCIInfo(l int) (PCIInfo, error) {
	k, err := g.link(l)
	return k.remote, err
}

func (g *fakeGPU) FieldValues(values []FieldValue) error {
	if g.noFields {
		return ErrNotSupported
	}
	for i := range values {
		v := &values[i]
		v.Err = nil
		switch v.ID {
		case FieldNvLinkGetState:
			k, err := g.link(int(v.Scope))
			if err != nil {
				v.Err = err
			} else if k.active {
				v.Value = 1
			} else {
				v.Value = 0
			}
		case FieldC2CLinkCount:
			if len(g.c2c) == 0 {
				v.Err = ErrNotSupported
			} else {
				v.Value = uint64(len(g.c2c))
			}
		case FieldC2CLinkGetStatus:
			v.Value = 1
		case FieldC2CLinkGetMaxBw:
			v.Value = uint64(g.c2c[v.Scope])
		default:
			v.Err = ErrNotSupported
		}
	}
	return nil
}

// fakeNVML is an NVML with fixed devices.
type fakeNVML struct {
	gpus []*fakeGPU
}

func (f *fakeNVML) DeviceCount() (int, error) { return len(f.gpus), nil }
func (f *fakeNVML) Device(i int) (NVMLDevice, error) {
	if i < 0 || i >= len(f.gpus) {
		return nil, errors.New("no such device")
	}
	return f.gpus[i], nil
}

// fakeCUDA answers attributes from a map; missing GPUs are an error.
type fakeCUDA map[string]CUDAAttributes

func (c fakeCUDA) DeviceAttributes(busID string) (CUDAAttributes, error) {
	a, ok := c[busID]
	if !ok {
		return CUDAAttributes{}, fmt.Errorf("GPU %s not visible to CUDA", busID)
	}
	return a, nil
}

// env returns a Getenv over a fixed map.
func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}
