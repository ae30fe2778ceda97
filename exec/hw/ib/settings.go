package ib

import (
	"fmt"
	"os"
	"strconv"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// Settings are NCCL's IB tunables that reach the queue pairs, memory
// registrations and the data path, with NCCL 2.28's defaults
// (DefaultSettings). SettingsFromEnv reads them.
type Settings struct {
	// TC and SL are the traffic class (GRH) and service level of every
	// data QP (NCCL_IB_TC, NCCL_IB_SL; unset: 0). As in NCCL, the
	// sender's values travel in the connection metadata and the receiver
	// uses them, so both ends of a connection agree.
	TC, SL int
	// Timeout is the local ACK timeout exponent (4.096 us x 2^Timeout)
	// and RetryCnt the transport retry count of every QP's RTS
	// transition (NCCL_IB_TIMEOUT 20, NCCL_IB_RETRY_CNT 7).
	Timeout, RetryCnt int
	// AdaptiveRouting (NCCL_IB_ADAPTIVE_ROUTING): -2 (unset) turns it on
	// for InfiniBand ports and off for RoCE, as NCCL does; 0 off, 1 on.
	// With it on, a data stripe of more than ARThreshold bytes is an RDMA
	// write followed by a zero-byte write with immediate on the same QP,
	// so that the completion cannot overtake data the fabric reordered.
	AdaptiveRouting int
	// ARThreshold is NCCL_IB_AR_THRESHOLD (8192).
	ARThreshold int
	// ECE (NCCL_IB_ECE_ENABLE, default on) exchanges Enhanced Connection
	// Establishment options where the provider supports them: the
	// receiver sets the sender's options before RTR and returns the
	// reduced ones, which the sender sets.
	ECE bool
	// RelaxedOrdering is NCCL_IB_PCI_RELAXED_ORDERING: 0 off, 1 on
	// (refused where the provider cannot), 2 (default) on where the
	// provider supports it. On, data buffers are registered with
	// verbs.AccessRelaxedOrdering.
	RelaxedOrdering int
	// SplitDataOnQPs (NCCL_IB_SPLIT_DATA_ON_QPS, default off) stripes a
	// message over every QP of the connection; off, over one QP per
	// device (the larger device count of the two ends), the QPs rotating
	// from message to message.
	SplitDataOnQPs bool
	// GDRFlushDisable (NCCL_GDR_FLUSH_DISABLE) leaves out the flush QP
	// and the RDMA read after a GPUDirect receive.
	GDRFlushDisable bool
}

// DefaultSettings are NCCL 2.28's defaults.
func DefaultSettings() Settings {
	return Settings{Timeout: 20, RetryCnt: 7, AdaptiveRouting: -2, ARThreshold: 8192, ECE: true, RelaxedOrdering: 2}
}

// SettingsFromEnv reads the settings through lookup (os.LookupEnv when
// nil): TWINCCL_IB_TC, _SL, _TIMEOUT, _RETRY_CNT, _ADAPTIVE_ROUTING,
// _AR_THRESHOLD, _ECE_ENABLE, _PCI_RELAXED_ORDERING, _SPLIT_DATA_ON_QPS
// and TWINCCL_GDR_FLUSH_DISABLE, or the NCCL_* names when ours are unset.
// A value that is not an integer in the range the verbs field holds is
// an error naming the variable.
func SettingsFromEnv(lookup func(string) (string, bool)) (Settings, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	s := DefaultSettings()
	ints := []struct {
		name   string
		dst    *int
		lo, hi int
		want   string
	}{
		{"IB_TC", &s.TC, 0, 255, "a traffic class from 0 to 255"},
		{"IB_SL", &s.SL, 0, 15, "a service level from 0 to 15"},
		{"IB_TIMEOUT", &s.Timeout, 1, 31, "an ACK timeout exponent from 1 to 31"},
		{"IB_RETRY_CNT", &s.RetryCnt, 0, 7, "a retry count from 0 to 7"},
		{"IB_ADAPTIVE_ROUTING", &s.AdaptiveRouting, 0, 1, "0 or 1"},
		{"IB_AR_THRESHOLD", &s.ARThreshold, 0, 1 << 30, "a byte count from 0 to 1 GiB"},
		{"IB_PCI_RELAXED_ORDERING", &s.RelaxedOrdering, 0, 2, "0, 1 or 2"},
	}
	for _, x := range ints {
		v, name, ok := envLookup(lookup, x.name)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < x.lo || n > x.hi {
			return s, fmt.Errorf("ib plugin: %s=%q: want %s", name, v, x.want)
		}
		*x.dst = n
	}
	bools := []struct {
		name string
		dst  *bool
	}{
		{"IB_ECE_ENABLE", &s.ECE},
		{"IB_SPLIT_DATA_ON_QPS", &s.SplitDataOnQPs},
		{"GDR_FLUSH_DISABLE", &s.GDRFlushDisable},
	}
	for _, x := range bools {
		v, name, ok := envLookup(lookup, x.name)
		if !ok {
			continue
		}
		switch v {
		case "0":
			*x.dst = false
		case "1":
			*x.dst = true
		default:
			return s, fmt.Errorf("ib plugin: %s=%q: want 0 or 1", name, v)
		}
	}
	return s, nil
}

// adaptiveRouting says whether adaptive routing is on for a port of link
// layer ll (NCCL: on by default for InfiniBand only).
func (s Settings) adaptiveRouting(ll verbs.LinkLayer) bool {
	if s.AdaptiveRouting == -2 {
		return ll == verbs.LinkIB
	}
	return s.AdaptiveRouting == 1
}
