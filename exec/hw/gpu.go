package hw

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// nvSwitchHidden is the bus id NCCL treats as an NVSwitch that is not
// visible (inside a VM).
const nvSwitchHidden = "fffffff:ffff:ff"

// maxNvLinks is how many NVLinks NCCL probes for a GPU of the given SM
// version.
func maxNvLinks(sm int) int {
	switch {
	case sm < 60:
		return 0
	case sm < 70:
		return 4
	case sm < 80:
		return 6
	case sm < 90:
		return 12
	}
	return 18
}

// parseBusID parses "domain:bus:device.function" with any number of hex
// digits per field and returns NCCL's canonical "%04x:%02x:%02x.%x" form.
func parseBusID(s string) (string, error) {
	s = strings.TrimSpace(s)
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return "", fmt.Errorf("PCI bus id %q: want domain:bus:device.function", s)
	}
	devFn := strings.Split(parts[2], ".")
	if len(devFn) != 2 {
		return "", fmt.Errorf("PCI bus id %q: want domain:bus:device.function", s)
	}
	var v [4]uint64
	for i, f := range []string{parts[0], parts[1], devFn[0], devFn[1]} {
		n, err := strconv.ParseUint(f, 16, 32)
		if err != nil || f == "" {
			return "", fmt.Errorf("PCI bus id %q: bad field %q", s, f)
		}
		v[i] = n
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", v[0], v[1], v[2], v[3]), nil
}

// cString returns the part of s before the first NUL.
func cString(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// gpus asks NVML (and CUDA) about every GPU, in NVML index order.
func (d *Discoverer) gpus() ([]gpuInfo, error) {
	n, err := d.opts.NVML.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("NVML device count: %w", err)
	}
	if n == 0 {
		return nil, errors.New("NVML reports no GPU on this machine")
	}
	peerMem := d.peerMemLoaded()
	out := make([]gpuInfo, 0, n)
	for i := 0; i < n; i++ {
		dev, err := d.opts.NVML.Device(i)
		if err != nil {
			return nil, fmt.Errorf("NVML device %d: %w", i, err)
		}
		g, err := d.gpu(i, dev)
		if err != nil {
			return nil, fmt.Errorf("NVML device %d: %w", i, err)
		}
		g.gdr = peerMem
		if d.opts.CUDA != nil {
			a, err := d.opts.CUDA.DeviceAttributes(g.busID)
			if err != nil {
				d.log.Warn("cannot read CUDA attributes; gdr follows the peer-memory module", "gpu", i, "busid", g.busID, "err", err)
			} else {
				g.gdr, g.dmaBuf = a.GPUDirectRDMA, a.DMABuf
			}
		} else {
			d.log.Debug("no CUDA driver; gdr follows the peer-memory module", "gpu", i, "gdr", g.gdr)
		}
		out = append(out, g)
	}
	return out, nil
}

