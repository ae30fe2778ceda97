package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/internal/progress"
)

// envVerbose passes the launcher's -v to its ranks.
const envVerbose = "TWINCCL_BENCH_VERBOSE"

// rankState is what the launcher learnt of one rank.
type rankState struct {
	exit    error  // the process's exit (nil: status 0)
	hasCtl  bool   // the rank reported its error on a control line
	code    int    // that error's exit status
	lost    bool   // that error is the loss of a peer
	msg     string // that error
	last    string // the rank's last plain stderr line
	killed  bool   // the launcher killed it
	exitSeq int    // order of exit
}

// launchRanks starts np copies of this binary running `run sub args` as
// the ranks of a job on this host and waits for them. Rank 0's stdout is
// the command's; every other output line goes to stderr prefixed with its
// rank. Once a rank fails, ranks still running failGrace later (a rank
// that is stopped or hung: the others name it within the heartbeat
// timeout) are killed; a failed job returns one error naming the rank
// that failed first (the others' errors, mostly lost peers, are printed
// with -v). SIGINT and SIGTERM are passed on to the ranks, which are
// killed if they outlive killGrace; the ranks die with the launcher
// (Pdeathsig) and sit in their own process groups, so that a terminal's
// interrupt reaches them only through the launcher. The job's unique id,
// secret included, reaches the ranks only through their environment,
// which only this user can read.
// With showProgress, or when stderr is a terminal, rank 0's progress
// through the sweep is drawn on stderr. extraEnv is added to the ranks'
// environment. With trace set, the ranks write their parts beside it and
// they are merged into it when the job succeeded.
func launchRanks(e *env, sub string, np int, timeout time.Duration, trace string, showProgress bool, args []string, extraEnv ...string) (err error) {
	if trace != "" {
		// The ranks write their parts beside the trace; the launcher merges them.
		env, finish, terr := traceParts(trace, np)
		if terr != nil {
			return terr
		}
		extraEnv = append(extraEnv, env)
		defer func() { err = finish(err) }()
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	bar := progress.New(e.stderr, showProgress)
	defer bar.Done()
	if bar != nil {
		extraEnv = append(extraEnv, envProgress+"=1")
	}
	if e.verbose {
		extraEnv = append(extraEnv, envVerbose+"=1")
	}
	hb, err := bootstrap.HeartbeatTimeoutFromEnv()
	if err != nil {
		return &usageError{err.Error()}
	}
	failGrace := 2*hb + 2*time.Second
	root, err := bootstrap.StartRoot("127.0.0.1", bootstrap.RandomMagic(), np, timeout, e.log)
	if err != nil {
		return fmt.Errorf("launch: bootstrap root: %w", err)
	}
	defer root.Close()
	// Pdeathsig fires when the thread that started the child ends: keep
	// this goroutine on one thread until every rank is reaped.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	cmds := make([]*exec.Cmd, 0, np)
	states := make([]rankState, np)
	var outWG sync.WaitGroup
	var mu sync.Mutex // states
	var pipes []*io.PipeWriter
	closePipes := func() {
		for _, pw := range pipes {
			pw.Close()
		}
		pipes = nil
		outWG.Wait()
	}
	defer closePipes()
	for r := 0; r < np; r++ {
		c := exec.Command(self, append([]string{sub}, args...)...)
		c.Env = append(os.Environ(), envUID+"="+root.ID().String(), fmt.Sprint(envRank, "=", r), fmt.Sprint(envNRanks, "=", np),
			fmt.Sprint(envLocalRank, "=", r))
		c.Env = append(c.Env, extraEnv...)
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		pr, pw := io.Pipe()
		pipes = append(pipes, pw)
		c.Stderr = pw
		if r == 0 {
			// Rank 0's stdout (the table) goes through the bar, which
			// clears itself around it.
			spr, spw := io.Pipe()
			pipes = append(pipes, spw)
			c.Stdout = spw
			outWG.Add(1)
			go func() {
				defer outWG.Done()
				br := bufio.NewReader(spr)
				for {
					s, err := br.ReadString('\n')
					if s != "" {
						bar.Print(e.stdout, s)
					}
					if err != nil {
						break
					}
				}
				io.Copy(io.Discard, spr)
			}()
		} else {
			c.Stdout = pw
		}
		outWG.Add(1)
		go func() {
			defer outWG.Done()
			sc := bufio.NewScanner(pr)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				if ctl, ok := strings.CutPrefix(line, ctlPrefix); ok {
					kind, rest, _ := strings.Cut(ctl, " ")
					switch kind {
					case "progress":
						if d, t, label, ok := parseProgress(rest); ok && r == 0 {
							bar.Update(d, t, label)
						}
					case "error":
						f := strings.SplitN(rest, " ", 3)
						if len(f) == 3 {
							code, _ := strconv.Atoi(f[0])
							mu.Lock()
							states[r].hasCtl, states[r].code, states[r].lost, states[r].msg = true, code, f[1] == "1", f[2]
							mu.Unlock()
						}
					}
					continue
				}
				mu.Lock()
				states[r].last = line
				mu.Unlock()
				bar.Print(e.stderr, fmt.Sprintf("[rank %d] %s\n", r, line))
			}
			io.Copy(io.Discard, pr)
		}()
		if err := c.Start(); err != nil {
			for _, s := range cmds {
				s.Process.Kill()
				s.Wait()
			}
			return fmt.Errorf("launch rank %d: %w", r, err)
		}
		cmds = append(cmds, c)
	}
	type exit struct {
		rank int
		err  error
	}
	exits := make(chan exit, len(cmds))
	for r, c := range cmds {
		go func() { exits <- exit{r, c.Wait()} }()
	}
	var kill <-chan time.Time
	done := make([]bool, len(cmds))
	failed := false
	var interrupted os.Signal
	for left, seq := len(cmds), 0; left > 0; seq++ {
		select {
		case sig := <-sigs:
			interrupted = sig
			bar.Print(e.stderr, fmt.Sprintf("run %s: %v: stopping the ranks\n", sub, sig))
			for r, c := range cmds {
				if !done[r] {
					_ = c.Process.Signal(sig)
				}
			}
			kill = time.After(killGrace)
			seq--
		case x := <-exits:
			left--
			done[x.rank] = true
			mu.Lock()
			states[x.rank].exit, states[x.rank].exitSeq = x.err, seq
			mu.Unlock()
			if x.err != nil {
				failed = true
				if kill == nil {
					kill = time.After(failGrace)
				}
			}
		case <-kill:
			for r, c := range cmds {
				if !done[r] {
					if interrupted != nil {
						bar.Print(e.stderr, fmt.Sprintf("run %s: rank %d still running %v after %v; killing it\n", sub, r, killGrace, interrupted))
					} else {
						bar.Print(e.stderr, fmt.Sprintf("run %s: rank %d still running %v after a rank failed; killing it\n", sub, r, failGrace))
					}
					mu.Lock()
					states[r].killed = true
					mu.Unlock()
					c.Process.Kill()
				}
			}
			kill = nil
		}
	}
	closePipes()
	bar.Done()
	if interrupted != nil {
		return fmt.Errorf("interrupted by %v: every rank stopped", interrupted)
	}
	if !failed {
		return nil
	}
	return summarizeFailure(e, states)
}

