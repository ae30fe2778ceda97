package traces

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// checkImported: an import that succeeds gives a consistent job that
// writes; one that fails gives no job.
func checkImported(t *testing.T, job *Job, err error) {
	if err != nil {
		if job != nil {
			t.Fatalf("error %v with a job", err)
		}
		return
	}
	if err := job.Check(); err != nil {
		t.Fatalf("imported job fails its check: %v", err)
	}
	if len(job.Calls) > 0 {
		if err := job.Write(io.Discard, WriterOptions{}); err != nil {
			t.Fatalf("imported job does not write: %v", err)
		}
	}
}

func addSeeds(f *testing.F, pattern string) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "import", pattern))
	for _, p := range paths {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
}

func FuzzImportChakra(f *testing.F) {
	addSeeds(f, "chakra-*/*.0.et")
	f.Add(encodeET("0.0.4", etNode{id: 1, typ: chakraCollNode, ints: map[string]int64{"comm_type": 0, "comm_size": 64}},
		etNode{id: 2, typ: chakraCompNode, dataDeps: []uint64{1}, dur: 3},
		etNode{id: 3, typ: chakraCollNode, dataDeps: []uint64{2}, ints: map[string]int64{"comm_type": 2, "comm_size": 64}, strs: map[string]string{"pg_name": "tp"}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		job, err := ImportChakra([]NamedReader{{Name: "f.0.et", R: bytes.NewReader(data)}}, ChakraOptions{})
		checkImported(t, job, err)
	})
}

func FuzzImportKineto(f *testing.F) {
	addSeeds(f, "kineto-rank0.pt.trace.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		job, err := ImportKineto([]NamedReader{{Name: "f.json", R: bytes.NewReader(data)}})
		checkImported(t, job, err)
	})
}

func FuzzImportNCCLLog(f *testing.F) {
	addSeeds(f, "nccl-log-*.log")
	f.Fuzz(func(t *testing.T, data []byte) {
		job, err := ImportNCCLLog([]NamedReader{{Name: "f.log", R: bytes.NewReader(data)}})
		checkImported(t, job, err)
	})
}