// gpu reads one device: bus id, SM version, NVLinks (NCCL's probe order)
// and C2C links.
func (d *Discoverer) gpu(index int, dev NVMLDevice) (gpuInfo, error) {
	g := gpuInfo{index: index}
	pci, err := dev.PCIInfo()
	if err != nil {
		return g, fmt.Errorf("PCI info: %w", err)
	}
	raw := cString(pci.BusID)
	if raw == "" {
		raw = cString(pci.BusIDLegacy)
	}
	if g.busID, err = parseBusID(raw); err != nil {
		return g, err
	}
	major, minor, err := dev.ComputeCapability()
	if err != nil {
		return g, fmt.Errorf("compute capability: %w", err)
	}
	g.sm = major*10 + minor
	d.log.Debug("GPU", "index", index, "busid", g.busID, "nvml_busid", cString(pci.BusID), "sm", g.sm)

	for l := 0; l < maxNvLinks(g.sm); l++ {
		ok, err := dev.NvLinkP2PSupported(l)
		if err != nil || !ok {
			continue
		}
		active := false
		if g.sm >= 90 {
			fv := []FieldValue{{ID: FieldNvLinkGetState, Scope: uint32(l)}}
			if dev.FieldValues(fv) == nil && fv[0].Err == nil {
				active = uint32(fv[0].Value) == 1
			}
		} else {
			active, _ = dev.NvLinkActive(l)
		}
		if !active {
			continue
		}
		remote, err := dev.NvLinkRemotePCIInfo(l)
		if err != nil {
			continue
		}
		target := strings.ToLower(cString(remote.BusIDLegacy))
		if target == "" {
			// Only the full form is known: shorten the domain like the
			// legacy field does.
			if t, err := parseBusID(cString(remote.BusID)); err == nil {
				target = t
			} else {
				target = strings.ToLower(cString(remote.BusID))
			}
		}
		d.log.Debug("NVLink", "gpu", index, "link", l, "target", target, "remote_busid", cString(remote.BusID), "remote_legacy", cString(remote.BusIDLegacy))
		g.nvlinks = append(g.nvlinks, target)
	}

	if g.sm >= 90 {
		cnt := []FieldValue{{ID: FieldC2CLinkCount}}
		if dev.FieldValues(cnt) == nil && cnt[0].Err == nil {
			n := int(uint32(cnt[0].Value))
			for l := 0; l < n; l++ {
				fv := []FieldValue{{ID: FieldC2CLinkGetStatus, Scope: uint32(l)}, {ID: FieldC2CLinkGetMaxBw, Scope: uint32(l)}}
				if dev.FieldValues(fv) == nil && fv[0].Err == nil && uint32(fv[0].Value) == 1 && fv[1].Err == nil {
					g.c2cBw = int(uint32(fv[1].Value))
					g.c2cN++
				}
			}
		}
	}
	return g, nil
}

// fillGPU adds the GPU's <pci> (with its path up to the CPU) and its <gpu>
// element with NVLinks and C2C links, as NCCL's ncclTopoFillGpu does.
func (b *builder) fillGPU(g gpuInfo) (*xnode, error) {
	pci := b.doc.findTagKv("pci", "busid", g.busID)
	if pci == nil {
		pci = b.doc.add(nil, "pci")
		pci.set("busid", g.busID)
	}
	pci.setIfUnset("class", "0x03")
	if err := b.fillPCI(pci); err != nil {
		return nil, err
	}
	gpu := pci.sub("gpu")
	if gpu == nil {
		gpu = b.doc.add(pci, "gpu")
	}
	gpu.setIfUnset("dev", strconv.Itoa(g.index))
	gpu.setIfUnset("sm", strconv.Itoa(g.sm))
	if gpu.sub("nvlink") == nil {
		for _, target := range g.nvlinks {
			nvl := gpu.subKv("nvlink", "target", target)
			if nvl == nil {
				nvl = b.doc.add(gpu, "nvlink")
				nvl.set("target", target)
				nvl.set("count", "1")
			} else {
				c, _ := nvl.get("count")
				n, _ := strconv.Atoi(c)
				nvl.set("count", strconv.Itoa(n+1))
			}
		}
	}
	if gpu.sub("c2c") == nil && g.c2cN > 0 {
		c2c := b.doc.add(gpu, "c2c")
		c2c.set("bw", strconv.Itoa(g.c2cBw))
		c2c.set("count", strconv.Itoa(g.c2cN))
	}
	for _, s := range gpu.subs {
		if s.el.Name != "nvlink" || s.has("tclass") {
			continue
		}
		target, _ := s.get("target")
		path := b.d.pciPath(target)
		if path == "" || target == nvSwitchHidden {
			// The remote end is not visible (inside a VM): an NVSwitch.
			s.set("tclass", "0x068000")
		} else {
			b.d.setFromSys(s, path, "class", "tclass")
		}
	}
	return gpu, nil
}
