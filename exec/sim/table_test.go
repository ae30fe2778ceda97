package sim

import (
	"strconv"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
)

const specTable = `# a table; settings: NCCL_NVLS_ENABLE=0
all_reduce 1024 10.5
all_reduce 134217728 700
alltoall 33554432 125.18
alltoall 268435456 756.59
sendrecv 536870912 1509.29 1500
`

// TestTableSpecFilters: colls= and minbytes= keep the rows they name, in
// order, and name the table after them; AlltoAll and SendRecv rows are
// read as nccl-tests prints them.
func TestTableSpecFilters(t *testing.T) {
	for _, tc := range []struct {
		words []string
		name  string
		want  []string // coll/bytes of the rows kept
	}{
		{nil, "t.tsv", []string{"AllReduce/1024", "AllReduce/134217728", "AlltoAll/33554432", "AlltoAll/268435456", "SendRecv/536870912"}},
		{[]string{"minbytes=128M"}, "t.tsv[>=128M]", []string{"AllReduce/134217728", "AlltoAll/268435456", "SendRecv/536870912"}},
		{[]string{"colls=alltoall+sendrecv", "minbytes=256M"}, "t.tsv[alltoall+sendrecv][>=256M]", []string{"AlltoAll/268435456", "SendRecv/536870912"}},
		{[]string{"minbytes=1K", "maxbytes=256M"}, "t.tsv[>=1K][<=256M]", []string{"AllReduce/1024", "AllReduce/134217728", "AlltoAll/33554432", "AlltoAll/268435456"}},
		{[]string{"minbytes=1024"}, "t.tsv[>=1024]", []string{"AllReduce/1024", "AllReduce/134217728", "AlltoAll/33554432", "AlltoAll/268435456", "SendRecv/536870912"}},
	} {
		tb, err := ReadTable(strings.NewReader(specTable), "t.tsv")
		if err != nil {
			t.Fatal(err)
		}
		if err := tb.ApplySpec(tc.words); err != nil {
			t.Fatalf("%v: %v", tc.words, err)
		}
		var got []string
		for _, m := range tb.Rows {
			got = append(got, m.Coll.String()+"/"+strconv.FormatInt(m.Bytes, 10))
		}
		if tb.Name != tc.name || strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%v: %s %v, want %s %v", tc.words, tb.Name, got, tc.name, tc.want)
		}
		if tb.Env["NCCL_NVLS_ENABLE"] != "0" {
			t.Errorf("%v: settings %v", tc.words, tb.Env)
		}
	}
	tb, _ := ReadTable(strings.NewReader(specTable), "t.tsv")
	if tb.Rows[4].BestUs != 1500 || tb.Rows[4].Coll != model.CollSendRecv {
		t.Errorf("sendrecv row %+v", tb.Rows[4])
	}
}

// TestTableSpecErrors: bad filters and collectives no table can hold are
// refused with the offending word or line.
func TestTableSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		text  string
		words []string
		want  string
	}{
		{specTable, []string{"minbytes=lots"}, `minbytes: "lots" is not a size`},
		{specTable, []string{"minbytes=1G"}, "no rows of 1G bytes or more"},
		{specTable, []string{"maxbytes=512"}, "no rows of 512 bytes or less"},
		{specTable, []string{"colls=broadcast"}, "no rows of broadcast"},
		{"send 1024 5.0\n", nil, `t.tsv:1: unknown collective "send"`},
		{specTable, []string{"timing=eager"}, "timing=eager: line 2 has no eager time (fifth column)"},
		{specTable, []string{"timing=fast"}, `timing "fast" (want graph or eager)`},
		{"all_reduce 8 5.6 5.5 8.2\n", []string{"timing=eager", "timing=graph"}, "timing=graph after timing=eager"},
	} {
		tb, err := ReadTable(strings.NewReader(tc.text), "t.tsv")
		if err == nil {
			err = tb.ApplySpec(tc.words)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q %v: error %v, want %q", tc.text, tc.words, err, tc.want)
		}
	}
}

// TestTableEagerColumn: timing=eager takes the fifth column as the rows'
// times (no best repetition) and marks the table eager.
func TestTableEagerColumn(t *testing.T) {
	tb, err := ReadTable(strings.NewReader("all_reduce 8 5.65 5.62 8.26 0.00\nbroadcast 1024 4.5 4.4 7.9\n"), "t.tsv")
	if err != nil {
		t.Fatal(err)
	}
	if tb.Eager || tb.Rows[0].MeanUs != 5.65 || tb.Rows[0].EagerUs != 8.26 {
		t.Fatalf("graph-timed table: eager %v, row %+v", tb.Eager, tb.Rows[0])
	}
	if err := tb.ApplySpec([]string{"timing=eager", "timing=eager"}); err != nil {
		t.Fatal(err)
	}
	if !tb.Eager || tb.Name != "t.tsv[eager]" || tb.Rows[0].MeanUs != 8.26 || tb.Rows[0].BestUs != 0 || tb.Rows[1].MeanUs != 7.9 {
		t.Errorf("eager table %q (eager %v): rows %+v", tb.Name, tb.Eager, tb.Rows)
	}
}

// TestTableSettings: a table's settings are its environment as sorted
// words, less where its run dumped its topology.
func TestTableSettings(t *testing.T) {
	tb := &Table{Env: map[string]string{"NCCL_PROTO": "LL", "NCCL_TOPO_DUMP_FILE": "/tmp/p2/topo.xml", "NCCL_NVLS_ENABLE": "0"}}
	if got, want := tb.Settings(), "NCCL_NVLS_ENABLE=0 NCCL_PROTO=LL"; got != want {
		t.Errorf("settings %q, want %q", got, want)
	}
}
