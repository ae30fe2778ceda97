package gpudev

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
)

// Contexts retains the primary context of every visible GPU.
func Contexts() ([]*cuda.Context, error) {
	drv, err := cuda.Open()
	if err != nil {
		return nil, err
	}
	n, err := drv.DeviceCount()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("gpudev: no CUDA device")
	}
	var ctxs []*cuda.Context
	for i := 0; i < n; i++ {
		dev, err := drv.Device(i)
		if err != nil {
			return nil, err
		}
		ctx, err := dev.RetainPrimaryContext()
		if err != nil {
			return nil, err
		}
		ctxs = append(ctxs, ctx)
	}
	for i, a := range ctxs {
		for j, b := range ctxs {
			if i == j {
				continue
			}
			ok, err := a.Device().CanAccessPeer(b.Device())
			if err != nil {
				return nil, err
			}
			if ok {
				if err := a.EnablePeerAccess(b); err != nil {
					return nil, fmt.Errorf("gpudev: peer access GPU %d -> %d: %w", i, j, err)
				}
			}
		}
	}
	return ctxs, nil
}

// LocalJob is a job of n ranks inside this process, rank r on GPU
// r mod (number of GPUs), with a real bootstrap over loopback: the
// conformance suite's executor and the tests' harness.
type LocalJob struct {
	Comms   []*bootstrap.Comm
	Devices []*Device
}

// NewLocalJob starts a bootstrap root and n ranks on ctxs.
func NewLocalJob(n int, ctxs []*cuda.Context, timeout time.Duration, log *slog.Logger) (*LocalJob, error) {
	return NewLocalJobOptions(n, ctxs, timeout, log, LocalOptions{})
}

// LocalOptions choose what NewLocalJob leaves at its default.
type LocalOptions struct {
	// Net, when set, gives rank r's net plugin (Options.Net); nil
	// plugins and a nil Net leave the socket plugin.
	Net func(rank int) (transport.Plugin, error)
}

// NewLocalJobOptions is NewLocalJob with opt.
func NewLocalJobOptions(n int, ctxs []*cuda.Context, timeout time.Duration, log *slog.Logger, opt LocalOptions) (*LocalJob, error) {
	root, err := bootstrap.StartRoot("127.0.0.1", bootstrap.RandomMagic(), n, timeout, log)
	if err != nil {
		return nil, err
	}
	j := &LocalJob{Comms: make([]*bootstrap.Comm, n), Devices: make([]*Device, n)}
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := bootstrap.Init(bootstrap.Config{Rank: r, NRanks: n, ID: root.ID(), Host: "127.0.0.1", Timeout: timeout, Log: log, Watch: true})
			if err != nil {
				errs[r] = err
				return
			}
			j.Comms[r] = c
			var o Options
			if opt.Net != nil {
				if o.Net, err = opt.Net(r); err != nil {
					errs[r] = fmt.Errorf("gpudev rank %d: net plugin: %w", r, err)
					return
				}
			}
			if j.Devices[r], errs[r] = NewWithOptions(c, ctxs[r%len(ctxs)], o); errs[r] != nil && o.Net != nil {
				o.Net.Close()
			}
		}()
	}
	wg.Wait()
	errs[n] = root.Wait()
	if err := errors.Join(errs...); err != nil {
		j.Close()
		return nil, err
	}
	return j, nil
}

