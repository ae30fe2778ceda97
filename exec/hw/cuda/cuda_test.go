package cuda

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

const childEnv = "TWINCCL_CUDA_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "":
		os.Exit(m.Run())
	case "ipc":
		if err := ipcChild(); err != nil {
			fmt.Fprintln(os.Stderr, "ipc child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	default:
		fmt.Fprintln(os.Stderr, "unknown child mode", os.Getenv(childEnv))
		os.Exit(2)
	}
}

func requireGPU() bool { return os.Getenv("TWINCCL_REQUIRE_GPU") == "1" }

// skipOrFail skips the test when no GPU is required, and fails it when
// TWINCCL_REQUIRE_GPU=1.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if requireGPU() {
		t.Fatalf("TWINCCL_REQUIRE_GPU=1 but "+format, args...)
	}
	t.Skipf(format, args...)
}

func driver(t testing.TB) *Driver {
	t.Helper()
	d, err := Open()
	if err != nil {
		skipOrFail(t, "no CUDA driver: %v", err)
	}
	n, err := d.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		skipOrFail(t, "no CUDA device")
	}
	return d
}

func primary(t testing.TB, d *Driver, ordinal int) *Context {
	t.Helper()
	dev, err := d.Device(ordinal)
	if err != nil {
		t.Fatal(err)
	}
	c, err := dev.RetainPrimaryContext()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Release(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func ctx0(t testing.TB) *Context { return primary(t, driver(t), 0) }

func nvrtc(t testing.TB) *NVRTC {
	t.Helper()
	n, err := OpenNVRTC()
	if err != nil {
		skipOrFail(t, "no NVRTC: %v", err)
	}
	return n
}

func TestDevices(t *testing.T) {
	d := driver(t)
	n, _ := d.DeviceCount()
	t.Logf("driver CUDA version %d, ABI %d, %d device(s)", d.Version(), ABIVersion, n)
	for i := 0; i < n; i++ {
		dev, err := d.Device(i)
		if err != nil {
			t.Fatal(err)
		}
		name, err := dev.Name()
		if err != nil {
			t.Fatal(err)
		}
		bus, err := dev.PCIBusID()
		if err != nil {
			t.Fatal(err)
		}
		major, minor, err := dev.ComputeCapability()
		if err != nil {
			t.Fatal(err)
		}
		sms, err := dev.SMCount()
		if err != nil {
			t.Fatal(err)
		}
		mem, err := dev.TotalMem()
		if err != nil {
			t.Fatal(err)
		}
		optin, err := dev.Attribute(AttrMaxSharedMemoryPerBlockOptin)
		if err != nil {
			t.Fatal(err)
		}
		gdr, _ := dev.Attribute(AttrGPUDirectRDMASupported)
		vmm, _ := dev.Attribute(AttrVirtualMemoryManagementSupported)
		t.Logf("device %d: %s bus %s sm_%d%d %d SMs %.1f GiB smem optin %d gdr %d vmm %d",
			i, name, bus, major, minor, sms, float64(mem)/(1<<30), optin, gdr, vmm)
		if name == "" || !strings.Contains(bus, ":") || major < 3 || sms <= 0 || mem == 0 {
			t.Errorf("device %d: implausible properties", i)
		}
		for j := 0; j < n; j++ {
			peer, _ := d.Device(j)
			if ok, err := dev.CanAccessPeer(peer); err != nil {
				t.Error(err)
			} else if i != j {
				t.Logf("device %d can access peer %d: %v", i, j, ok)
			}
		}
	}
	if _, err := d.Device(n); err == nil {
		t.Error("Device(count) succeeded")
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func TestMemcpyRoundTrip(t *testing.T) {
	c := ctx0(t)
	const n = 3<<20 + 5
	a, err := c.MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer c.MemFree(a)
	b, err := c.MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer c.MemFree(b)

	src := pattern(n, 3)
	if err := c.MemcpyHtoD(a, src); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyDtoD(b, a, n); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := c.MemcpyDtoH(got, b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Fatal("sync round trip differs")
	}

	// Async, through pinned host memory, on a stream.
	s, err := c.NewStream(StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	hin, err := c.MemHostAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer hin.Free()
	hout, err := c.MemHostAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer hout.Free()
	if hin.DevicePtr() == 0 || hin.Size() != n {
		t.Fatalf("host memory: device pointer %#x size %d", hin.DevicePtr(), hin.Size())
	}
	copy(hin.Bytes(), pattern(n, 11))
	if err := c.MemcpyHtoDAsync(a, hin.Ptr(), n, s); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyDtoDAsync(b, a, n, s); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyDtoHAsync(hout.Ptr(), b, n, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if done, err := s.Query(); err != nil || !done {
		t.Errorf("Query after Synchronize: %v %v", done, err)
	}
	if !bytes.Equal(hout.Bytes(), hin.Bytes()) {
		t.Fatal("async round trip differs")
	}
	// The device reads mapped host memory directly.
	if err := c.MemcpyDtoD(b, hin.DevicePtr(), n); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyDtoH(got, b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, hin.Bytes()) {
		t.Fatal("copy from mapped host memory differs")
	}
	if err := hin.Free(); err != nil {
		t.Fatal(err)
	}
	if err := hin.Free(); err == nil {
		t.Error("double Free succeeded")
	}
}

func TestMemset(t *testing.T) {
	c := ctx0(t)
	const n = 1 << 20
	p, err := c.MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer c.MemFree(p)
	got := make([]byte, n)
	if err := c.MemsetD8(p, 0xA5, n); err != nil {
		t.Fatal(err)
	}
	if err := c.MemsetD8(p.Add(100), 0x3C, 50); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyDtoH(got, p); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		want := byte(0xA5)
		if i >= 100 && i < 150 {
			want = 0x3C
		}
		if v != want {
			t.Fatalf("byte %d = %#x, want %#x", i, v, want)
		}
	}
	s, err := c.NewStream(StreamDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	if err := c.MemsetD8Async(p, 0x11, n, s); err != nil {
		t.Fatal(err)
	}
	if err := c.MemsetD32Async(p.Add(4096), 0xDEADBEEF, 16, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyDtoH(got, p); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		want := byte(0x11)
		if i >= 4096 && i < 4096+64 {
			want = [4]byte{0xEF, 0xBE, 0xAD, 0xDE}[i%4]
		}
		if v != want {
			t.Fatalf("async: byte %d = %#x, want %#x", i, v, want)
		}
	}
	if err := c.MemsetD32(p, 7, n/4); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyDtoH(got[:8], p); err != nil {
		t.Fatal(err)
	}
	if binary.LittleEndian.Uint32(got) != 7 || binary.LittleEndian.Uint32(got[4:]) != 7 {
		t.Fatalf("MemsetD32: % x", got[:8])
	}
}

func TestHostRegister(t *testing.T) {
	c := ctx0(t)
	const n = 1 << 16
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	h, err := c.MemHostRegister(unsafePtr(mem), n)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	defer c.MemFree(p)
	want := pattern(n, 5)
	if err := c.MemcpyHtoD(p, want); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyDtoD(h.DevicePtr(), p, n); err != nil { // device writes mapped host memory
		t.Fatal(err)
	}
	if err := c.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem, want) {
		t.Fatal("registered memory differs")
	}
	if err := h.Free(); err != nil {
		t.Fatal(err)
	}
}

func TestAllocErrors(t *testing.T) {
	c := ctx0(t)
	_, err := c.MemAlloc(1 << 52)
	var ce *Error
	if !errors.As(err, &ce) || !errors.Is(err, ErrorOutOfMemory) {
		t.Fatalf("huge MemAlloc: %v", err)
	}
	if ce.Call != "cuMemAlloc" || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" || ce.Text == "" {
		t.Errorf("error fields: %+v", ce)
	}
	t.Logf("huge MemAlloc: %v", err)
}

func TestLeak(t *testing.T) {
	c := ctx0(t)
	// Warm up the allocator.
	p, err := c.MemAlloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	c.MemFree(p)
	before, total, err := c.MemGetInfo()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		p, err := c.MemAlloc(1<<20 + uint64(i)*4096)
		if err != nil {
			t.Fatalf("alloc %d: %v", i, err)
		}
		if err := c.MemFree(p); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ {
		h, err := c.MemHostAlloc(1 << 16)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Free(); err != nil {
			t.Fatal(err)
		}
	}
	after, _, err := c.MemGetInfo()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("free before %d after %d of %d bytes", before, after, total)
	if diff := int64(before) - int64(after); diff > 4<<20 {
		t.Errorf("%d bytes leaked over 1000 alloc/free", diff)
	}
}

const kernelSrc = `
__device__ unsigned int counter;

extern "C" __global__ void axpy(float* y, const float* x, float a, unsigned int n) {
	unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void add1(unsigned int* p, unsigned int n) {
	unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) p[i] += 1;
	if (i == 0) atomicAdd(&counter, 1);
}

extern "C" __global__ void spin(unsigned long long ns) {
	unsigned long long t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}

extern "C" __global__ void mixed(unsigned long long* out, char c, short s, int i, long long l, double d) {
	out[0] = (unsigned long long)(long long)c;
	out[1] = (unsigned long long)(long long)s;
	out[2] = (unsigned long long)(long long)i;
	out[3] = (unsigned long long)l;
	out[4] = (unsigned long long)(d * 1000.0);
}

extern "C" __global__ void bigshared(unsigned int* out, unsigned int words) {
	extern __shared__ unsigned int sm[];
	for (unsigned int i = threadIdx.x; i < words; i += blockDim.x) sm[i] = i;
	__syncthreads();
	if (threadIdx.x == 0) {
		unsigned int s = 0;
		for (unsigned int i = 0; i < words; i++) s += sm[i];
		out[0] = s;
	}
}
`

var kernelOpts = []string{"--std=c++17"}

// kernels compiles kernelSrc through the cache in a fresh directory and
// loads it.
func kernels(t *testing.T, c *Context) (*Module, *Image) {
	t.Helper()
	nvrtc(t)
	if os.Getenv("TWINCCL_CACHE_DIR") == "" {
		t.Setenv("TWINCCL_CACHE_DIR", t.TempDir())
	}
	arch, err := c.Device().Arch()
	if err != nil {
		t.Fatal(err)
	}
	img, err := Compile(kernelSrc, "test.cu", kernelOpts, arch)
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.LoadModule(img.Data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unload() })
	return m, img
}

func fn(t *testing.T, m *Module, name string) *Function {
	t.Helper()
	f, err := m.Function(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestKernelCompileLaunchAndCache(t *testing.T) {
	c := ctx0(t)
	n := nvrtc(t)
	major, minor := n.Version()
	t.Logf("NVRTC %d.%d from %s", major, minor, n.Path())
	t.Setenv("TWINCCL_CACHE_DIR", t.TempDir())
	m, img := kernels(t, c)
	t.Logf("compiled %s for arch %d: %d bytes, cached=%v", img.Kind, img.Arch, len(img.Data), img.Cached)
	if img.Cached {
		t.Error("first compile came from the cache")
	}

	const N = 100000
	x := make([]float32, N)
	y := make([]float32, N)
	for i := range x {
		x[i] = float32(i)
		y[i] = 1
	}
	dx, _ := c.MemAlloc(4 * N)
	dy, _ := c.MemAlloc(4 * N)
	defer c.MemFree(dx)
	defer c.MemFree(dy)
	if err := c.MemcpyHtoD(dx, AsBytes(x)); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyHtoD(dy, AsBytes(y)); err != nil {
		t.Fatal(err)
	}
	axpy := fn(t, m, "axpy")
	// x = 2x + x = 3x (y aliases x), then y = 0.5*x + y.
	if err := axpy.Launch(Dim3{X: (N + 255) / 256}, Dim3{X: 256}, 0, nil, dx, dx, float32(2), uint32(N)); err != nil {
		t.Fatal(err)
	}
	if err := axpy.Launch(Dim3{X: (N + 255) / 256}, Dim3{X: 256}, 0, nil, dy, dx, float32(0.5), uint32(N)); err != nil {
		t.Fatal(err)
	}
	if err := c.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyDtoH(AsBytes(y), dy); err != nil {
		t.Fatal(err)
	}
	for i := range y {
		want := 0.5*float32(3*i) + 1
		if math.Abs(float64(y[i]-want)) > 1e-3*math.Max(1, float64(want)) {
			t.Fatalf("y[%d] = %v, want %v", i, y[i], want)
		}
	}

	// Arguments of every size.
	out, _ := c.MemAlloc(5 * 8)
	defer c.MemFree(out)
	if err := fn(t, m, "mixed").Launch(Dim3{X: 1}, Dim3{X: 1}, 0, nil, out, int8(-3), int16(-300), int32(-70000), int64(-1)<<40, 2.5); err != nil {
		t.Fatal(err)
	}
	res := make([]int64, 5)
	if err := c.MemcpyDtoH(AsBytes(res), out); err != nil {
		t.Fatal(err)
	}
	if want := []int64{-3, -300, -70000, -1 << 40, 2500}; fmt.Sprint(res) != fmt.Sprint(want) {
		t.Errorf("mixed args: %v, want %v", res, want)
	}
	if err := fn(t, m, "mixed").Launch(Dim3{X: 1}, Dim3{X: 1}, 0, nil, out, 3); err == nil {
		t.Error("plain int argument accepted")
	}

	// A __device__ global.
	gp, gsize, err := m.Global("counter")
	if err != nil || gsize != 4 || gp == 0 {
		t.Fatalf("Global(counter) = %#x, %d, %v", gp, gsize, err)
	}

	// Large dynamic shared memory.
	big := fn(t, m, "bigshared")
	optin, _ := c.Device().Attribute(AttrMaxSharedMemoryPerBlockOptin)
	words := uint32(optin / 4)
	if err := big.SetMaxDynamicSharedMem(optin); err != nil {
		t.Fatal(err)
	}
	if v, err := big.Attribute(FuncMaxDynamicSharedSize); err != nil || v != optin {
		t.Errorf("max dynamic shared = %d, %v; want %d", v, err, optin)
	}
	if err := big.Launch(Dim3{X: 1}, Dim3{X: 256}, words*4, nil, out, words); err != nil {
		t.Fatal(err)
	}
	var sum [4]byte
	if err := c.MemcpyDtoH(sum[:], out); err != nil {
		t.Fatal(err)
	}
	if got, want := binary.LittleEndian.Uint32(sum[:]), words*(words-1)/2; got != want {
		t.Errorf("bigshared sum %d, want %d", got, want)
	}

	// Second compile: a cache hit.
	arch, _ := c.Device().Arch()
	img2, err := Compile(kernelSrc, "test.cu", kernelOpts, arch)
	if err != nil {
		t.Fatal(err)
	}
	if !img2.Cached || !bytes.Equal(img2.Data, img.Data) {
		t.Errorf("second compile: cached=%v same=%v", img2.Cached, bytes.Equal(img2.Data, img.Data))
	}
	// A corrupted entry is compiled again and replaced.
	path, err := CachePath(kernelSrc, kernelOpts, arch)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xFF
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	img3, err := Compile(kernelSrc, "test.cu", kernelOpts, arch)
	if err != nil {
		t.Fatal(err)
	}
	if img3.Cached {
		t.Error("corrupt entry was used")
	}
	if m3, err := c.LoadModule(img3.Data); err != nil {
		t.Error(err)
	} else {
		m3.Unload()
	}
	img4, err := Compile(kernelSrc, "test.cu", kernelOpts, arch)
	if err != nil || !img4.Cached {
		t.Errorf("after recompiling: cached=%v err=%v", img4 != nil && img4.Cached, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("cache dir holds %d files, want 1 (no temporary files left)", len(entries))
	}
}

func TestNVRTCErrors(t *testing.T) {
	n := nvrtc(t)
	_, err := n.CompileProgram("extern \"C\" __global__ void k() { undeclared_thing(); }", "bad.cu", nil, 90)
	var ne *NVRTCError
	if !errors.As(err, &ne) || !strings.Contains(ne.Log, "undeclared_thing") || ne.Call != "nvrtcCompileProgram" {
		t.Fatalf("compile error: %v", err)
	}
	t.Logf("compile error: %v", err)
	if _, err := n.CompileProgram("", "x.cu", []string{"--gpu-architecture=sm_90"}, 90); err == nil {
		t.Error("architecture option accepted")
	}
}

func TestPTXLoad(t *testing.T) {
	c := ctx0(t)
	n := nvrtc(t)
	arch, _ := c.Device().Arch()
	ptx, log, call, r := n.api.compile(kernelSrc, "ptx.cu", []string{fmt.Sprintf("--gpu-architecture=compute_%d", arch)}, false)
	if r != 0 {
		t.Fatalf("%s: %d %s", call, r, log)
	}
	ptx = bytes.TrimRight(ptx, "\x00")
	m, err := c.LoadModule(ptx) // LoadModule adds the NUL
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unload()
	p, _ := c.MemAlloc(4)
	defer c.MemFree(p)
	c.MemsetD32(p, 41, 1)
	if err := fn(t, m, "add1").Launch(Dim3{X: 1}, Dim3{X: 32}, 0, nil, p, uint32(1)); err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	if err := c.MemcpyDtoH(b[:], p); err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint32(b[:]); v != 42 {
		t.Errorf("PTX kernel result %d", v)
	}
	// A broken image reports the JIT log.
	_, err = c.LoadModule([]byte(".version 99.0\n.target sm_90\nbogus"))
	if err == nil {
		t.Error("bogus PTX loaded")
	} else {
		t.Logf("bogus PTX: %v", err)
	}
}

func TestEventTiming(t *testing.T) {
	c := ctx0(t)
	m, _ := kernels(t, c)
	s, err := c.NewStream(StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	start, err := c.NewEvent(EventDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer start.Destroy()
	end, err := c.NewEvent(EventBlockingSync)
	if err != nil {
		t.Fatal(err)
	}
	defer end.Destroy()
	sync, err := c.NewEvent(EventDisableTiming)
	if err != nil {
		t.Fatal(err)
	}
	defer sync.Destroy()
	if err := start.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := fn(t, m, "spin").Launch(Dim3{X: 1}, Dim3{X: 1}, 0, s, uint64(3_000_000)); err != nil {
		t.Fatal(err)
	}
	if err := end.Record(s); err != nil {
		t.Fatal(err)
	}
	if err := sync.Record(s); err != nil {
		t.Fatal(err)
	}
	if done, err := end.Query(); err != nil || done {
		t.Logf("end.Query right after a 3 ms kernel: %v %v", done, err)
	}
	if err := end.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := sync.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if done, err := sync.Query(); err != nil || !done {
		t.Errorf("sync.Query = %v %v", done, err)
	}
	d, err := ElapsedTime(start, end)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("3 ms spin kernel measured %v", d)
	if d < 2900*time.Microsecond || d > time.Second {
		t.Errorf("elapsed %v for a 3 ms kernel", d)
	}
	if _, err := ElapsedTime(start, sync); err == nil {
		t.Error("ElapsedTime with a timing-disabled event succeeded")
	}
	// A second stream waits on an event of the first.
	s2, err := c.NewStream(StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Destroy()
	if err := s2.WaitEvent(sync); err != nil {
		t.Fatal(err)
	}
	if err := s2.Synchronize(); err != nil {
		t.Fatal(err)
	}
}

func TestGraphCapture(t *testing.T) {
	for _, mode := range []CaptureMode{CaptureModeGlobal, CaptureModeThreadLocal} {
		t.Run(fmt.Sprint("mode", int(mode)), func(t *testing.T) {
			c := ctx0(t)
			m, _ := kernels(t, c)
			add1 := fn(t, m, "add1")
			const elems, launches, replays = 4096, 50, 3
			p, _ := c.MemAlloc(4 * elems)
			defer c.MemFree(p)
			if err := c.MemsetD32(p, 0, elems); err != nil {
				t.Fatal(err)
			}
			s, err := c.NewStream(StreamNonBlocking)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Destroy()
			args, err := NewKernelArgs(p, uint32(elems))
			if err != nil {
				t.Fatal(err)
			}

			unlock, err := c.LockThread()
			if err != nil {
				t.Fatal(err)
			}
			if err := s.BeginCapture(mode); err != nil {
				unlock()
				t.Fatal(err)
			}
			for i := 0; i < launches; i++ {
				if err := add1.LaunchArgs(Dim3{X: elems / 256}, Dim3{X: 256}, 0, s, args); err != nil {
					t.Fatal(err)
				}
			}
			g, err := s.EndCapture()
			unlock()
			if err != nil {
				t.Fatal(err)
			}
			defer g.Destroy()
			x, err := g.Instantiate(0)
			if err != nil {
				t.Fatal(err)
			}
			defer x.Destroy()

			got := make([]uint32, elems)
			if err := c.MemcpyDtoH(AsBytes(got), p); err != nil {
				t.Fatal(err)
			}
			if got[0] != 0 {
				t.Fatalf("capture executed the kernels: %d", got[0])
			}
			for r := 0; r < replays; r++ {
				if err := x.Launch(s); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			if err := c.MemcpyDtoH(AsBytes(got), p); err != nil {
				t.Fatal(err)
			}
			for i, v := range got {
				if v != launches*replays {
					t.Fatalf("element %d = %d, want %d", i, v, launches*replays)
				}
			}
		})
	}
}

func TestPeerAccess(t *testing.T) {
	d := driver(t)
	n, _ := d.DeviceCount()
	if n < 2 {
		t.Skip("needs 2 GPUs")
	}
	c0, c1 := primary(t, d, 0), primary(t, d, 1)
	if ok, _ := c0.Device().CanAccessPeer(c1.Device()); !ok {
		t.Skip("devices 0 and 1 are not peers")
	}
	for i := 0; i < 2; i++ { // the second time is "already enabled", not an error
		if err := c0.EnablePeerAccess(c1); err != nil {
			t.Fatal(err)
		}
		if err := c1.EnablePeerAccess(c0); err != nil {
			t.Fatal(err)
		}
	}
	const size = 1 << 20
	a, _ := c0.MemAlloc(size)
	defer c0.MemFree(a)
	b, _ := c1.MemAlloc(size)
	defer c1.MemFree(b)
	want := pattern(size, 9)
	if err := c0.MemcpyHtoD(a, want); err != nil {
		t.Fatal(err)
	}
	if err := c1.MemcpyDtoD(b, a, size); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, size)
	if err := c1.MemcpyDtoH(got, b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("peer copy differs")
	}
}

// TestIPC shares a device allocation with a child process (this test binary
// run again), which checks the data, overwrites it and exits; the parent
// then sees the child's bytes.
func TestIPC(t *testing.T) {
	d := driver(t)
	c := primary(t, d, 0)
	const size = 4<<20 + 128
	p, err := c.MemAlloc(size)
	if err != nil {
		t.Fatal(err)
	}
	defer c.MemFree(p)
	if err := c.MemcpyHtoD(p, pattern(size, 1)); err != nil {
		t.Fatal(err)
	}
	h, err := c.IpcGetMemHandle(p)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := c.NewEvent(EventInterprocess | EventDisableTiming)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Destroy()
	if err := ev.Record(nil); err != nil {
		t.Fatal(err)
	}
	eh, err := ev.IpcHandle()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.IpcOpenMemHandle(h); err == nil {
		t.Error("a process opened its own IPC handle")
	}
	n, _ := d.DeviceCount()
	childDev := n - 1 // the other GPU when there are two

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=ipc")
	cmd.Stdin = strings.NewReader(fmt.Sprintf("%s %d %d %s\n", hex.EncodeToString(h[:]), size, childDev, hex.EncodeToString(eh[:])))
	out, err := cmd.CombinedOutput()
	t.Logf("child on device %d: %s", childDev, strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	got := make([]byte, size)
	if err := c.MemcpyDtoH(got, p); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, pattern(size, 2)) {
		t.Fatal("parent does not see the child's writes")
	}
}

func ipcChild() error {
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return err
	}
	var hexHandle, hexEvent string
	var size uint64
	var dev int
	if _, err := fmt.Sscan(line, &hexHandle, &size, &dev, &hexEvent); err != nil {
		return fmt.Errorf("parse %q: %w", line, err)
	}
	raw, err := hex.DecodeString(hexHandle)
	if err != nil || len(raw) != 64 {
		return fmt.Errorf("bad handle %q", hexHandle)
	}
	var h IpcMemHandle
	copy(h[:], raw)
	d, err := Open()
	if err != nil {
		return err
	}
	device, err := d.Device(dev)
	if err != nil {
		return err
	}
	c, err := device.RetainPrimaryContext()
	if err != nil {
		return err
	}
	defer c.Release()
	var eh IpcEventHandle
	rawEvent, err := hex.DecodeString(hexEvent)
	if err != nil || len(rawEvent) != len(eh) {
		return fmt.Errorf("bad event handle %q", hexEvent)
	}
	copy(eh[:], rawEvent)
	ev, err := c.IpcOpenEventHandle(eh)
	if err != nil {
		return err
	}
	if err := ev.Synchronize(); err != nil {
		return err
	}
	if err := ev.Destroy(); err != nil {
		return err
	}
	p, err := c.IpcOpenMemHandle(h)
	if err != nil {
		return err
	}
	got := make([]byte, size)
	if err := c.MemcpyDtoH(got, p); err != nil {
		return err
	}
	if !bytes.Equal(got, pattern(int(size), 1)) {
		return errors.New("child reads different bytes")
	}
	if err := c.MemcpyHtoD(p, pattern(int(size), 2)); err != nil {
		return err
	}
	if err := c.Synchronize(); err != nil {
		return err
	}
	if err := c.IpcCloseMemHandle(p); err != nil {
		return err
	}
	fmt.Printf("child: opened the parent's event and %d bytes at %#x on device %d, verified and rewrote them\n", size, uint64(p), dev)
	return nil
}

func TestKernelArgsPacking(t *testing.T) {
	ka, err := NewKernelArgs(DevicePtr(0x1122334455667788), int8(-1), uint16(0xBEEF), float32(1.5), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, true, uintptr(7))
	if err != nil {
		t.Fatal(err)
	}
	if ka.Len() != 7 {
		t.Fatalf("Len = %d", ka.Len())
	}
	wantOffs := []uint32{0, 8, 16, 24, 32, 48, 56}
	if fmt.Sprint(ka.offs) != fmt.Sprint(wantOffs) {
		t.Errorf("offsets %v, want %v", ka.offs, wantOffs)
	}
	if len(ka.blob) != 64 {
		t.Errorf("blob %d bytes", len(ka.blob))
	}
	if binary.LittleEndian.Uint64(ka.blob) != 0x1122334455667788 || ka.blob[8] != 0xFF || ka.blob[9] != 0 ||
		binary.LittleEndian.Uint16(ka.blob[16:]) != 0xBEEF ||
		math.Float32frombits(binary.LittleEndian.Uint32(ka.blob[24:])) != 1.5 ||
		ka.blob[40] != 9 || ka.blob[41] != 0 || ka.blob[48] != 1 || ka.blob[56] != 7 {
		t.Errorf("blob % x", ka.blob)
	}
	for _, bad := range []any{1, "s", []byte{}, struct{}{}, &ka} {
		if _, err := NewKernelArgs(bad); err == nil {
			t.Errorf("%T accepted", bad)
		}
	}
	if b := AsBytes([]float64{1}); len(b) != 8 || binary.LittleEndian.Uint64(b) != math.Float64bits(1) {
		t.Errorf("AsBytes: % x", b)
	}
}

func TestCacheEntries(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k")
	key := cacheKey("src", []string{"-O3"}, 90, 13, 0)
	if bytes.Equal(key, cacheKey("src", []string{"-O", "3"}, 90, 13, 0)) ||
		bytes.Equal(key, cacheKey("src", []string{"-O3"}, 80, 13, 0)) ||
		bytes.Equal(key, cacheKey("src", []string{"-O3"}, 90, 12, 9)) ||
		bytes.Equal(key, cacheKey("src2", []string{"-O3"}, 90, 13, 0)) {
		t.Fatal("cache key ignores an input")
	}
	compiles := 0
	compile := func() (*Image, error) {
		compiles++
		return &Image{Data: []byte(fmt.Sprintf("image %d", compiles)), Kind: ImageCUBIN, Arch: 90}, nil
	}
	img, err := compileCached(dir, key, 90, compile)
	if err != nil || img.Cached || compiles != 1 {
		t.Fatalf("first: %+v %v %d", img, err, compiles)
	}
	img, err = compileCached(dir, key, 90, compile)
	if err != nil || !img.Cached || compiles != 1 || string(img.Data) != "image 1" || img.Kind != ImageCUBIN {
		t.Fatalf("second: %+v %v %d", img, err, compiles)
	}
	path := filepath.Join(dir, hex.EncodeToString(key))
	b, _ := os.ReadFile(path)
	for name, corrupt := range map[string][]byte{
		"flipped payload":  append(append([]byte(nil), b[:len(b)-1]...), b[len(b)-1]^1),
		"truncated":        b[:cacheHeader-1],
		"header only":      b[:cacheHeader],
		"bad magic":        append([]byte("XXXXXXXX"), b[8:]...),
		"empty":            {},
		"wrong kind":       append(append(append([]byte(nil), b[:8]...), 9), b[9:]...),
		"wrong arch":       append(append(append([]byte(nil), b[:12]...), 80, 0, 0, 0), b[16:]...),
		"appended garbage": append(append([]byte(nil), b...), 'x'),
	} {
		if err := os.WriteFile(path, corrupt, 0o644); err != nil {
			t.Fatal(err)
		}
		before := compiles
		img, err := compileCached(dir, key, 90, compile)
		if err != nil || img.Cached || compiles != before+1 {
			t.Errorf("%s: used the corrupt entry (%+v, %v)", name, img, err)
		}
		img, err = compileCached(dir, key, 90, compile)
		if err != nil || !img.Cached {
			t.Errorf("%s: entry not rewritten", name)
		}
	}
	if _, err := compileCached(dir, cacheKey("x", nil, 90, 13, 0), 90, func() (*Image, error) {
		return nil, errors.New("boom")
	}); err == nil {
		t.Error("compile error swallowed")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("%d files in the cache, want 1", len(entries))
	}
}

func TestCacheDir(t *testing.T) {
	t.Setenv("TWINCCL_CACHE_DIR", "/x/y")
	if d, _ := CacheDir(); d != "/x/y" {
		t.Errorf("TWINCCL_CACHE_DIR: %s", d)
	}
	t.Setenv("TWINCCL_CACHE_DIR", "")
	t.Setenv("XDG_CACHE_HOME", "/c")
	if d, _ := CacheDir(); d != "/c/twinccl/kernels" {
		t.Errorf("XDG_CACHE_HOME: %s", d)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/h")
	if d, _ := CacheDir(); d != "/h/.cache/twinccl/kernels" {
		t.Errorf("HOME: %s", d)
	}
}

func TestLibraryCandidates(t *testing.T) {
	t.Setenv("TWINCCL_TEST_LIB", "/opt/x/libfoo.so")
	if got := LibraryCandidates("TWINCCL_TEST_LIB", []string{"libfoo.so.1"}, nil); len(got) != 1 || got[0] != "/opt/x/libfoo.so" {
		t.Errorf("env override: %v", got)
	}
	venv := t.TempDir()
	lib := filepath.Join(venv, "lib", "python3.12", "site-packages", "nvidia", "cu13", "lib")
	if err := os.MkdirAll(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(lib, "libfoo.so.1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VIRTUAL_ENV", venv)
	got := LibraryCandidates("TWINCCL_TEST_UNSET", []string{"libfoo.so.1"}, []string{"nvidia/cu13/lib"})
	if len(got) < 2 || got[0] != "libfoo.so.1" || got[1] != filepath.Join(lib, "libfoo.so.1") {
		t.Errorf("candidates: %v", got)
	}
}

func TestOpenErrorsWrapUnavailable(t *testing.T) {
	if _, err := Open(); err != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("Open error does not wrap ErrUnavailable: %v", err)
		}
		t.Logf("Open: %v", err)
	}
	if _, err := OpenNVRTC(); err != nil {
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("OpenNVRTC error does not wrap ErrUnavailable: %v", err)
		}
		t.Logf("OpenNVRTC: %v", err)
	}
}

func unsafePtr(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
