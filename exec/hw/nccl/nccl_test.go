package nccl

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twinccl/twinccl/exec/hw/cuda"
)

const childEnv = "TWINCCL_NCCL_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "" {
		os.Exit(m.Run())
	}
	if err := child(); err != nil {
		fmt.Fprintln(os.Stderr, "nccl child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func requireGPU() bool { return os.Getenv("TWINCCL_REQUIRE_GPU") == "1" }

func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if requireGPU() {
		t.Fatalf("TWINCCL_REQUIRE_GPU=1 but "+format, args...)
	}
	t.Skipf(format, args...)
}

// setup opens CUDA and NCCL and returns the number of devices.
func setup(t testing.TB) (*cuda.Driver, *Lib, int) {
	t.Helper()
	d, err := cuda.Open()
	if err != nil {
		skipOrFail(t, "no CUDA driver: %v", err)
	}
	n, err := d.DeviceCount()
	if err != nil || n == 0 {
		skipOrFail(t, "no CUDA device: %v", err)
	}
	l, err := Open()
	if err != nil {
		skipOrFail(t, "no libnccl: %v", err)
	}
	return d, l, n
}

func TestVersion(t *testing.T) {
	_, l, _ := setup(t)
	t.Logf("libnccl %s (%d) from %s", l.VersionString(), l.Version(), l.Path())
	if l.Version() < 21000 {
		t.Errorf("version %d", l.Version())
	}
	if !strings.HasPrefix(l.VersionString(), "2.") {
		t.Errorf("VersionString %q", l.VersionString())
	}
}

func TestDataTypeSize(t *testing.T) {
	for dt, size := range map[DataType]int{Int8: 1, Uint8: 1, Int32: 4, Uint32: 4, Int64: 8, Uint64: 8, Float16: 2, Float32: 4, Float64: 8, Bfloat16: 2, DataType(99): 0} {
		if dt.Size() != size {
			t.Errorf("%d: size %d, want %d", dt, dt.Size(), size)
		}
	}
	if !strings.Contains(InvalidArgument.Error(), "ncclInvalidArgument") {
		t.Errorf("Result text %q", InvalidArgument.Error())
	}
	e := error(&Error{Call: "ncclAllReduce", Code: RemoteError, Text: "remote process exited"})
	if !errors.Is(e, RemoteError) || !strings.Contains(e.Error(), "ncclAllReduce") {
		t.Errorf("Error: %v", e)
	}
}

// rankRun runs every collective as rank of nranks on device dev and checks
// the results. Values are small integers, exact in float32.
func rankRun(l *Lib, d *cuda.Driver, dev, rank, nranks int, id UniqueID) (err error) {
	device, err := d.Device(dev)
	if err != nil {
		return err
	}
	ctx, err := device.RetainPrimaryContext()
	if err != nil {
		return err
	}
	defer ctx.Release()
	s, err := ctx.NewStream(cuda.StreamNonBlocking)
	if err != nil {
		return err
	}
	defer s.Destroy()
	comm, err := l.CommInitRank(ctx, nranks, id, rank)
	if err != nil {
		return err
	}
	defer func() {
		if derr := comm.Destroy(); err == nil {
			err = derr
		}
	}()
	if r, err := comm.UserRank(); err != nil || r != rank {
		return fmt.Errorf("UserRank = %d, %v", r, err)
	}
	if n, err := comm.Count(); err != nil || n != nranks {
		return fmt.Errorf("Count = %d, %v", n, err)
	}
	if cd, err := comm.CuDevice(); err != nil || cd != dev {
		return fmt.Errorf("CuDevice = %d, %v", cd, err)
	}

	const count = 1 << 20
	alloc := func(elems int) (cuda.DevicePtr, error) { return ctx.MemAlloc(uint64(4 * elems)) }
	send, err := alloc(count * nranks)
	if err != nil {
		return err
	}
	defer ctx.MemFree(send)
	recv, err := alloc(count * nranks)
	if err != nil {
		return err
	}
	defer ctx.MemFree(recv)
	put := func(p cuda.DevicePtr, v []float32) error { return ctx.MemcpyHtoD(p, cuda.AsBytes(v)) }
	get := func(p cuda.DevicePtr, n int) ([]float32, error) {
		if err := s.Synchronize(); err != nil {
			return nil, err
		}
		v := make([]float32, n)
		return v, ctx.MemcpyDtoH(cuda.AsBytes(v), p)
	}
	val := func(r, i int) float32 { return float32(r+1) + float32(i%7) }
	buf := make([]float32, count*nranks)
	for i := range buf {
		buf[i] = val(rank, i)
	}
	if err := put(send, buf); err != nil {
		return err
	}
	check := func(op string, got []float32, want func(i int) float32) error {
		for i, v := range got {
			if w := want(i); v != w {
				return fmt.Errorf("rank %d %s: element %d = %v, want %v", rank, op, i, v, w)
			}
		}
		return nil
	}

	// AllReduce sum and max.
	if err := comm.AllReduce(send, recv, count, Float32, Sum, s); err != nil {
		return err
	}
	got, err := get(recv, count)
	if err != nil {
		return err
	}
	if err := check("AllReduce sum", got, func(i int) float32 {
		var w float32
		for r := 0; r < nranks; r++ {
			w += val(r, i)
		}
		return w
	}); err != nil {
		return err
	}
	if err := comm.AllReduce(send, recv, count, Float32, Max, s); err != nil {
		return err
	}
	if got, err = get(recv, count); err != nil {
		return err
	}
	if err := check("AllReduce max", got, func(i int) float32 { return val(nranks-1, i) }); err != nil {
		return err
	}
	// AllGather: block r holds rank r's first count elements.
	if err := comm.AllGather(send, recv, count, Float32, s); err != nil {
		return err
	}
	if got, err = get(recv, count*nranks); err != nil {
		return err
	}
	if err := check("AllGather", got, func(i int) float32 { return val(i/count, i%count) }); err != nil {
		return err
	}
	// ReduceScatter: block rank of the sum.
	if err := comm.ReduceScatter(send, recv, count, Float32, Sum, s); err != nil {
		return err
	}
	if got, err = get(recv, count); err != nil {
		return err
	}
	if err := check("ReduceScatter", got, func(i int) float32 {
		var w float32
		for r := 0; r < nranks; r++ {
			w += val(r, rank*count+i)
		}
		return w
	}); err != nil {
		return err
	}
	// Broadcast from the last rank.
	root := nranks - 1
	if err := comm.Broadcast(send, recv, count, Float32, root, s); err != nil {
		return err
	}
	if got, err = get(recv, count); err != nil {
		return err
	}
	if err := check("Broadcast", got, func(i int) float32 { return val(root, i) }); err != nil {
		return err
	}
	// Reduce (min) to rank 0.
	if err := ctx.MemsetD8(recv, 0, 4*count); err != nil {
		return err
	}
	if err := comm.Reduce(send, recv, count, Float32, Min, 0, s); err != nil {
		return err
	}
	if got, err = get(recv, count); err != nil {
		return err
	}
	if rank == 0 {
		if err := check("Reduce", got, func(i int) float32 { return val(0, i) }); err != nil {
			return err
		}
	}
	// Send/Recv around the ring, in a group.
	next, prev := (rank+1)%nranks, (rank+nranks-1)%nranks
	if err := l.Group(func() error {
		if err := comm.Send(send, count, Float32, next, s); err != nil {
			return err
		}
		return comm.Recv(recv, count, Float32, prev, s)
	}); err != nil {
		return err
	}
	if got, err = get(recv, count); err != nil {
		return err
	}
	if err := check("Send/Recv", got, func(i int) float32 { return val(prev, i) }); err != nil {
		return err
	}
	if err := comm.AsyncError(); err != nil {
		return err
	}
	return comm.Finalize()
}

func TestSingleRank(t *testing.T) {
	d, l, _ := setup(t)
	id, err := l.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	if err := rankRun(l, d, 0, 0, 1, id); err != nil {
		t.Fatal(err)
	}
}

// TestTwoProcesses runs rank 0 here on GPU 0 and rank 1 in a child process
// (this test binary run again) on GPU 1; the unique id goes through the
// child's stdin.
func TestTwoProcesses(t *testing.T) {
	d, l, n := setup(t)
	if n < 2 {
		t.Skip("needs 2 GPUs")
	}
	id, err := l.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(stdin, "%s\n", hex.EncodeToString(id[:]))
	stdin.Close()

	start := time.Now()
	rerr := rankRun(l, d, 0, 0, 2, id)
	werr := cmd.Wait()
	t.Logf("2 ranks on 2 GPUs in %v; child output: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(out.String()))
	if rerr != nil {
		t.Errorf("rank 0: %v", rerr)
	}
	if werr != nil {
		t.Errorf("rank 1 (child): %v", werr)
	}
}

func child() error {
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return err
	}
	raw, err := hex.DecodeString(strings.TrimSpace(line))
	if err != nil || len(raw) != len(UniqueID{}) {
		return fmt.Errorf("bad unique id %q", line)
	}
	var id UniqueID
	copy(id[:], raw)
	d, err := cuda.Open()
	if err != nil {
		return err
	}
	l, err := Open()
	if err != nil {
		return err
	}
	if err := rankRun(l, d, 1, 1, 2, id); err != nil {
		return err
	}
	fmt.Println("rank 1: all collectives correct")
	return nil
}