// Execute runs p on every rank at once over host buffers (copied to and
// from GPU memory) and returns the outputs. It goes in three phases, each
// on all ranks before the next: set-up, launch, copy-back. Several ranks
// may share a GPU, and freeing GPU memory waits for that GPU's running
// kernels, so no rank may free while another's kernel still waits on it.
func (j *LocalJob) Execute(p *model.Program, inputs [][]byte) ([][]byte, error) {
	n := len(j.Devices)
	if p.NRanks != n || len(inputs) != n {
		return nil, fmt.Errorf("gpudev: program for %d ranks with %d inputs on a job of %d", p.NRanks, len(inputs), n)
	}
	runs := make([]*HostRun, n)
	outs := make([][]byte, n)
	errs := make([]error, n)
	phase := func(f func(r int) error) error {
		var wg sync.WaitGroup
		for r := 0; r < n; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if errs[r] = f(r); errs[r] != nil {
					j.Devices[r].Abort()
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	defer func() {
		for _, h := range runs {
			if h != nil {
				h.Release()
			}
		}
	}()
	if err := phase(func(r int) (err error) { runs[r], err = j.Devices[r].StageHost(p, inputs[r]); return }); err != nil {
		return nil, err
	}
	if err := phase(func(r int) error { return runs[r].Run() }); err != nil {
		return nil, err
	}
	err := phase(func(r int) (err error) { outs[r], err = runs[r].Output(); return })
	return outs, err
}

// Close releases every device and bootstrap.
func (j *LocalJob) Close() error {
	var errs []error
	for _, d := range j.Devices {
		if d != nil {
			errs = append(errs, d.Close())
		}
	}
	for _, c := range j.Comms {
		if c != nil {
			c.Close()
		}
	}
	return errors.Join(errs...)
}

// HostRun is one Program staged on a device with host data: its launch
// and the GPU buffers holding the copied input and the output.
type HostRun struct {
	d             *Device
	l             *Launch
	bufs, in, out cuda.DevicePtr
	outBytes      uint64
}

// StageHost prepares p and copies in to a new GPU input buffer; the
// output buffer is filled with 0xa5 so that elements the Program fails to
// write show.
func (d *Device) StageHost(p *model.Program, in []byte) (*HostRun, error) {
	es := int64(p.Dtype.Size())
	if int64(len(in)) != p.InCount*es {
		return nil, fmt.Errorf("gpudev rank %d: input of %d bytes, want %d", d.comm.Rank(), len(in), p.InCount*es)
	}
	l, err := d.Prepare(p, false)
	if err != nil {
		return nil, err
	}
	h := &HostRun{d: d, l: l, outBytes: uint64(p.OutCount * es)}
	inBytes := uint64(p.InCount * es)
	if h.bufs, err = d.ctx.MemAlloc(max(inBytes+h.outBytes, 16)); err != nil {
		l.Release()
		return nil, fmt.Errorf("gpudev rank %d: buffers: %w", d.comm.Rank(), err)
	}
	h.in, h.out = h.bufs, h.bufs.Add(inBytes)
	if inBytes > 0 {
		if err := d.ctx.MemcpyHtoD(h.in, in); err != nil {
			h.Release()
			return nil, err
		}
	}
	if h.outBytes > 0 {
		if err := d.ctx.MemsetD8(h.out, 0xa5, h.outBytes); err != nil {
			h.Release()
			return nil, err
		}
	}
	return h, nil
}

// Run launches the staged Program and waits for it.
func (h *HostRun) Run() error { return h.l.Run(h.in, h.out) }

// Output copies the output buffer back to the host.
func (h *HostRun) Output() ([]byte, error) {
	out := make([]byte, h.outBytes)
	if h.outBytes > 0 {
		if err := h.d.ctx.MemcpyDtoH(out, h.out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Release frees the run's buffers and launch.
func (h *HostRun) Release() error {
	err := h.l.Release()
	if h.bufs != 0 {
		err = errors.Join(err, h.d.ctx.MemFree(h.bufs))
		h.bufs = 0
	}
	return err
}

// RunHost runs p once over a host input buffer and returns the output.
func (d *Device) RunHost(p *model.Program, in []byte) ([]byte, error) {
	h, err := d.StageHost(p, in)
	if err != nil {
		return nil, err
	}
	defer h.Release()
	if err := h.Run(); err != nil {
		return nil, err
	}
	return h.Output()
}
