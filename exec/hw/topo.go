package hw

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"

	"github.com/twinccl/twinccl/model"
)

// ErrNoNVML is returned by discovery when no NVML implementation is given
// (typically because NVML could not be initialised on this machine).
var ErrNoNVML = errors.New("NVML not available")

// ErrNotSupported reports an NVML or CUDA query that this driver does not
// offer (the symbol is missing, or the call said NOT_SUPPORTED).
var ErrNotSupported = errors.New("not supported by this driver")

// PCIInfo is the part of NVML's nvmlPciInfo_t that discovery uses.
type PCIInfo struct {
	// BusID is NVML's busId, "dddddddd:bb:dd.f" with an 8-digit domain.
	BusID string
	// BusIDLegacy is NVML's busIdLegacy, the 4-digit-domain form that the
	// unversioned NVML calls (which NCCL uses) return.
	BusIDLegacy string
}

// NVML field identifiers used by discovery (nvml.h).
const (
	FieldNvLinkGetState   = 165 // NVML_FI_DEV_NVLINK_GET_STATE, scope = link
	FieldC2CLinkCount     = 170 // NVML_FI_DEV_C2C_LINK_COUNT
	FieldC2CLinkGetStatus = 171 // NVML_FI_DEV_C2C_LINK_GET_STATUS, scope = link
	FieldC2CLinkGetMaxBw  = 172 // NVML_FI_DEV_C2C_LINK_GET_MAX_BW (MB/s), scope = link
)

// FieldValue is one NVML field value request and its answer.
type FieldValue struct {
	ID    uint32 // field identifier, e.g. FieldNvLinkGetState
	Scope uint32 // scope identifier (a link number for per-link fields)
	Value uint64 // raw 8-byte value; unsigned int fields use the low 32 bits
	Err   error  // per-field result; nil on success
}

// NVML is the subset of the NVML library that topology discovery uses.
type NVML interface {
	// DeviceCount returns the number of GPUs NVML sees.
	DeviceCount() (int, error)
	// Device returns the GPU with the given NVML index.
	Device(index int) (NVMLDevice, error)
}

// NVMLDevice is the subset of an NVML device handle that discovery uses.
type NVMLDevice interface {
	// PCIInfo returns the device's PCI bus ids.
	PCIInfo() (PCIInfo, error)
	// ComputeCapability returns the CUDA compute capability.
	ComputeCapability() (major, minor int, err error)
	// NvLinkP2PSupported reports NVML_NVLINK_CAP_P2P_SUPPORTED for link.
	NvLinkP2PSupported(link int) (bool, error)
	// NvLinkActive reports whether nvmlDeviceGetNvLinkState says enabled.
	NvLinkActive(link int) (bool, error)
	// NvLinkRemotePCIInfo returns the PCI ids of the device at the other end
	// of link.
	NvLinkRemotePCIInfo(link int) (PCIInfo, error)
	// FieldValues fills Value and Err of each element of values. The error
	// returned is for the call as a whole.
	FieldValues(values []FieldValue) error
}

// CUDAAttributes are the CUDA device attributes that NCCL reads into the
// topology.
type CUDAAttributes struct {
	GPUDirectRDMA bool // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED
	DMABuf        bool // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
}

// CUDA answers CUDA device attribute queries, by PCI bus id.
type CUDA interface {
	// DeviceAttributes returns the attributes of the GPU at busID
	// ("dddd:bb:dd.f", lower case).
	DeviceAttributes(busID string) (CUDAAttributes, error)
}

// NetInterface is one network interface with its addresses, as listed by the
// operating system (net.Interfaces order: ascending interface index).
type NetInterface struct {
	Name  string
	Addrs []string // IP addresses without prefix length, e.g. "192.0.2.2", "fe80::1"
}

