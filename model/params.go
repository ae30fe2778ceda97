package model

import (
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// Params are the NCCL environment settings that change topology and path
// decisions. The zero value is not meaningful; use DefaultParams or
// ParamsFromEnv.
type Params struct {
	// P2PLevel is the highest path type allowed for P2P (NCCL_P2P_LEVEL,
	// NCCL_P2P_DISABLE); -1 means NCCL's default (PXB, SYS on AMD <=2 GPUs).
	P2PLevel PathType
	// GDRLevel is the highest GPU->NIC path type for GPUDirect RDMA
	// (NCCL_NET_GDR_LEVEL); -1 means the default, PXB. With NetGDRC2C a
	// P2C path is compared as C2C (NCCL 2.28.9's ncclTopoCheckGdr).
	GDRLevel   PathType
	NetGDRRead int  // NCCL_NET_GDR_READ: -2 unset, 0 off, 1 on
	NetGDRC2C  bool // NCCL_NET_GDR_C2C (default on)
	NVBDisable bool // NCCL_NVB_DISABLE
	PXNDisable bool // NCCL_PXN_DISABLE
	PXNC2C     bool // NCCL_PXN_C2C (default on)
	// NetDisableIntra forbids using the NIC between GPUs of one node
	// (NCCL_NET_DISABLE_INTRA).
	NetDisableIntra bool
	SHMDisable      bool // NCCL_SHM_DISABLE
	// MNNVLEnable is NCCL_MNNVL_ENABLE: 2 (default) fuses the hosts of a
	// multi-host file when their GPUs share the NVSwitch fabric, as NCCL
	// does when NVML reports one clique; 0 never (each host on its own,
	// joined by the network); 1 also fuses the --nodes copies of a
	// single-host file into one NVLink domain (the trays of an NVL72 rack),
	// which an XML cannot record.
	MNNVLEnable int
	// MNNVLHosts is TWINCCL_MNNVL_HOSTS: with NCCL_MNNVL_ENABLE=1, the
	// --nodes copies form NVLink domains of this many hosts each (18: one
	// GB200 NVL72 rack of 4-GPU trays), joined by the network; 0: one
	// domain of all of them.
	MNNVLHosts int
}

// DefaultParams returns NCCL 2.28.9's defaults.
func DefaultParams() Params {
	return Params{P2PLevel: -1, GDRLevel: -1, NetGDRRead: -2, NetGDRC2C: true, PXNC2C: true, MNNVLEnable: 2}
}

// ParamEnvNames lists the NCCL variables ParamsFromEnv reads (it also
// reads our TWINCCL_MNNVL_HOSTS, which is no NCCL setting).
var ParamEnvNames = []string{
	"NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ", "NCCL_NET_GDR_C2C",
	"NCCL_NVB_DISABLE", "NCCL_PXN_DISABLE", "NCCL_PXN_C2C", "NCCL_NET_DISABLE_INTRA", "NCCL_SHM_DISABLE",
	"NCCL_MNNVL_ENABLE",
}

// LookupEnvInt reads an integer variable through lookup, in C strtoll
// syntax (decimal, 0x hex, leading-0 octal, surrounding blanks) within a
// bits-wide signed integer. ok is false when the variable is unset or
// empty.
//
// NCCL 2.28.9 reads its integer parameters with ncclLoadParam
// (src/misc/param.cc:76-94): value = strtoll(str, nullptr, 0), and only
// when that sets errno (ERANGE: beyond 64 bits) "Invalid value %s for %s,
// using default". LookupEnvInt does the same for such a value: it logs
// that warning (slog, naming the variable and value) and returns ok
// false, so that the caller keeps NCCL's default. Where NCCL would go on
// silently with a wrong number, it is an error naming the variable
// instead: a value that is not entirely an integer (strtoll would take
// its leading digits, 0 for "abc"; Go-only forms such as 0b1 or 1_000
// are not C integers either), or one that fits 64 bits but not bits (NCCL
// would truncate it to its int).
func LookupEnvInt(lookup func(string) (string, bool), name string, bits int) (n int64, ok bool, err error) {
	v, set := lookup(name)
	if !set || strings.TrimSpace(v) == "" {
		return 0, false, nil
	}
	n, whole := cWholeInt(v)
	if !whole {
		return 0, false, fmt.Errorf("%s=%q: not an integer", name, v)
	}
	if cStrtollOverflows(v) {
		slog.Warn(fmt.Sprintf("Invalid value %s for %s, using default (beyond 64 bits: NCCL 2.28.9 ignores it, src/misc/param.cc ncclLoadParam)", strings.TrimSpace(v), name))
		return 0, false, nil
	}
	if bits < 64 && (n < -1<<(bits-1) || n > 1<<(bits-1)-1) {
		return 0, false, fmt.Errorf("%s=%q: out of range for a %d-bit integer", name, v, bits)
	}
	return n, true, nil
}

// ParamsFromEnv reads the settings from lookup (os.LookupEnv when nil).
// Values NCCL would not understand are errors naming the variable.
func ParamsFromEnv(lookup func(string) (string, bool)) (Params, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	p := DefaultParams()
	intVar := func(name string, dst *int) error {
		n, ok, err := LookupEnvInt(lookup, name, 64)
		if ok {
			*dst = int(n)
		}
		return err
	}
	boolVar := func(name string, dst *bool) error {
		n := 0
		if *dst {
			n = 1
		}
		if err := intVar(name, &n); err != nil {
			return err
		}
		*dst = n != 0
		return nil
	}
	if err := intVar("NCCL_NET_GDR_READ", &p.NetGDRRead); err != nil {
		return p, err
	}
	if err := intVar("NCCL_MNNVL_ENABLE", &p.MNNVLEnable); err != nil {
		return p, err
	}
	if p.MNNVLEnable < 0 || p.MNNVLEnable > 2 {
		return p, fmt.Errorf("NCCL_MNNVL_ENABLE=%d: want 0 (off), 1 (on) or 2 (auto)", p.MNNVLEnable)
	}
	if err := intVar("TWINCCL_MNNVL_HOSTS", &p.MNNVLHosts); err != nil {
		return p, err
	}
	if p.MNNVLHosts < 0 || p.MNNVLHosts > MaxClusterNodes {
		return p, fmt.Errorf("TWINCCL_MNNVL_HOSTS=%d: want 0 (one NVLink domain of all hosts) to %d", p.MNNVLHosts, MaxClusterNodes)
	}
	for _, b := range []struct {
		name string
		dst  *bool
	}{
		{"NCCL_NET_GDR_C2C", &p.NetGDRC2C}, {"NCCL_NVB_DISABLE", &p.NVBDisable}, {"NCCL_PXN_DISABLE", &p.PXNDisable},
		{"NCCL_PXN_C2C", &p.PXNC2C}, {"NCCL_NET_DISABLE_INTRA", &p.NetDisableIntra}, {"NCCL_SHM_DISABLE", &p.SHMDisable},
	} {
		if err := boolVar(b.name, b.dst); err != nil {
			return p, err
		}
	}
	disable := 0
	if err := intVar("NCCL_P2P_DISABLE", &disable); err != nil {
		return p, err
	}
	if disable == 1 {
		p.P2PLevel = PathLOC
	} else if v, ok := lookup("NCCL_P2P_LEVEL"); ok && v != "" {
		l, err := parseLevel("NCCL_P2P_LEVEL", v)
		if err != nil {
			return p, err
		}
		p.P2PLevel = l
	}
	if v, ok := lookup("NCCL_NET_GDR_LEVEL"); ok && v != "" {
		l, err := parseLevel("NCCL_NET_GDR_LEVEL", v)
		if err != nil {
			return p, err
		}
		p.GDRLevel = l
	}
	return p, nil
}

// parseLevel reads a path level as NCCL's ncclGetLevel does: a path type name
// up to SYS, or a legacy integer 0..5 mapped to LOC, PIX, PXB, PHB, SYS, SYS.
func parseLevel(name, v string) (PathType, error) {
	for i := PathLOC; i <= PathSYS; i++ {
		if v == PathTypeNames[i] {
			return i, nil
		}
	}
	if v[0] >= '0' && v[0] <= '9' {
		// paths.cc ncclGetLevel: strtol(str, NULL, 0) into an int, capped
		// at 5. A value with trailing text (NCCL would take its leading
		// digits) or one that wraps to a negative int (NCCL would index
		// its table out of bounds) is an error.
		old := []PathType{PathLOC, PathPIX, PathPXB, PathPHB, PathSYS, PathSYS}
		n, whole := cWholeInt(v)
		if !whole || int32(n) < 0 || int64(int32(n)) != n {
			return 0, fmt.Errorf("%s=%q: expected one of %s or a number 0-5", name, v, strings.Join(PathTypeNames[:PathSYS+1], ", "))
		}
		return old[min(int(n), len(old)-1)], nil
	}
	return 0, fmt.Errorf("%s=%q: expected one of %s or a number 0-5", name, v, strings.Join(PathTypeNames[:PathSYS+1], ", "))
}
