package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/internal/depstest"
)

// repoRoot is the repository root, two levels above exec/hw/ncclapi.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../../../..")
	require.NoError(t, err)
	return dir
}

// The library, built once per test binary by buildLib.
var (
	libOnce sync.Once
	libDir  string
	libErr  error
	libOut  []byte
)

func TestMain(m *testing.M) {
	code := m.Run()
	if libDir != "" {
		os.RemoveAll(libDir)
	}
	os.Exit(code)
}

// buildLib builds the library as make lib does, into a temporary
// directory (go's build cache makes this a link after the first time).
func buildLib(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the library is built for Linux")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc: the C API test needs a C compiler")
	}
	libOnce.Do(func() {
		if libDir, libErr = os.MkdirTemp("", "libnccl"); libErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags=-extldflags=-Wl,-z,lazy", "-o", filepath.Join(libDir, "libnccl.so.2"), ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
		libOut, libErr = cmd.CombinedOutput()
	})
	require.NoError(t, libErr, "go build -buildmode=c-shared:\n%s", libOut)
	return libDir
}

// gpuPresent reports whether CUDA works here (the calls that need a
// device then succeed instead of failing with ncclUnhandledCudaError).
func gpuPresent() bool {
	d, err := cuda.Open()
	if err != nil {
		return false
	}
	n, err := d.DeviceCount()
	return err == nil && n > 0
}

// TestCAPI compiles testdata/lib/api_test.c against include/nccl.h, links
// it with the library and runs it: every exported function's error paths.
func TestCAPI(t *testing.T) {
	dir := buildLib(t)
	root := repoRoot(t)
	bin := filepath.Join(dir, "api_test")
	cc := exec.Command("gcc", "-std=c11", "-Wall", "-Werror", "-DTWINCCL_NO_CUDA_RUNTIME", "-I", filepath.Join(root, "include"),
		"-o", bin, filepath.Join(root, "testdata/lib/api_test.c"), filepath.Join(dir, "libnccl.so.2"), "-Wl,-rpath,"+dir, "-Wl,--allow-shlib-undefined", "-ldl")
	out, err := cc.CombinedOutput()
	require.NoError(t, err, "gcc:\n%s", out)
	args := []string{}
	if gpuPresent() {
		args = append(args, "--gpu")
	}
	run := exec.Command(bin, args...)
	out, err = run.CombinedOutput()
	t.Logf("%s", out)
	require.NoError(t, err, "api_test failed:\n%s", out)
	assert.Regexp(t, `^\d+ checks, 0 failures`, string(out[len(out)-min(len(out), 40):]))
}

// TestExportsEveryHeaderFunction checks that every function include/nccl.h
// declares, and its pncclX alias, is a dynamic symbol of the library (the
// header promises what the library links), and that the library exports
// nothing else named nccl*.
func TestExportsEveryHeaderFunction(t *testing.T) {
	dir := buildLib(t)
	hdr, err := os.ReadFile(filepath.Join(repoRoot(t), "include/nccl.h"))
	require.NoError(t, err)
	decl := regexp.MustCompile(`(?m)^(?:ncclResult_t|const char\*)\s+(p?nccl\w+)\(`)
	var want []string
	for _, m := range decl.FindAllSubmatch(hdr, -1) {
		want = append(want, string(m[1]))
	}
	require.Greater(t, len(want), 60, "header declarations found")
	f, err := elf.Open(filepath.Join(dir, "libnccl.so.2"))
	require.NoError(t, err)
	defer f.Close()
	syms, err := f.DynamicSymbols()
	require.NoError(t, err)
	var got []string
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF && regexp.MustCompile(`^p?nccl`).MatchString(s.Name) {
			got = append(got, s.Name)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	assert.Equal(t, want, got)
}

// TestDeps keeps the library a runtime: it must not carry the simulator
// (exec/sim) or the test harness (model/conformance pulls in testing),
// which an application loading libnccl.so.2 would pay for.
func TestDeps(t *testing.T) {
	depstest.Forbid(t, func(dep string) bool {
		switch dep {
		case "github.com/twinccl/twinccl/exec/sim", "github.com/twinccl/twinccl/model/conformance", "testing":
			return true
		}
		return false
	})
}
