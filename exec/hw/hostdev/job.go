package hostdev

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
)

// Rank is one rank of a job: its bootstrap, transports and device.
type Rank struct {
	Comm   *bootstrap.Comm
	Set    *transport.Set
	Device *Device
	// Hosts is every rank's host id (RankConfig.HostID).
	Hosts []string
	// comms is the number of communicators split from the job so far
	// (Split); the job itself is communicator 0.
	comms int
	// split are those communicators, every member's view alike
	split []SplitComm
}

// RankConfig describes how a rank joins its job.
type RankConfig struct {
	Boot bootstrap.Config
	// HostID is this rank's host identity (ranks with equal ids use shm).
	HostID string
	// ForceNet uses the net transport between every pair.
	ForceNet bool
	// Net is the network plugin (the socket plugin when nil).
	Net transport.Plugin
	// Flush is the net transport's flush hook (a no-op when nil).
	Flush transport.FlushFunc
	Log   *slog.Logger
}

// Join bootstraps one rank, gathers the host ids and prepares its
// transports and device.
func Join(cfg RankConfig) (*Rank, error) {
	cfg.Boot.Watch = true
	if cfg.Boot.Log == nil {
		cfg.Boot.Log = cfg.Log
	}
	comm, err := bootstrap.Init(cfg.Boot)
	if err != nil {
		return nil, err
	}
	ids, err := comm.AllGather([]byte(cfg.HostID))
	if err != nil {
		comm.Abort()
		return nil, fmt.Errorf("hostdev rank %d: gather host ids: %w", cfg.Boot.Rank, err)
	}
	hosts := make([]string, len(ids))
	for i, b := range ids {
		hosts[i] = string(b)
	}
	set, err := transport.NewSet(comm, transport.Config{HostIDs: hosts, ForceNet: cfg.ForceNet, Net: cfg.Net, Flush: cfg.Flush, Log: cfg.Log})
	if err != nil {
		comm.Abort()
		return nil, err
	}
	dev := New(comm, set)
	// The host's cores are shared by its ranks: each reduces with its
	// share of them (at least one goroutine).
	local := 0
	for _, h := range hosts {
		if h == cfg.HostID {
			local++
		}
	}
	if os.Getenv("TWINCCL_REDUCE_THREADS") == "" {
		dev.Workers = max(1, runtime.NumCPU()/max(1, local))
	}
	return &Rank{Comm: comm, Set: set, Device: dev, Hosts: hosts}, nil
}

// Close waits for every rank (barrier), then releases the transports and
// the bootstrap with goodbyes.
func (r *Rank) Close() error {
	berr := r.Comm.Barrier()
	serr := r.Set.Close()
	r.Comm.Close()
	return errors.Join(berr, serr)
}

// Abort releases everything at once (peers see this rank as lost). The
// bootstrap goes first: when this rank aborts because another was lost, it
// passes that rank on over the liveness connections before its data
// connections break, so that survivors name the rank that died rather
// than this one (with fast progress a broken data socket would otherwise
// be seen first).
func (r *Rank) Abort() {
	r.Comm.Abort()
	_ = r.Set.Close()
}

// LocalJob is a job of n ranks inside this process (one goroutine each),
// over real shm and socket connections: the conformance suite's executor
// and the tests' harness.
type LocalJob struct {
	Ranks []*Rank
	root  *bootstrap.Root
}

// LocalOptions shape a LocalJob.
type LocalOptions struct {
	// HostsOf maps a rank to its host id (one host when nil).
	HostsOf  func(rank int) string
	ForceNet bool
	Timeout  time.Duration
	// Flush is every rank's net flush hook (a no-op when nil).
	Flush transport.FlushFunc
	Log   *slog.Logger
	// Net returns rank r's network plugin (the socket plugin when nil).
	Net func(rank int) transport.Plugin
}

// NewLocalJob starts a root and n ranks on loopback.
func NewLocalJob(n int, o LocalOptions) (*LocalJob, error) {
	if o.Timeout <= 0 {
		o.Timeout = 20 * time.Second
	}
	root, err := bootstrap.StartRoot("127.0.0.1", bootstrap.RandomMagic(), n, o.Timeout, o.Log)
	if err != nil {
		return nil, err
	}
	j := &LocalJob{Ranks: make([]*Rank, n), root: root}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			host := "local"
			if o.HostsOf != nil {
				host = o.HostsOf(r)
			}
			var plugin transport.Plugin
			if o.Net != nil {
				plugin = o.Net(r)
			}
			j.Ranks[r], errs[r] = Join(RankConfig{Net: plugin, Boot: bootstrap.Config{Rank: r, NRanks: n, ID: root.ID(), Host: "127.0.0.1", Timeout: o.Timeout},
				HostID: host, ForceNet: o.ForceNet, Flush: o.Flush, Log: o.Log})
		}()
	}
	wg.Wait()
	rerr := root.Wait()
	if err := errors.Join(append(errs, rerr)...); err != nil {
		for _, r := range j.Ranks {
			if r != nil {
				r.Abort()
			}
		}
		return nil, err
	}
	return j, nil
}

// Execute runs p on every rank at once and returns the outputs.
func (j *LocalJob) Execute(p *model.Program, inputs [][]byte) ([][]byte, error) {
	n := len(j.Ranks)
	if p.NRanks != n || len(inputs) != n {
		return nil, fmt.Errorf("hostdev: program for %d ranks with %d inputs on a job of %d", p.NRanks, len(inputs), n)
	}
	outs := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		outs[r] = make([]byte, p.OutCount*int64(p.Dtype.Size()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[r] = j.Ranks[r].Device.Run(p, inputs[r], outs[r])
		}()
	}
	wg.Wait()
	return outs, errors.Join(errs...)
}

// Close closes every rank.
func (j *LocalJob) Close() error {
	errs := make([]error, len(j.Ranks))
	var wg sync.WaitGroup
	for i, r := range j.Ranks {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = r.Close() }()
	}
	wg.Wait()
	return errors.Join(errs...)
}
