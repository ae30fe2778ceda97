package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// baselineBytes is the message size of `run bench --baseline`.
const baselineBytes = 64 << 20

// baselineResult is what `run bench --baseline` measured.
type baselineResult struct {
	memcpy, tcp         float64 // GB/s
	shmBus, sockBus     float64 // AllReduce busbw, GB/s
	shmRatio, sockRatio float64
}

// runBaseline is `run bench --baseline`: in one run it measures the
// machine's memcpy bandwidth, a 64 MiB AllReduce over shm, the bandwidth
// of a raw TCP loopback stream and a 64 MiB AllReduce over sockets (every
// rank on a host of its own), and prints busbw/memcpy and busbw/TCP.
func runBaseline(e *env, o benchOpts) (baselineResult, error) {
	var res baselineResult
	if o.np <= 0 {
		o.np = 4
	}
	res.memcpy = memcpyBW(baselineBytes, 300*time.Millisecond)
	tcp, err := tcpLoopbackBW(4<<20, 300*time.Millisecond)
	if err != nil {
		return res, fmt.Errorf("baseline: tcp loopback: %w", err)
	}
	res.tcp = tcp
	size := strconv.Itoa(baselineBytes)
	args := []string{"-np", strconv.Itoa(o.np), "--coll", "allreduce", "-b", size, "-e", size,
		"-n", strconv.Itoa(o.iters), "-m", strconv.Itoa(o.aggIters), "-w", strconv.Itoa(o.warmup), "-c", strconv.Itoa(o.check),
		"-d", ntTypeName(o.dtypes[0]), "--algo", o.algo, "--proto", o.proto, "--channels", strconv.Itoa(o.channels),
		"-T", o.timeout.String(), "--inplace=false"}
	for i, hostid := range []string{"", "split:1"} {
		var out bytes.Buffer
		sub := *e
		sub.stdout = &out
		if err := launchRanks(&sub, "bench", o.np, o.timeout, o.trace, false, args, envHostID+"="+hostid, "TWINCCL_TRANSPORT="); err != nil {
			return res, fmt.Errorf("baseline: allreduce (TWINCCL_HOSTID=%q): %w\n%s", hostid, err, out.String())
		}
		bus, err := lastBusBW(out.String())
		if err != nil {
			return res, fmt.Errorf("baseline: %w\n%s", err, out.String())
		}
		if i == 0 {
			res.shmBus = bus
		} else {
			res.sockBus = bus
		}
	}
	res.shmRatio, res.sockRatio = res.shmBus/res.memcpy, res.sockBus/res.tcp
	choice := "algorithm, protocol and channels from the tuner"
	if o.algo != "" || o.proto != "" || o.channels > 0 {
		choice = fmt.Sprintf("algo %q proto %q channels %d (empty, 0: the tuner's)", o.algo, o.proto, o.channels)
	}
	fmt.Fprintf(e.stdout, "# twinccl baseline: %d ranks, AllReduce %d B, %s, %s, %d iters\n",
		o.np, baselineBytes, ntTypeName(o.dtypes[0]), choice, o.iters)
	fmt.Fprintf(e.stdout, "%-28s %9.2f GB/s\n", "memcpy (1 thread)", res.memcpy)
	fmt.Fprintf(e.stdout, "%-28s %9.2f GB/s   ratio %.3f\n", "shm allreduce busbw", res.shmBus, res.shmRatio)
	fmt.Fprintf(e.stdout, "%-28s %9.2f GB/s\n", "tcp loopback stream", res.tcp)
	fmt.Fprintf(e.stdout, "%-28s %9.2f GB/s   ratio %.3f\n", "socket allreduce busbw", res.sockBus, res.sockRatio)
	return res, nil
}

// envHostID is the variable hostID reads.
const envHostID = "TWINCCL_HOSTID"

// memcpyBW is the bandwidth of copy between two n-byte buffers (bytes
// copied per second, GB/s), the best of repeated copies over about d.
func memcpyBW(n int, d time.Duration) float64 {
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // fault the pages in
	best := 0.0
	for start := time.Now(); time.Since(start) < d; {
		t := time.Now()
		copy(dst, src)
		best = max(best, float64(n)/time.Since(t).Seconds()/1e9)
	}
	return best
}

// tcpLoopbackBW streams chunk-sized writes through one TCP loopback
// connection for about d and returns the receiver's rate in GB/s.
func tcpLoopbackBW(chunk int, d time.Duration) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	errc := make(chan error, 1)
	go func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		buf := make([]byte, chunk)
		_ = c.SetWriteDeadline(time.Now().Add(d + 5*time.Second))
		for start := time.Now(); time.Since(start) < d; {
			if _, err := c.Write(buf); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(d + 5*time.Second))
	buf := make([]byte, chunk)
	start := time.Now()
	total := 0
	for {
		k, err := c.Read(buf)
		total += k
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	el := time.Since(start)
	if err := <-errc; err != nil {
		return 0, err
	}
	return float64(total) / el.Seconds() / 1e9, nil
}

// benchCols is the number of columns of a bench table row (nccl-tests'
// table without twinccl's columns).
const benchCols = 13

// lastBusBW is the out-of-place busbw column of the last row of a bench
// table.
func lastBusBW(table string) (float64, error) {
	bus := -1.0
	for _, l := range strings.Split(table, "\n") {
		f := strings.Fields(l)
		if len(f) != benchCols || strings.HasPrefix(l, "#") {
			continue
		}
		if f[8] != "0" {
			return 0, fmt.Errorf("%s wrong elements: %s", f[8], l)
		}
		v, err := strconv.ParseFloat(f[7], 64)
		if err != nil {
			return 0, fmt.Errorf("bad busbw in %q", l)
		}
		bus = v
	}
	if bus < 0 {
		return 0, fmt.Errorf("no table row")
	}
	return bus, nil
}
