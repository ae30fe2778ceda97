package model

import (
	"fmt"
	"strconv"
	"strings"
)

// Collective is a collective operation, numbered as NCCL's ncclFunc_t.
// The first NumTunedCollectives are the ones the tuning model covers.
type Collective int

// Collectives.
const (
	CollBroadcast Collective = iota
	CollReduce
	CollAllGather
	CollReduceScatter
	CollAllReduce
	CollSendRecv
	CollSend
	CollRecv
	// CollAlltoAll is ncclAlltoAll, run as a group of sends and receives.
	CollAlltoAll
	NumTunedCollectives = 5 // NCCL_NUM_FUNCTIONS
)

// IsP2P reports whether the collective runs on NCCL's p2p schedule
// (SendRecv, AlltoAll: groups of sends and receives) rather than as a
// tuned collective.
func (c Collective) IsP2P() bool { return c == CollSendRecv || c == CollAlltoAll }

var collectiveNames = [...]string{"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "SendRecv", "Send", "Recv", "AlltoAll"}

func (c Collective) String() string {
	if c >= 0 && int(c) < len(collectiveNames) {
		return collectiveNames[c]
	}
	return fmt.Sprintf("Collective(%d)", int(c))
}

// Algorithm is a collective algorithm, numbered as NCCL_ALGO_*.
type Algorithm int

// Algorithms.
const (
	AlgoTree Algorithm = iota
	AlgoRing
	AlgoCollNetDirect
	AlgoCollNetChain
	AlgoNVLS
	AlgoNVLSTree
	AlgoPAT
	NumAlgorithms = 7
)

var algorithmNames = [NumAlgorithms]string{"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"}

func (a Algorithm) String() string {
	if a >= 0 && int(a) < NumAlgorithms {
		return algorithmNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", int(a))
}

// Protocol is a wire protocol, numbered as NCCL_PROTO_*.
type Protocol int

// Protocols.
const (
	ProtoLL Protocol = iota
	ProtoLL128
	ProtoSimple
	NumProtocols = 3
)

var protocolNames = [NumProtocols]string{"LL", "LL128", "Simple"}

func (p Protocol) String() string {
	if p >= 0 && int(p) < NumProtocols {
		return protocolNames[p]
	}
	return fmt.Sprintf("Protocol(%d)", int(p))
}

// ParseCollective reads a collective name, case-insensitively ("allreduce",
// "AllReduce", "reduce_scatter" and "reducescatter" all work).
func ParseCollective(s string) (Collective, error) {
	if i := lookupName(collectiveNames[:], s); i >= 0 {
		return Collective(i), nil
	}
	return 0, fmt.Errorf("unknown collective %q (want one of %s)", s, strings.Join(collectiveNames[:], ", "))
}

// ParseAlgorithm reads an algorithm name, case-insensitively.
func ParseAlgorithm(s string) (Algorithm, error) {
	if i := lookupName(algorithmNames[:], s); i >= 0 {
		return Algorithm(i), nil
	}
	return 0, fmt.Errorf("unknown algorithm %q (want one of %s)", s, strings.Join(algorithmNames[:], ", "))
}

// ParseProtocol reads a protocol name, case-insensitively.
func ParseProtocol(s string) (Protocol, error) {
	if i := lookupName(protocolNames[:], s); i >= 0 {
		return Protocol(i), nil
	}
	return 0, fmt.Errorf("unknown protocol %q (want one of %s)", s, strings.Join(protocolNames[:], ", "))
}

// lookupName finds s among names ignoring case, '_' and '-'; -1 if absent.
func lookupName(names []string, s string) int {
	norm := func(x string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(strings.TrimSpace(x)))
	}
	want := norm(s)
	for i, n := range names {
		if norm(n) == want {
			return i
		}
	}
	return -1
}

// ParseSize reads a byte count with an optional K, M or G suffix (powers
// of 1024; "KB", "KiB" and "B" are accepted too), as nccl-tests' -b and -e
// take them.
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "IB"), "B")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult, t = 1<<10, t[:n-1]
		case 'M':
			mult, t = 1<<20, t[:n-1]
		case 'G':
			mult, t = 1<<30, t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a size (e.g. 1024, 64K, 1G)", s)
	}
	if v > (1<<62)/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return v * mult, nil
}
