package ncclapi

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/exec/hw/gpudev"
	"github.com/twinccl/twinccl/search"
)

// Comm is one rank's communicator (ncclComm_t).
type Comm struct {
	Rank, NRanks int
	// Dev is the CUDA device ordinal (ncclCommCuDevice).
	Dev int

	id   UniqueID
	log  *slog.Logger
	ctx  *cuda.Context
	boot *bootstrap.Comm // nil for one rank
	dev  *gpudev.Device  // nil for one rank
	res  *search.Result  // nil for one rank
	topo string          // the topology the plan was searched on

	// mu serialises the calls of this communicator: its launches are
	// prepared in call order, as every rank must prepare them.
	mu       sync.Mutex
	launches map[progKey]*gpudev.Launch
	closed   bool
	// The stream of the latest launch, and the event that orders a launch
	// on another stream after it (order.go).
	launched   bool
	lastStream uintptr
	orderEv    *cuda.Event
	// last is the latest launch, whose kernel reports a peer that made no
	// progress for the timeout (or an abort) in the device's status word;
	// asyncErr keeps the first such error.
	last     *gpudev.Launch
	asyncErr error
}

// Config is what the library reads of an ncclConfig_t.
type Config struct {
	// Blocking is config->blocking; a non-blocking communicator is made
	// blocking (every call completes before it returns, which NCCL allows:
	// ncclCommGetAsyncError then never reports ncclInProgress).
	Blocking bool
	CommName string
}

// timeout bounds the bootstrap and every wait for a peer:
// TWINCCL_TIMEOUT (a Go duration) or the bootstrap's default.
func timeout() (time.Duration, error) {
	v := os.Getenv("TWINCCL_TIMEOUT")
	if v == "" {
		return bootstrap.DefaultTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, errorf(InvalidArgument, "TWINCCL_TIMEOUT=%q: want a positive duration such as 60s", v)
	}
	return d, nil
}

// logger writes the library's warnings to stderr, as NCCL_DEBUG=WARN
// does; NCCL_DEBUG=INFO shows more.
func logger() *slog.Logger {
	lvl := slog.LevelWarn
	switch os.Getenv("NCCL_DEBUG") {
	case "INFO", "TRACE":
		lvl = slog.LevelInfo
	case "VERSION", "":
		lvl = slog.LevelError
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})).With("lib", "twinccl")
}

// InitRank is ncclCommInitRank: rank of nranks of the job id, on CUDA
// device dev. It blocks until every rank has joined (the bootstrap), then
// plans the communicator on the topology. A communicator of one rank needs
// no peer: nothing is bootstrapped or planned.
func InitRank(id UniqueID, nranks, rank, dev int, cfg Config) (*Comm, error) {
	if nranks < 1 {
		return nil, errorf(InvalidArgument, "nranks %d: want at least 1", nranks)
	}
	if rank < 0 || rank >= nranks {
		return nil, errorf(InvalidArgument, "rank %d out of range for %d ranks", rank, nranks)
	}
	to, err := timeout()
	if err != nil {
		return nil, err
	}
	ctx, err := contextFor(dev)
	if err != nil {
		return nil, fmt.Errorf("rank %d: %w", rank, err)
	}
	c := &Comm{Rank: rank, NRanks: nranks, Dev: dev, id: id, log: logger().With("rank", rank), ctx: ctx, launches: map[progKey]*gpudev.Launch{}}
	if nranks == 1 {
		return c, nil
	}
	if err := ensureRoot(id, rank, nranks, to, c.log); err != nil {
		return nil, err
	}
	host, err := listenHost(id)
	if err != nil {
		return nil, err
	}
	c.boot, err = bootstrap.Init(bootstrap.Config{Rank: rank, NRanks: nranks, ID: id.bootID(), Host: host, Timeout: to, Watch: true, Log: c.log})
	if err != nil {
		return nil, errorf(SystemError, "%v", err)
	}
	if c.dev, err = gpudev.New(c.boot, ctx); err != nil {
		c.boot.Abort()
		return nil, err
	}
	c.dev.Timeout = to
	if err := c.plan(); err != nil {
		c.abort()
		return nil, err
	}
	c.log.Info("communicator ready", "nranks", nranks, "device", dev, "topology", c.topo)
	return c, nil
}