// Options configures a Discoverer. Zero values select the live machine.
type Options struct {
	// SysRoot is the sysfs mount point ("/sys").
	SysRoot string
	// ProcRoot is the procfs mount point ("/proc").
	ProcRoot string
	// NVML lists the GPUs. Required.
	NVML NVML
	// CUDA answers the GPUDirect RDMA and DMA-BUF attributes. Optional: when
	// nil, or when it fails for a GPU, the peer-memory module rule is used.
	CUDA CUDA
	// Interfaces lists network interfaces (default: net.Interfaces).
	Interfaces func() ([]NetInterface, error)
	// Getenv reads NCCL's environment variables (default: os.Getenv).
	Getenv func(string) string
	// Hostname returns the host name for host_hash (default: os.Hostname).
	Hostname func() (string, error)
	// Arch is a GOARCH value selecting the <cpu arch> attribute (default:
	// runtime.GOARCH).
	Arch string
	// Logger receives diagnostics (default: slog.Default()).
	Logger *slog.Logger
}

// Discoverer builds the NCCL topology XML of a machine.
type Discoverer struct {
	opts Options
	log  *slog.Logger
}

// NewDiscoverer checks opts and fills in defaults. It returns an error
// wrapping ErrNoNVML when opts.NVML is nil.
func NewDiscoverer(opts Options) (*Discoverer, error) {
	if opts.NVML == nil {
		return nil, fmt.Errorf("topology discovery: %w", ErrNoNVML)
	}
	if opts.SysRoot == "" {
		opts.SysRoot = "/sys"
	}
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.Interfaces == nil {
		opts.Interfaces = systemInterfaces
	}
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.Hostname == nil {
		opts.Hostname = os.Hostname
	}
	if opts.Arch == "" {
		opts.Arch = runtime.GOARCH
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Discoverer{opts: opts, log: opts.Logger}, nil
}

// Discover is NewDiscoverer followed by Discoverer.Discover.
func Discover(opts Options) (*model.Element, error) {
	d, err := NewDiscoverer(opts)
	if err != nil {
		return nil, err
	}
	return d.Discover()
}

// gpuInfo is what NVML and CUDA say about one GPU.
type gpuInfo struct {
	index   int    // NVML index, also the rank
	busID   string // "dddd:bb:dd.f"
	sm      int    // major*10+minor
	nvlinks []string
	c2cBw   int
	c2cN    int
	gdr     bool
	dmaBuf  bool
}

// Discover returns the topology of the machine as NCCL 2.28.9 dumps it for
// a job with one rank per GPU (rank i on NVML device i): <system
// version="1"> with the CPUs, PCI tree, GPUs with their NVLinks and the NICs
// of the network plugin NCCL would pick.
func (d *Discoverer) Discover() (*model.Element, error) {
	gpus, err := d.gpus()
	if err != nil {
		return nil, err
	}
	hostHash := d.hostHash()
	nets, plugin, err := d.netDevices()
	if err != nil {
		return nil, err
	}
	d.log.Debug("network plugin", "plugin", plugin, "devices", len(nets))

	var fused *model.Element
	for rank, g := range gpus {
		rankXML, err := d.rankXML(g, rank, nets, hostHash)
		if err != nil {
			return nil, fmt.Errorf("rank %d (GPU %s): %w", rank, g.busID, err)
		}
		if fused == nil {
			fused = rankXML
		} else {
			fuse(fused, rankXML)
		}
	}
	return fused, nil
}

// rankXML builds what one NCCL rank detects before fusion: its own GPU and
// every NIC of the network plugin, trimmed.
func (d *Discoverer) rankXML(g gpuInfo, rank int, nets []netDev, hostHash uint64) (*model.Element, error) {
	doc := &xdoc{}
	b := &builder{d: d, doc: doc, hostHash: hostHash}
	sys := doc.add(nil, "system")
	sys.set("version", "1")

	gpu, err := b.fillGPU(g)
	if err != nil {
		return nil, err
	}
	gpu.set("keep", "1")
	gpu.set("rank", strconv.Itoa(rank))
	gpu.setIfUnset("gdr", boolInt(g.gdr))

	for i, n := range nets {
		if err := b.fillNet(n, i, g); err != nil {
			return nil, fmt.Errorf("NIC %s: %w", n.name, err)
		}
	}
	trim(sys)
	return export(sys), nil
}

// builder holds the state of one rank's XML construction.
type builder struct {
	d        *Discoverer
	doc      *xdoc
	hostHash uint64
}

func boolInt(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
