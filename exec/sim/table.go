package sim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// Harness names: how a table's calls were timed. The harness's own cost
// per call (HarnessUs in the calibration) is added to every simulated row
// of a table measured with it.
const (
	// HarnessNCCLTests is nccl-tests (or anything as lean): no extra cost.
	HarnessNCCLTests = "nccl-tests"
	// HarnessPyTorch is PyTorch's collectives captured in CUDA graphs
	// (testdata/nccl-timings/record.py): the graph's kernel nodes carry
	// PyTorch's bookkeeping around every NCCL kernel.
	HarnessPyTorch = "pytorch"
	// HarnessRunGPU is NCCL's column of "run gpu --json" recordings
	// (cmd/run, testdata/hw): its CUDA-graph loop around each call on the
	// device machine's libnccl (2.28.3 where the baseline tables ran
	// 2.28.9). Our executor's column of the same files keeps
	// HarnessNCCLTests: its calibration fits its own per-call costs.
	HarnessRunGPU = "run-gpu"
)

// HarnessBase is the harness a harness name measures with: the name
// without its machine ("pytorch@h100" is PyTorch's harness on a machine
// whose cost per call differs from the calibration's own machine; see
// Calib.HarnessCostUs).
func HarnessBase(h string) string {
	base, _, _ := strings.Cut(h, "@")
	return base
}

// checkHarness checks a harness name: one of the three, optionally with
// "@MACHINE" (letters, digits, '-', '.' and '_').
func checkHarness(h string) error {
	base, machine, tagged := strings.Cut(h, "@")
	if base != HarnessNCCLTests && base != HarnessPyTorch && base != HarnessRunGPU {
		return fmt.Errorf("harness %q (want %s, %s or %s, optionally with @MACHINE)", h, HarnessNCCLTests, HarnessPyTorch, HarnessRunGPU)
	}
	if tagged && (machine == "" || strings.TrimFunc(machine, func(r rune) bool {
		return r == '-' || r == '.' || r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')
	}) != "") {
		return fmt.Errorf("harness %q: the machine after '@' must be letters, digits, '-', '.' or '_'", h)
	}
	return nil
}

// Table is a measured timing table and the settings it was recorded
// under: the NCCL_* environment (which decides transports, protocols and
// channels through the search and the tuner) and the timing harness.
type Table struct {
	// Name is the file's base name.
	Name string
	// Env holds the NCCL_* settings of the run ("settings:" header line,
	// then overrides).
	Env map[string]string
	// Harness is HarnessNCCLTests, HarnessPyTorch or HarnessRunGPU,
	// optionally with "@MACHINE" (HarnessBase).
	Harness string
	// Topo is the topology file the table was measured on ("topo=" in
	// the table argument; "": the caller's default topology).
	Topo string
	// Eager says the rows are the eager loops' times (timing=eager in the
	// table argument: the eager_us column), simulated with the host
	// issuing every call (Simulator.Eager).
	Eager bool
	// Kernel names the interpreter build that timed an "ours" recording
	// (hwcmp.Input.Kernel); "" for NCCL's and for files that do not say.
	Kernel string
	// Host is what the recording host's loopback probes measured (its
	// net_probe; zero: not probed), for Calib.ForHost.
	Host HostProbe
	Rows []Measurement
}

// settingsRE finds "settings: K=V K=V ..." in a header comment.
var settingsRE = regexp.MustCompile(`settings:\s*(.*)$`)

// ReadTable reads a timing table (see ReadMeasurements) and its settings
// from its '#' header: a line with "settings: K=V ..." gives the
// environment, a header naming PyTorch the harness (else nccl-tests).
func ReadTable(r io.Reader, name string) (*Table, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	ms, err := ReadMeasurements(bytes.NewReader(data), name)
	if err != nil {
		return nil, err
	}
	t := &Table{Name: filepath.Base(name), Env: map[string]string{}, Harness: HarnessNCCLTests, Rows: ms}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "#") {
			continue
		}
		if strings.Contains(line, "PyTorch") {
			t.Harness = HarnessPyTorch
		}
		if m := settingsRE.FindStringSubmatch(line); m != nil {
			for _, f := range strings.Fields(m[1]) {
				k, v, ok := strings.Cut(f, "=")
				if !ok || k == "" {
					return nil, fmt.Errorf("%s: settings: %q is not KEY=VALUE", name, f)
				}
				if !KnownEnv(k) {
					return nil, fmt.Errorf("%s: settings: unknown setting %q; known: %s", name, k, strings.Join(KnownEnvNames(), ", "))
				}
				t.Env[k] = v
			}
		}
	}
	return t, nil
}

