package gpudev

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/model"
)

// SHM connections: when P2P between the GPUs is disabled (NCCL_P2P_DISABLE=1
// or TWINCCL_P2P_DISABLE=1) and SHM is not, the connection region of two
// ranks of one host lives in host memory: a /dev/shm file that both
// processes map and register with CUDA (device-mapped, portable), so the
// kernel reads and writes it over PCIe with the same code as GPU memory. The file is unlinked once the peer has
// mapped it, so a killed process leaves nothing behind.

// shmDir is where SHM regions are created (a variable for tests).
var shmDir = "/dev/shm"

// shmRegion is one mapped and registered host-memory region.
type shmRegion struct {
	mem  []byte
	host *cuda.HostMem
	path string // non-empty until unlinked
}

// p2pDisabled reports whether P2P between GPUs is off (NCCL_P2P_DISABLE=1
// or TWINCCL_P2P_DISABLE=1): same-host connections go through SHM, or
// through the net transport when SHM is off too.
func p2pDisabled() bool {
	return os.Getenv("NCCL_P2P_DISABLE") == "1" || os.Getenv("TWINCCL_P2P_DISABLE") == "1"
}

// shmDisabled reports whether the SHM transport is off (NCCL_SHM_DISABLE=1
// or TWINCCL_SHM_DISABLE=1).
func shmDisabled() bool {
	return os.Getenv("NCCL_SHM_DISABLE") == "1" || os.Getenv("TWINCCL_SHM_DISABLE") == "1"
}

// checkTransport refuses what the GPU device cannot do: LL128 through host
// memory, over SHM or the net transport (NCCL enables LL128 only over
// NVLink: a 128-byte line is not delivered whole over PCIe, and the proxy
// would have to check every line's flag). It looks at every connection of
// p, not only this rank's, so that all ranks refuse the same Programs.
func (d *Device) checkTransport(p *model.Program) error {
	if p.Proto != model.ProtoLL128 {
		return nil
	}
	for _, c := range p.Conns {
		switch d.Link(int(c.From), int(c.To)) {
		case LinkSHM:
			return errors.New("LL128 needs P2P over NVLink; with P2P disabled use LL or Simple (NCCL does not run LL128 over SHM either)")
		case LinkNet:
			return fmt.Errorf("LL128 over the net transport (rank %d to rank %d): use LL or Simple (the GPU device's proxy carries LL and Simple only)", c.From, c.To)
		}
	}
	return nil
}

// shmCreate makes a zeroed region of size bytes named after the job, the
// two ranks and the exchange number, and maps it for the GPU.
func (d *Device) shmCreate(size int64, peer int, seq uint32) (*shmRegion, error) {
	name := fmt.Sprintf("twgpu-%x-%d-%d-%d", d.comm.Magic()&0xffffffff, d.comm.Rank(), peer, seq)
	path := filepath.Join(shmDir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("size %s to %d bytes: %w", path, size, err)
	}
	r, err := d.shmMap(f, size)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	r.path = path
	return r, nil
}

// shmOpen maps the peer's region by name.
func (d *Device) shmOpen(name string, size int64) (*shmRegion, error) {
	if filepath.Base(name) != name || name == "" || name == "." {
		return nil, fmt.Errorf("bad shared memory name %q", name)
	}
	path := filepath.Join(shmDir, name)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() != size {
		return nil, fmt.Errorf("%s holds %d bytes, want %d", path, st.Size(), size)
	}
	return d.shmMap(f, size)
}

func (d *Device) shmMap(f *os.File, size int64) (*shmRegion, error) {
	mem, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", f.Name(), err)
	}
	host, err := d.ctx.MemHostRegister(unsafe.Pointer(&mem[0]), len(mem))
	if err != nil {
		syscall.Munmap(mem)
		return nil, fmt.Errorf("register %s with CUDA: %w", f.Name(), err)
	}
	r := &shmRegion{mem: mem, host: host}
	d.shm = append(d.shm, r)
	return r, nil
}

// unlink removes the region's file (its mappings stay).
func (r *shmRegion) unlink() {
	if r.path != "" {
		os.Remove(r.path)
		r.path = ""
	}
}

func (r *shmRegion) release() error {
	r.unlink()
	err := r.host.Free()
	return errors.Join(err, syscall.Munmap(r.mem))
}

// name is the file name the peer opens.
func (r *shmRegion) name() string { return filepath.Base(r.path) }
