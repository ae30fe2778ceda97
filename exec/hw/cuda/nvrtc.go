package cuda

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// NVRTCLibraries are the sonames [OpenNVRTC] tries, in order.
var NVRTCLibraries = []string{"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"}

// nvrtcPyDirs are the directories of NVIDIA's Python wheels that hold
// libnvrtc (CUDA 13 wheels put every library in nvidia/cu13/lib).
var nvrtcPyDirs = []string{"nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"}

// nvrtcAPI is the C side of NVRTC (cgo_nvrtc.go).
type nvrtcAPI interface {
	version() (major, minor, r int)
	errorString(r int) string
	hasCUBIN() bool
	// compile compiles src and returns the CUBIN (cubin true) or the PTX,
	// the program log, and on failure the failing call and its result.
	compile(src, name string, opts []string, cubin bool) (out []byte, log, call string, r int)
}

// nvrtcResult values (nvrtc.h).
const (
	nvrtcSuccess       = 0
	nvrtcInvalidOption = 5
)

// NVRTCError is a failed NVRTC call; for a compilation error Log holds the
// compiler's messages.
type NVRTCError struct {
	Call string // e.g. "nvrtcCompileProgram"
	Code int    // nvrtcResult
	Text string // nvrtcGetErrorString
	Name string // the program name
	Log  string // the program log
}

// Error implements error.
func (e *NVRTCError) Error() string {
	s := fmt.Sprintf("%s(%s): %s (%d)", e.Call, e.Name, e.Text, e.Code)
	if l := strings.TrimSpace(e.Log); l != "" {
		s += "\n" + l
	}
	return s
}

// NVRTC is the loaded NVRTC library.
type NVRTC struct {
	api          nvrtcAPI
	path         string
	major, minor int
}

var (
	nvrtcOnce sync.Once
	nvrtcLib  *NVRTC
	nvrtcErr  error
)

// OpenNVRTC loads NVRTC: the path in $TWINCCL_NVRTC if set, otherwise the
// first of [NVRTCLibraries] that the dynamic loader finds, otherwise one
// from NVIDIA's Python wheels (nvidia/cu13/lib, nvidia/cuda_nvrtc/lib under
// site-packages) or /usr/local/cuda/lib64. The result is shared by the
// process. Errors wrap [ErrUnavailable].
func OpenNVRTC() (*NVRTC, error) {
	nvrtcOnce.Do(func() { nvrtcLib, nvrtcErr = openNVRTC() })
	return nvrtcLib, nvrtcErr
}

func openNVRTC() (*NVRTC, error) {
	var tried []string
	for _, path := range LibraryCandidates("TWINCCL_NVRTC", NVRTCLibraries, nvrtcPyDirs) {
		api, err := loadNVRTC(path)
		if err != nil {
			if errors.Is(err, ErrNoCgo) {
				return nil, err
			}
			tried = append(tried, err.Error())
			continue
		}
		major, minor, r := api.version()
		if r != nvrtcSuccess {
			tried = append(tried, fmt.Sprintf("%s: nvrtcVersion: %s", path, api.errorString(r)))
			continue
		}
		return &NVRTC{api: api, path: path, major: major, minor: minor}, nil
	}
	return nil, fmt.Errorf("%w: NVRTC not found (set TWINCCL_NVRTC to libnvrtc.so's path):\n  %s",
		ErrUnavailable, strings.Join(tried, "\n  "))
}

// Path returns the path NVRTC was loaded from, as given to dlopen.
func (n *NVRTC) Path() string { return n.path }

// Version returns NVRTC's version (nvrtcVersion), e.g. 13, 0.
func (n *NVRTC) Version() (major, minor int) { return n.major, n.minor }

// ImageKind says what an [Image] holds.
type ImageKind uint8

// Image kinds.
const (
	ImageCUBIN ImageKind = 1 // machine code for exactly one architecture
	ImagePTX   ImageKind = 2 // PTX, compiled by the driver when loaded
)

// String returns "cubin" or "ptx".
func (k ImageKind) String() string {
	switch k {
	case ImageCUBIN:
		return "cubin"
	case ImagePTX:
		return "ptx"
	}
	return fmt.Sprintf("ImageKind(%d)", uint8(k))
}

// Image is a compiled program, ready for [Context.LoadModule].
type Image struct {
	Data   []byte
	Kind   ImageKind
	Arch   int    // 10*major + minor of the architecture it was compiled for
	Log    string // the compiler's log (warnings); empty when read from the cache
	Cached bool   // read from the on-disk cache
}

