package hw

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// hostHashString is the string NCCL hashes into host_hash: $NCCL_HOSTID
// when set, otherwise the host name followed by the first word of
// /proc/sys/kernel/random/boot_id.
func (d *Discoverer) hostHashString() string {
	if id := d.opts.Getenv("NCCL_HOSTID"); id != "" {
		return truncate(id, 1023)
	}
	name, err := d.opts.Hostname()
	if err != nil {
		d.log.Warn("cannot read the host name; host_hash uses \"unknown\"", "err", err)
		name = "unknown"
	}
	p := d.proc("sys", "kernel", "random", "boot_id")
	data, err := os.ReadFile(p)
	if err != nil {
		d.log.Warn("cannot read the boot id; host_hash uses the host name alone", "path", p, "err", err)
		return truncate(name, 1023)
	}
	if f := strings.Fields(string(data)); len(f) > 0 {
		name += f[0]
	}
	return truncate(name, 1023)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// ncclHash is NCCL's getHash (utils.h): a 128-bit accumulator that eats
// the bytes in little-endian 8-byte chunks, then a final mix.
func ncclHash(s string) uint64 {
	acc := [2]uint64{1, 1}
	b := []byte(s)
	acc[0] ^= uint64(len(b))
	for len(b) > 0 {
		acc[0] += acc[1]
		acc[1] ^= acc[0]
		acc[0] ^= acc[0] >> 31
		acc[0] *= 0x9de62bbc8cef3ce3
		acc[1] ^= acc[1] >> 32
		acc[1] *= 0x485cd6311b599e79
		n := min(len(b), 8)
		var x uint64
		for i := n - 1; i >= 0; i-- {
			x = x<<8 | uint64(b[i])
		}
		b = b[n:]
		acc[0] += x
	}
	h := acc[0]
	h ^= h >> 31
	h *= 0xbac3bd562846de6b
	h += acc[1]
	h ^= h >> 32
	h *= 0x995a187a14e7b445
	return h
}

// hostHash is NCCL's getHostHash.
func (d *Discoverer) hostHash() uint64 { return ncclHash(d.hostHashString()) }

// cpuID is the CPU identification NCCL reads with CPUID.
type cpuID struct {
	vendor string
	family int // CPUID family: base + (extended << 4)
	model  int // CPUID model: base + (extended << 4)
}

// cpuInfo reads the first processor of /proc/cpuinfo.
func (d *Discoverer) cpuInfo() (cpuID, error) {
	p := d.proc("cpuinfo")
	f, err := os.Open(p)
	if err != nil {
		return cpuID{}, fmt.Errorf("read CPU identification: %w", err)
	}
	defer f.Close()
	var id cpuID
	var haveVendor, haveFamily, haveModel bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" && (haveVendor || haveFamily || haveModel) {
			break // end of the first processor
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key = strings.TrimSpace(key)
		val = strings.TrimSpace(val)
		switch key {
		case "vendor_id":
			id.vendor, haveVendor = val, true
		case "cpu family":
			n, err := strconv.Atoi(val)
			if err != nil {
				return cpuID{}, fmt.Errorf("%s: cpu family %q: %w", p, val, err)
			}
			id.family, haveFamily = cpuidFamily(n), true
		case "model":
			n, err := strconv.Atoi(val)
			if err != nil {
				return cpuID{}, fmt.Errorf("%s: model %q: %w", p, val, err)
			}
			id.model, haveModel = n, true
		}
	}
	if err := sc.Err(); err != nil {
		return cpuID{}, fmt.Errorf("read %s: %w", p, err)
	}
	if !haveVendor || !haveFamily || !haveModel {
		return cpuID{}, fmt.Errorf("%s: no vendor_id, cpu family and model lines (not an x86 cpuinfo)", p)
	}
	return id, nil
}

// cpuidFamily converts Linux's "cpu family" (base family, plus the
// extended family when the base is 0xF) back to the value NCCL computes from
// CPUID: base + (extended << 4).
func cpuidFamily(linux int) int {
	if linux < 0xF {
		return linux
	}
	return 0xF + ((linux - 0xF) << 4)
}