// ReadTableFile reads a timing table and its settings from disk.
func ReadTableFile(path string) (*Table, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadTable(f, path)
}

// ParseTableSpec reads a table argument "FILE[,KEY=VALUE...]": the table
// at FILE with its header's settings, overridden by the KEY=VALUE pairs
// (NCCL_* variables, harness=nccl-tests|pytorch|run-gpu,
// timing=graph|eager), restricted to some collectives by colls=C1+C2...
// (nccl-tests or model names) and to the sizes of at least minbytes=SIZE
// and at most maxbytes=SIZE (K, M, G suffixes). A restricted table is
// named FILE[C1+C2...][>=SIZE][<=SIZE].
func ParseTableSpec(spec string) (*Table, error) {
	parts := strings.Split(spec, ",")
	t, err := ReadTableFile(parts[0])
	if err != nil {
		return nil, err
	}
	if err := t.ApplySpec(parts[1:]); err != nil {
		return nil, fmt.Errorf("table %s: %w", parts[0], err)
	}
	return t, nil
}

// ApplySpec applies the KEY=VALUE words of a table argument (see
// ParseTableSpec) to t: NCCL_* settings, harness=, timing=, colls=,
// minbytes=, maxbytes=, topo=.
func (t *Table) ApplySpec(kvs []string) error {
	for _, p := range kvs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return fmt.Errorf("setting %q is not KEY=VALUE", p)
		}
		if k == "colls" {
			keep := map[model.Collective]bool{}
			for _, n := range strings.Split(v, "+") {
				c, err := model.ParseCollective(n)
				if err != nil {
					return fmt.Errorf("colls: %w", err)
				}
				keep[c] = true
			}
			if err := t.keep(func(m *Measurement) bool { return keep[m.Coll] }, v, "no rows of "+v); err != nil {
				return err
			}
			continue
		}
		if k == "minbytes" || k == "maxbytes" {
			b, err := model.ParseSize(v)
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			in, label, none := func(m *Measurement) bool { return m.Bytes >= b }, ">="+v, " bytes or more"
			if k == "maxbytes" {
				in, label, none = func(m *Measurement) bool { return m.Bytes <= b }, "<="+v, " bytes or less"
			}
			if err := t.keep(in, label, "no rows of "+v+none); err != nil {
				return err
			}
			continue
		}
		if k == "topo" {
			t.Topo = v
			continue
		}
		if k == "timing" {
			if err := t.timing(v); err != nil {
				return err
			}
			continue
		}
		if k == "harness" {
			if err := checkHarness(v); err != nil {
				return err
			}
			t.Harness = v
			continue
		}
		if !KnownEnv(k) {
			return fmt.Errorf("unknown key %q in %q; known keys: %s (col= only for hardware recordings), and the NCCL_* settings %s",
				k, p, strings.Join(tableSpecKeys, ", "), strings.Join(KnownEnvNames(), ", "))
		}
		if t.Env == nil {
			t.Env = map[string]string{}
		}
		t.Env[k] = v
	}
	return nil
}

// tableSpecKeys are the keys of a table argument that are not NCCL_*
// settings (ApplySpec).
var tableSpecKeys = []string{"colls", "harness", "maxbytes", "minbytes", "timing", "topo"}

// tableRecordedOnly are NCCL_* settings that recordings carry and that
// change nothing the search, tuner or simulator follow (where NCCL wrote
// its logs and dumps, which network plugin ran, the host identity): a
// table may give them.
var tableRecordedOnly = []string{
	"NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS", "NCCL_GRAPH_DUMP_FILE",
	"NCCL_HOSTID", "NCCL_IB_DISABLE", "NCCL_NET", "NCCL_TOPO_DUMP_FILE",
}