// listenHost is the address this rank's bootstrap listens on: loopback
// for a job whose root is on loopback, else TWINCCL_SOCKET_IFNAME's (or
// NCCL_SOCKET_IFNAME's) interface.
func listenHost(id UniqueID) (string, error) {
	if len(id.Addr) > 4 && id.Addr[:4] == "127." {
		return "127.0.0.1", nil
	}
	ifname := os.Getenv("TWINCCL_SOCKET_IFNAME")
	if ifname == "" {
		ifname = os.Getenv("NCCL_SOCKET_IFNAME")
	}
	h, err := bootstrap.ListenAddr(ifname)
	if err != nil {
		return "", errorf(SystemError, "bootstrap interface: %v", err)
	}
	return h, nil
}

// InitAll is ncclCommInitAll: a communicator of len(devs) ranks in this
// process, rank r on device devs[r], bootstrapped over loopback.
func InitAll(devs []int) ([]*Comm, error) {
	n := len(devs)
	if n < 1 {
		return nil, errorf(InvalidArgument, "ndev %d: want at least 1", n)
	}
	seen := map[int]bool{}
	for _, d := range devs {
		if seen[d] {
			return nil, errorf(InvalidUsage, "devlist names device %d twice", d)
		}
		seen[d] = true
	}
	id := UniqueID{Magic: bootstrap.RandomMagic(), Addr: "127.0.0.1:0"}
	if n > 1 {
		var err error
		if id, err = localID(); err != nil {
			return nil, err
		}
	}
	return initConcurrently(n, func(r int) (*Comm, error) { return InitRank(id, n, r, devs[r], Config{Blocking: true}) })
}

// localID is a unique id whose root listens on loopback, made by this
// process (its first rank starts the root).
func localID() (UniqueID, error) { return newUniqueID("127.0.0.1") }

// initConcurrently makes n communicators at once (they bootstrap with
// each other); on any error none is left.
func initConcurrently(n int, mk func(r int) (*Comm, error)) ([]*Comm, error) {
	comms := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = mk(r)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range comms {
			if c != nil {
				c.abort()
			}
		}
		return nil, firstCoded(errs)
	}
	return comms, nil
}

// firstCoded is the first non-nil error, so that its code is the call's.
func firstCoded(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// Finalize is ncclCommFinalize: it waits for the communicator's work on
// the device (every stream of its context).
func (c *Comm) Finalize() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errorf(InvalidUsage, "communicator already destroyed")
	}
	return c.ctx.Synchronize()
}

// Destroy is ncclCommDestroy: it waits for the device's work (launches on
// the application's streams use the communicator's buffers) and frees
// everything, telling the peers goodbye.
func (c *Comm) Destroy() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errorf(InvalidUsage, "communicator already destroyed")
	}
	c.closed = true
	errs := []error{c.ctx.Synchronize()}
	for _, l := range c.launches {
		errs = append(errs, l.Release())
	}
	c.launches = nil
	if c.orderEv != nil {
		errs = append(errs, c.orderEv.Destroy())
	}
	if c.dev != nil {
		errs = append(errs, c.dev.Close())
	}
	if c.boot != nil {
		errs = append(errs, c.boot.Close())
	}
	return errors.Join(errs...)
}

// Abort is ncclCommAbort: running launches stop at their next wait, then
// everything is freed without waiting for peers.
func (c *Comm) Abort() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errorf(InvalidUsage, "communicator already destroyed")
	}
	c.abort()
	return nil
}

func (c *Comm) abort() {
	c.closed = true
	if c.dev != nil {
		c.dev.Abort()
	}
	if c.boot != nil {
		c.boot.Abort()
	}
	_ = c.ctx.Synchronize()
	for _, l := range c.launches {
		_ = l.Release()
	}
	c.launches = nil
	if c.dev != nil {
		_ = c.dev.Close()
	}
}

// AsyncError is ncclCommGetAsyncError: ncclRemoteError once a peer was
// lost, or once a launch gave up waiting for a peer (the kernel's status,
// read from host memory without waiting for the stream), with the reason.
func (c *Comm) AsyncError() error {
	if c.boot != nil {
		if err := c.boot.Err(); err != nil {
			return errorf(RemoteError, "rank %d: %v", c.Rank, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.asyncErr == nil && c.last != nil && !c.closed {
		if err := c.last.Check(); err != nil {
			c.asyncErr = errorf(RemoteError, "%v", err)
		}
	}
	return c.asyncErr
}

// String names the communicator in messages.
func (c *Comm) String() string {
	return "rank " + strconv.Itoa(c.Rank) + " of " + strconv.Itoa(c.NRanks) + " on GPU " + strconv.Itoa(c.Dev)
}