// CompileProgram compiles CUDA C++ source with NVRTC for the architecture
// arch (10*major + minor, from [Device.Arch]): a CUBIN with
// --gpu-architecture=sm_<arch>, or, when this NVRTC cannot produce one,
// PTX with --gpu-architecture=compute_<arch>. options must not set the
// architecture. A compilation error carries the program log.
func (n *NVRTC) CompileProgram(src, name string, options []string, arch int) (*Image, error) {
	if arch <= 0 {
		return nil, fmt.Errorf("nvrtc: invalid architecture %d", arch)
	}
	for _, o := range options {
		if strings.HasPrefix(o, "--gpu-architecture") || strings.HasPrefix(o, "-arch") {
			return nil, fmt.Errorf("nvrtc: option %q: the architecture is set by CompileProgram", o)
		}
	}
	if n.api.hasCUBIN() {
		opts := append(append([]string(nil), options...), fmt.Sprintf("--gpu-architecture=sm_%d", arch))
		out, log, call, r := n.api.compile(src, name, opts, true)
		switch {
		case r == nvrtcSuccess && len(out) > 0:
			return &Image{Data: out, Kind: ImageCUBIN, Arch: arch, Log: log}, nil
		case r == nvrtcSuccess, r == nvrtcInvalidOption && call == "nvrtcCompileProgram",
			call == "nvrtcGetCUBINSize", call == "nvrtcGetCUBIN":
			// No CUBIN for this architecture (unknown sm_<arch>, or an empty
			// result): fall back to PTX.
		default:
			return nil, &NVRTCError{Call: call, Code: r, Text: n.api.errorString(r), Name: name, Log: log}
		}
	}
	opts := append(append([]string(nil), options...), fmt.Sprintf("--gpu-architecture=compute_%d", arch))
	out, log, call, r := n.api.compile(src, name, opts, false)
	if r != nvrtcSuccess {
		return nil, &NVRTCError{Call: call, Code: r, Text: n.api.errorString(r), Name: name, Log: log}
	}
	// PTX comes NUL-terminated; keep it as text.
	out = bytes.TrimRight(out, "\x00")
	return &Image{Data: out, Kind: ImagePTX, Arch: arch, Log: log}, nil
}

// CacheDir returns the directory of compiled kernels: $TWINCCL_CACHE_DIR,
// or $XDG_CACHE_HOME/twinccl/kernels, or ~/.cache/twinccl/kernels.
func CacheDir() (string, error) {
	if d := os.Getenv("TWINCCL_CACHE_DIR"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "twinccl", "kernels"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("kernel cache directory: %w (set TWINCCL_CACHE_DIR)", err)
	}
	return filepath.Join(home, ".cache", "twinccl", "kernels"), nil
}

// Compile is [NVRTC.CompileProgram] through an on-disk cache ([CacheDir]).
// An entry is named by the SHA-256 of the source, the options, the
// architecture and NVRTC's version, written atomically (a temporary file
// renamed into place) and checked when read: an entry that does not verify
// is compiled again and replaced. A cache that cannot be written only costs
// a warning.
func Compile(src, name string, options []string, arch int) (*Image, error) {
	n, err := OpenNVRTC()
	if err != nil {
		return nil, err
	}
	dir, err := CacheDir()
	if err != nil {
		return nil, err
	}
	key := cacheKey(src, options, arch, n.major, n.minor)
	return compileCached(dir, key, arch, func() (*Image, error) {
		return n.CompileProgram(src, name, options, arch)
	})
}

// CachePath returns the cache file that [Compile] uses for these inputs.
func CachePath(src string, options []string, arch int) (string, error) {
	n, err := OpenNVRTC()
	if err != nil {
		return "", err
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, hex.EncodeToString(cacheKey(src, options, arch, n.major, n.minor))), nil
}

func cacheKey(src string, options []string, arch, major, minor int) []byte {
	h := sha256.New()
	field := func(s string) {
		var l [8]byte
		binary.LittleEndian.PutUint64(l[:], uint64(len(s)))
		h.Write(l[:])
		h.Write([]byte(s))
	}
	field("twinccl kernel cache v1")
	field(src)
	field(fmt.Sprint(len(options)))
	for _, o := range options {
		field(o)
	}
	field(fmt.Sprint(arch))
	field(fmt.Sprintf("nvrtc %d.%d", major, minor))
	return h.Sum(nil)
}

// Cache file layout: magic (8 bytes), kind (1), reserved (3), arch (uint32
// LE), SHA-256 of the payload (32), payload.
const (
	cacheMagic  = "TWKCACH1"
	cacheHeader = 8 + 1 + 3 + 4 + 32
)

func encodeCacheEntry(img *Image) []byte {
	b := make([]byte, cacheHeader, cacheHeader+len(img.Data))
	copy(b, cacheMagic)
	b[8] = byte(img.Kind)
	binary.LittleEndian.PutUint32(b[12:], uint32(img.Arch))
	sum := sha256.Sum256(img.Data)
	copy(b[16:], sum[:])
	return append(b, img.Data...)
}

func decodeCacheEntry(b []byte, arch int) (*Image, error) {
	if len(b) < cacheHeader || string(b[:8]) != cacheMagic {
		return nil, errors.New("bad header")
	}
	kind := ImageKind(b[8])
	if kind != ImageCUBIN && kind != ImagePTX {
		return nil, fmt.Errorf("bad kind %d", b[8])
	}
	if a := int(binary.LittleEndian.Uint32(b[12:])); a != arch {
		return nil, fmt.Errorf("architecture %d, want %d", a, arch)
	}
	data := b[cacheHeader:]
	if len(data) == 0 {
		return nil, errors.New("empty image")
	}
	if sum := sha256.Sum256(data); !bytes.Equal(sum[:], b[16:48]) {
		return nil, errors.New("checksum mismatch")
	}
	return &Image{Data: data, Kind: kind, Arch: arch, Cached: true}, nil
}

func compileCached(dir string, key []byte, arch int, compile func() (*Image, error)) (*Image, error) {
	path := filepath.Join(dir, hex.EncodeToString(key))
	if b, err := os.ReadFile(path); err == nil {
		img, derr := decodeCacheEntry(b, arch)
		if derr == nil {
			return img, nil
		}
		slog.Warn("corrupt kernel cache entry; compiling again", "path", path, "err", derr)
	}
	img, err := compile()
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(dir, path, encodeCacheEntry(img)); err != nil {
		slog.Warn("cannot write kernel cache", "path", path, "err", err)
	}
	return img, nil
}

// writeFileAtomic writes a temporary file in dir and renames it to path, so
// that readers see either the old file or the complete new one.
func writeFileAtomic(dir, path string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