// KnownEnvNames returns, sorted, the NCCL_* settings a table (its
// "settings:" header or its argument's KEY=VALUE words) or a replay may
// give: those the model, the search, the tuner and the simulator read,
// and tableRecordedOnly. Any other key is an error naming it, so that a
// misspelt setting is not silently dropped.
func KnownEnvNames() []string {
	var names []string
	for _, l := range [][]string{model.ParamEnvNames, search.SearchEnvNames, search.ConnectEnvNames, search.TuneEnvNames, tableRecordedOnly,
		{"NCCL_BUFFSIZE", "NCCL_SOCKET_IFNAME"}} {
		names = append(names, l...)
	}
	for _, u := range unmodelled {
		names = append(names, u.key)
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// KnownEnv reports whether k is one of KnownEnvNames.
func KnownEnv(k string) bool {
	_, found := slices.BinarySearch(KnownEnvNames(), k)
	return found
}

// keep restricts the table to the rows in, naming it after the
// restriction (Name[label]); none left is the error none.
func (t *Table) keep(in func(*Measurement) bool, label, none string) error {
	var rows []Measurement
	for i := range t.Rows {
		if in(&t.Rows[i]) {
			rows = append(rows, t.Rows[i])
		}
	}
	if len(rows) == 0 {
		return errors.New(none)
	}
	t.Rows = rows
	t.Name += "[" + label + "]"
	return nil
}

// timing selects the column of the rows: "graph" (the graph-timed mean,
// the default) or "eager" (the eager loops' times, which every row must
// have).
func (t *Table) timing(v string) error {
	switch v {
	case "graph":
		if t.Eager {
			return fmt.Errorf("timing=graph after timing=eager")
		}
		return nil
	case "eager":
	default:
		return fmt.Errorf("timing %q (want graph or eager)", v)
	}
	if t.Eager {
		return nil
	}
	for i := range t.Rows {
		m := &t.Rows[i]
		if !(m.EagerUs > 0) {
			return fmt.Errorf("timing=eager: line %d has no eager time (fifth column)", m.Line)
		}
		m.MeanUs, m.BestUs = m.EagerUs, 0
	}
	t.Eager = true
	t.Name += "[eager]"
	return nil
}

// Lookup reads the table's environment (an os.LookupEnv for the model's
// and the search's option readers).
func (t *Table) Lookup(name string) (string, bool) {
	v, ok := t.Env[name]
	return v, ok
}

// Settings returns the environment as sorted "K=V" words, less
// NCCL_TOPO_DUMP_FILE: where the recording's run wrote its topology, which
// changes none of NCCL's decisions (record.sh sets it on the device).
func (t *Table) Settings() string {
	keys := make([]string, 0, len(t.Env))
	for k := range t.Env {
		if k != "NCCL_TOPO_DUMP_FILE" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + t.Env[k])
	}
	return b.String()
}

// Describe fills in what a fit report says of the table it reports on:
// t's settings and kernel.
func (t *Table) Describe(tf TableFit) TableFit {
	tf.Settings, tf.Kernel = t.Settings(), t.Kernel
	return tf
}

// SearchTable loads a topology (root, read from file) with the table's
// settings and runs NCCL's search and tuner under them, as the measured
// run did.
func SearchTable(root *model.Element, file string, nodes int, t *Table) (*search.Result, error) {
	if _, err := SettingsFromEnv(t.Lookup); err != nil {
		return nil, fmt.Errorf("table %s: %w", t.Name, err)
	}
	params, err := model.ParamsFromEnv(t.Lookup)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.Name, err)
	}
	opts, err := search.OptionsFromEnv(t.Lookup)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.Name, err)
	}
	cl, err := model.LoadCluster(root, file, model.LoadOptions{Nodes: nodes, Params: params})
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.Name, err)
	}
	res, err := search.Run(cl, opts)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", t.Name, err)
	}
	return res, nil
}

// LoggedChoice is one call NCCL logged (NCCL_DEBUG_SUBSYS=TUNING): the
// collective, its count in bytes, and the algorithm, protocol and channel
// range it ran with.
type LoggedChoice struct {
	Coll      model.Collective
	Bytes     int64 // count times the element size, as NCCL prints it
	Algo      model.Algorithm
	Proto     model.Protocol
	NChannels int
	Line      int
}

// choiceRE matches NCCL's "AllReduce: 8 Bytes -> Algo RING proto LL
// channel{Lo..Hi}={0..0}" lines.
var choiceRE = regexp.MustCompile(`(\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}`)

// ReadLoggedChoices reads the per-call decisions of an NCCL INFO log.
func ReadLoggedChoices(r io.Reader, name string) ([]LoggedChoice, error) {
	var out []LoggedChoice
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	ln := 0
	for sc.Scan() {
		ln++
		m := choiceRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		c, err := model.ParseCollective(m[1])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, ln, err)
		}
		b, _ := strconv.ParseInt(m[2], 10, 64)
		a, err := model.ParseAlgorithm(m[3])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, ln, err)
		}
		p, err := model.ParseProtocol(m[4])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, ln, err)
		}
		lo, _ := strconv.Atoi(m[5])
		hi, _ := strconv.Atoi(m[6])
		out = append(out, LoggedChoice{Coll: c, Bytes: b, Algo: a, Proto: p, NChannels: hi - lo + 1, Line: ln})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}
