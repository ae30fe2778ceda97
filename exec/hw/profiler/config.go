package profiler

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Environment variables the plugin reads.
const (
	EnvDir       = "TWINCCL_PROFILER_DIR"        // output directory (required)
	EnvProxy     = "TWINCCL_PROFILER_PROXY"      // 1: record proxy steps (an event trace beside the call trace)
	EnvKernel    = "TWINCCL_PROFILER_KERNEL"     // 0: no kernel channel events (host times only)
	EnvMaxEvents = "TWINCCL_PROFILER_MAX_EVENTS" // cap on the events kept in memory
	EnvJob       = "TWINCCL_PROFILER_JOB"        // job name written in every row
)

// DefaultMaxEvents is the default cap on events kept: 152 bytes each, so
// about 160 MB at most; a collective costs two (its API call and its
// task), a proxy operation or step one more.
const DefaultMaxEvents = 1 << 20

// globalRankVars name the process's rank in its job, in the order they are
// tried: torchrun and most launchers, Open MPI, Slurm's srun.
var globalRankVars = []string{"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"}

// jobVars name the job, in the order they are tried after EnvJob.
var jobVars = []string{"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"}

// Config is what the environment asks the plugin to do.
type Config struct {
	Dir        string // where the traces go
	Proxy      bool   // record proxy steps
	Kernel     bool   // record kernel channel start and end (GPU times)
	MaxEvents  int
	GlobalRank int32  // -1 when no launcher variable names it
	RankVar    string // the variable GlobalRank came from
	Job        string
	Host       string
	PID        int
	NCCLEnv    map[string]string // NCCL_* settings of the process (NCCL_VERSION excluded)
}

// LoadConfig reads the configuration from environ (os.Environ's form) and
// checks that the output directory exists or can be made, and takes files.
// Errors name the variable.
func LoadConfig(environ []string, host string, pid int) (Config, error) {
	env := map[string]string{}
	c := Config{Kernel: true, MaxEvents: DefaultMaxEvents, GlobalRank: -1, Host: host, PID: pid, NCCLEnv: map[string]string{}}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		env[k] = v
		if strings.HasPrefix(k, "NCCL_") && k != "NCCL_VERSION" {
			c.NCCLEnv[k] = v
		}
	}
	dir, ok := env[EnvDir]
	if !ok || strings.TrimSpace(dir) == "" {
		return c, fmt.Errorf("%s is not set: set it to the directory that receives one call trace per process", EnvDir)
	}
	if err := checkDir(dir); err != nil {
		return c, fmt.Errorf("%s=%q: %w", EnvDir, dir, err)
	}
	c.Dir = dir
	var err error
	if c.Proxy, err = boolVar(env, EnvProxy, false); err != nil {
		return c, err
	}
	if c.Kernel, err = boolVar(env, EnvKernel, true); err != nil {
		return c, err
	}
	if v, ok := env[EnvMaxEvents]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return c, fmt.Errorf("%s=%q: want a positive number of events", EnvMaxEvents, v)
		}
		c.MaxEvents = n
	}
	for _, k := range globalRankVars {
		v, ok := env[k]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		if err != nil || n < 0 {
			return c, fmt.Errorf("%s=%q: want the process's rank in its job (a number from 0)", k, v)
		}
		c.GlobalRank, c.RankVar = int32(n), k
		break
	}
	c.Job = env[EnvJob]
	for _, k := range jobVars {
		if c.Job != "" {
			break
		}
		c.Job = env[k]
	}
	return c, nil
}

func boolVar(env map[string]string, name string, def bool) (bool, error) {
	v, ok := env[name]
	if !ok || v == "" {
		return def, nil
	}
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return def, fmt.Errorf("%s=%q: want 1 or 0", name, v)
}

// checkDir makes dir if it is missing and checks that a file can be
// created in it (and removes that file).
func checkDir(dir string) error {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return errors.New("not a directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".twinccl-profiler-probe*")
	if err != nil {
		return fmt.Errorf("cannot create files there: %w", err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// BaseName is the name of the process's files without extension:
// "rank<R>-<host>-<pid>" where the launcher gives the rank, else
// "<host>-<pid>".
func (c Config) BaseName() string {
	host := strings.Map(func(r rune) rune {
		if r == '/' || r == 0 {
			return '_'
		}
		return r
	}, c.Host)
	if c.GlobalRank >= 0 {
		return fmt.Sprintf("rank%05d-%s-%d", c.GlobalRank, host, c.PID)
	}
	return fmt.Sprintf("%s-%d", host, c.PID)
}

// CallPath is the call trace of the process. Its name ends in a digit
// (the pid), so that DIR/*[0-9].parquet names the call traces only.
func (c Config) CallPath() string { return filepath.Join(c.Dir, c.BaseName()+".parquet") }

// EventPath is the proxy-step event trace of the process (Proxy only),
// beside the call trace as "replay trace merge" looks for it.
func (c Config) EventPath() string { return filepath.Join(c.Dir, c.BaseName()+".events.parquet") }

// Mask is the activation mask the plugin gives NCCL: the calls (and their
// API events, which carry the stream and the enqueue time), kernel channels
// unless disabled, proxy operations and steps when asked.
func (c Config) Mask() int {
	m := TypeColl | TypeP2p | TypeCollApi | TypeP2pApi
	if c.Kernel {
		m |= TypeKernelCh
	}
	if c.Proxy {
		m |= TypeProxyOp | TypeProxyStep
	}
	return m
}
