package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
)

// launchRanks starts np copies of this binary running `run sub args` as
// the ranks of a job on this host and waits for them: rank 0's stdout is
// the command's, every other output line goes to stderr prefixed with its
// rank; once a rank fails, ranks still running timeout+10 s later are
// killed. extraEnv is added to the ranks' environment. With trace set, the ranks write their parts beside it and they
// are merged into it when the job succeeded.
func launchRanks(e *env, sub string, np int, timeout time.Duration, trace string, args []string, extraEnv ...string) (err error) {
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
	root, err := bootstrap.StartRoot("127.0.0.1", bootstrap.RandomMagic(), np, timeout, e.log)
	if err != nil {
		return fmt.Errorf("launch: bootstrap root: %w", err)
	}
	defer root.Close()
	cmds := make([]*exec.Cmd, 0, np)
	var outWG sync.WaitGroup
	var mu sync.Mutex
	var pipes []*io.PipeWriter
	defer func() {
		for _, pw := range pipes {
			pw.Close()
		}
		outWG.Wait()
	}()
	for r := 0; r < np; r++ {
		c := exec.Command(self, append([]string{sub}, args...)...)
		c.Env = append(os.Environ(), envUID+"="+root.ID().String(), fmt.Sprint(envRank, "=", r), fmt.Sprint(envNRanks, "=", np),
			fmt.Sprint(envLocalRank, "=", r))
		c.Env = append(c.Env, extraEnv...)
		pr, pw := io.Pipe()
		pipes = append(pipes, pw)
		c.Stderr = pw
		if r == 0 {
			c.Stdout = e.stdout
		} else {
			c.Stdout = pw
		}
		outWG.Add(1)
		go func() {
			defer outWG.Done()
			sc := bufio.NewScanner(pr)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				mu.Lock()
				fmt.Fprintf(e.stderr, "[rank %d] %s\n", r, sc.Text())
				mu.Unlock()
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
	var errs []error
	var kill <-chan time.Time
	done := make([]bool, len(cmds))
	for left := len(cmds); left > 0; {
		select {
		case x := <-exits:
			left--
			done[x.rank] = true
			if x.err != nil {
				errs = append(errs, fmt.Errorf("rank %d: %w", x.rank, x.err))
				if kill == nil {
					kill = time.After(timeout + 10*time.Second)
				}
			}
		case <-kill:
			for r, c := range cmds {
				if !done[r] {
					fmt.Fprintf(e.stderr, "run %s: rank %d still running %v after a rank failed; killing it\n", sub, r, timeout+10*time.Second)
					c.Process.Kill()
				}
			}
			kill = nil
		}
	}
	return errors.Join(errs...)
}