// lostName and lostWhy read a rank's lost-peer error: the rank it names,
// and the cause after "peer lost: ".
var (
	lostName = regexp.MustCompile(`rank (\d+) lost`)
	lostWhy  = regexp.MustCompile(`peer lost: (.*)$`)
)

// commonLost is the rank that every failed rank reporting a lost peer
// names, and those ranks; -1 when they disagree or none reports one.
func commonLost(states []rankState, failed []int) (int, []string) {
	named := -1
	var by []string
	for _, r := range failed {
		s := states[r]
		if !s.hasCtl || !s.lost {
			continue
		}
		m := lostName.FindStringSubmatch(s.msg)
		if m == nil {
			return -1, nil
		}
		x, _ := strconv.Atoi(m[1])
		if named >= 0 && x != named || x == r {
			return -1, nil
		}
		named = x
		by = append(by, strconv.Itoa(r))
	}
	if named < 0 || named >= len(states) {
		return -1, nil
	}
	return named, by
}

// killGrace is how long ranks may take to exit after the launcher passed
// them SIGINT or SIGTERM.
const killGrace = 5 * time.Second

// rankPrefix matches an error's own "rank N: " prefix.
var rankPrefix = regexp.MustCompile(`^(run \w+: )?rank (\d+): `)

// summarizeFailure turns the failed ranks into one error naming the rank
// that failed first: a rank whose error is not a lost peer (the first to
// exit), else one that died without saying why, else the first to exit.
// With -v every failed rank's error is printed first.
func summarizeFailure(e *env, states []rankState) error {
	var failed []int
	for r, s := range states {
		if s.exit != nil {
			failed = append(failed, r)
		}
	}
	sort.SliceStable(failed, func(i, j int) bool { return states[failed[i]].exitSeq < states[failed[j]].exitSeq })
	if e.verbose {
		for r := range states {
			if states[r].exit == nil {
				continue
			}
			s := states[r]
			what := s.msg
			if !s.hasCtl {
				what = fmt.Sprintf("%v (no error message; last line: %q)", s.exit, s.last)
			}
			fmt.Fprintf(e.stderr, "[rank %d] error: %s\n", r, what)
		}
	}
	pick := -1
	for _, r := range failed { // a rank's own failure
		if s := states[r]; s.hasCtl && !s.lost {
			pick = r
			break
		}
	}
	if pick < 0 {
		for _, r := range failed { // a rank that died silently
			if s := states[r]; !s.hasCtl && !s.killed {
				pick = r
				break
			}
		}
	}
	var namedBy []string
	named := -1
	if pick < 0 { // the rank every lost-peer report names (a hung rank, killed)
		named, namedBy = commonLost(states, failed)
		if named >= 0 {
			pick = named
		}
	}
	if pick < 0 {
		pick = failed[0]
	}
	s := states[pick]
	var msg string
	if named >= 0 {
		why := "it stopped answering"
		for _, r := range failed { // a survivor's own evidence first
			if m := lostWhy.FindStringSubmatch(states[r].msg); m != nil && (why == "it stopped answering" || strings.Contains(m[1], bootstrap.ErrNoHeartbeat.Error())) {
				why = m[1]
			}
		}
		msg = fmt.Sprintf("rank %d was lost: %s (ranks %s named it)", named, why, strings.Join(namedBy, ", "))
		if s.killed {
			msg += "; the launcher killed it"
		}
	} else if s.hasCtl {
		m := s.msg
		if g := rankPrefix.FindStringSubmatch(m); g != nil && g[2] == strconv.Itoa(pick) {
			m = m[len(g[0]):]
		}
		msg = fmt.Sprintf("rank %d failed: %s", pick, m)
	} else {
		msg = fmt.Sprintf("rank %d exited (%v) without an error message", pick, s.exit)
		if s.last != "" {
			msg += fmt.Sprintf("; its last line: %s", s.last)
		}
	}
	var others []string
	lost := true
	sort.Ints(failed)
	for _, r := range failed {
		if r != pick && named < 0 {
			others = append(others, strconv.Itoa(r))
			lost = lost && (states[r].lost || states[r].killed)
		}
	}
	if len(others) > 0 {
		word := "rank"
		if len(others) > 1 {
			word = "ranks"
		}
		msg += fmt.Sprintf(" (%s %s failed too", word, strings.Join(others, ", "))
		if lost {
			msg += ", having lost a peer"
		}
		if !e.verbose {
			msg += "; -v shows every rank's error"
		}
		msg += ")"
	}
	if s.hasCtl && s.code == 2 {
		return &usageError{msg}
	}
	return errors.New(msg)
}
