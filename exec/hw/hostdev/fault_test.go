package hostdev

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
)

const childEnv = "TWINCCL_HOSTDEV_TEST_CHILD"

// childMain is a rank process of TestKilledRank: it joins the job and runs
// AllReduce until it fails, printing "running" once the first call ended.
func childMain() int {
	rank, _ := strconv.Atoi(os.Getenv("TEST_RANK"))
	n, _ := strconv.Atoi(os.Getenv("TEST_NRANKS"))
	id, err := bootstrap.ParseUniqueID(os.Getenv("TEST_UID"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	r, err := Join(RankConfig{Boot: bootstrap.Config{Rank: rank, NRanks: n, ID: id, Host: "127.0.0.1", Timeout: 3 * time.Second},
		HostID: os.Getenv("TEST_HOST")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: n, NChannels: 2, Count: 1 << 20}
	p, _ := c.Program()
	in := conformance.Inputs(c, p)[rank]
	out := make([]byte, p.OutCount*4)
	for i := 0; ; i++ {
		if _, err := r.Device.Run(p, in, out); err != nil {
			fmt.Fprintln(os.Stderr, "ERROR:", err)
			r.Abort()
			return 3
		}
		if i == 0 {
			fmt.Println("running")
		}
	}
}

func TestKilledRank(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	for _, mode := range []string{"shm", "net"} {
		t.Run(mode, func(t *testing.T) {
			checkLeaks(t)
			const n = 4
			root, err := bootstrap.StartRoot("127.0.0.1", bootstrap.RandomMagic(), n, 10*time.Second, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer root.Close()
			cmds := make([]*exec.Cmd, n)
			stderr := make([]*bytes.Buffer, n)
			running := make(chan int, n)
			var wg sync.WaitGroup
			for r := 0; r < n; r++ {
				host := "h"
				if mode == "net" {
					host = fmt.Sprint("h", r)
				}
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), childEnv+"=1", fmt.Sprint("TEST_RANK=", r), fmt.Sprint("TEST_NRANKS=", n),
					"TEST_UID="+root.ID().String(), "TEST_HOST="+host)
				stderr[r] = &bytes.Buffer{}
				cmd.Stderr = stderr[r]
				out, _ := cmd.StdoutPipe()
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds[r] = cmd
				wg.Add(1)
				go func() {
					defer wg.Done()
					sc := bufio.NewScanner(out)
					for sc.Scan() {
						if sc.Text() == "running" {
							running <- r
						}
					}
				}()
			}
			defer func() {
				for _, c := range cmds {
					c.Process.Kill()
				}
			}()
			for i := 0; i < n; i++ {
				select {
				case <-running:
				case <-time.After(20 * time.Second):
					t.Fatal("ranks did not start")
				}
			}
			time.Sleep(50 * time.Millisecond) // mid-collective
			if err := cmds[2].Process.Kill(); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for r, c := range cmds {
				done := make(chan error, 1)
				go func() { done <- c.Wait() }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("rank %d did not exit", r)
				}
				if r == 2 {
					continue
				}
				if c.ProcessState.ExitCode() != 3 || !strings.Contains(stderr[r].String(), "rank 2 lost") {
					t.Errorf("rank %d: exit %d, stderr %q", r, c.ProcessState.ExitCode(), stderr[r].String())
				}
			}
			wg.Wait()
			t.Logf("survivors exited %v after the kill; rank 0 said: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(stderr[0].String()))
		})
	}
}
