package model

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// xmlTreeDiff compares two element trees by name, attributes (in order) and
// children, ignoring Line. It returns "" when they are equal, else a
// description of the first difference.
func xmlTreeDiff(a, b *Element) string {
	return xmlTreeDiffAt("", a, b)
}

func xmlTreeDiffAt(path string, a, b *Element) string {
	if a == nil || b == nil {
		if a == b {
			return ""
		}
		return fmt.Sprintf("%s: one tree is nil", path)
	}
	path += "/" + a.Name
	if a.Name != b.Name {
		return fmt.Sprintf("%s: name %q vs %q", path, a.Name, b.Name)
	}
	if len(a.Attrs) != len(b.Attrs) {
		return fmt.Sprintf("%s: attributes %v vs %v", path, a.Attrs, b.Attrs)
	}
	for i := range a.Attrs {
		if a.Attrs[i] != b.Attrs[i] {
			return fmt.Sprintf("%s: attribute %d: %v vs %v", path, i, a.Attrs[i], b.Attrs[i])
		}
	}
	if len(a.Children) != len(b.Children) {
		return fmt.Sprintf("%s: %d vs %d children", path, len(a.Children), len(b.Children))
	}
	for i := range a.Children {
		if d := xmlTreeDiffAt(fmt.Sprintf("%s[%d]", path, i), a.Children[i], b.Children[i]); d != "" {
			return d
		}
	}
	return ""
}

// sharedTopologyFiles lists every topology XML of the shared reference data.
func sharedTopologyFiles(t testing.TB) []string {
	shared := sharedDir(t)
	files, err := filepath.Glob(filepath.Join(shared, "topologies", "*.xml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return append(files, filepath.Join(shared, "baselines", "h200x2-nvswitch", "topo.xml"))
}

const rcclTopology = "amd-mi300x-x8-xgmi-8x400g.xml"

// byteIdenticalDumps are the NCCL dumps that WriteXML reproduces byte for
// byte. The two other version-1 files differ only in whitespace outside
// the elements: oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml starts with an
// empty line and oci-gb300-nvl72-2trays-x8-mnnvl-8x800g.xml has no newline
// after </system>.
var byteIdenticalDumps = []string{
	"topologies/alibaba-simccl-a100-80g-x8-nvswitch-5x200g-bond.xml",
	"topologies/azure-ncv4-a100pcie-x4-nvlink-bridge-pairs.xml",
	"topologies/b200x8-nvswitch-vm-8x400g.xml",
	"topologies/dgx1-v100-32g-x8-nvlink-hybrid-cube-mesh.xml",
	"topologies/nvlink-bridge-rtxa6000x2-10gbe.xml",
	"topologies/oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml",
	"topologies/pcie-rtx3090x8-2socket-1ib.xml",
	"topologies/pcie-rtx4090x2-cx4-2x100g.xml",
	"topologies/pcie-rtxa6000x4-2socket-ethernet-only.xml",
	"baselines/h200x2-nvswitch/topo.xml",
}

func xmlString(t testing.TB, root *Element) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, WriteXML(&b, root))
	return b.String()
}

func TestXMLRoundTripSharedTopologies(t *testing.T) {
	shared := sharedDir(t)
	identical := map[string]bool{}
	for _, f := range byteIdenticalDumps {
		identical[filepath.Join(shared, f)] = true
	}
	seen := 0
	for _, f := range sharedTopologyFiles(t) {
		rel, err := filepath.Rel(shared, f)
		require.NoError(t, err)
		t.Run(rel, func(t *testing.T) {
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			root, warns, err := ParseTopologyXML(bytes.NewReader(data), f)
			if filepath.Base(f) == rcclTopology {
				require.Error(t, err)
				require.True(t, errors.Is(err, ErrUnsupportedTopology), "%v", err)
				require.Contains(t, err.Error(), "RCCL")
				require.Contains(t, err.Error(), f+":1:")
				var pe *ParseError
				require.True(t, errors.As(err, &pe), "%v", err)
				require.Equal(t, f, pe.File)
				require.Equal(t, 1, pe.Line)
				// The RCCL file is well formed; only its version is refused.
				_, _, err = ParseXML(bytes.NewReader(data), f, TopologyGrammar)
				require.NoError(t, err)
				return
			}
			require.NoError(t, err)
			require.Empty(t, warns)
			out1 := xmlString(t, root)
			root2, warns2, err := ParseTopologyXML(strings.NewReader(out1), "rewritten")
			require.NoError(t, err)
			require.Empty(t, warns2)
			require.Empty(t, xmlTreeDiff(root, root2))
			require.Equal(t, out1, xmlString(t, root2), "second write differs from the first")
			if identical[f] {
				seen++
				require.Equal(t, string(data), out1, "WriteXML output differs from the NCCL dump")
			} else {
				require.NotEqual(t, string(data), out1, "now byte-identical: add to byteIdenticalDumps")
				require.Equal(t, strings.TrimSpace(string(data)), strings.TrimSpace(out1))
			}
		})
	}
	require.Equal(t, len(byteIdenticalDumps), seen, "a file of byteIdenticalDumps is missing")
}

// parseTopo parses s as a topology file named test.xml.
func parseTestXML(s string) (*Element, []Warning, error) {
	return ParseTopologyXML(strings.NewReader(s), "test.xml")
}

// requireParseError checks that err is or wraps a *ParseError for test.xml
// at line (0: any line), whose message contains each of msgs.
func requireXMLParseError(t *testing.T, err error, line int, msgs ...string) *ParseError {
	t.Helper()
	require.Error(t, err)
	var pe *ParseError
	require.True(t, errors.As(err, &pe), "not a *ParseError: %T %v", err, err)
	require.Equal(t, "test.xml", pe.File, "%v", err)
	if line > 0 {
		require.Equal(t, line, pe.Line, "%v", err)
	}
	for _, m := range msgs {
		require.Contains(t, err.Error(), m)
	}
	return pe
}

// el builds an expected tree: xmlEl("cpu", "numaid", "0")(children...).
func xmlEl(name string, kv ...string) func(children ...*Element) *Element {
	return func(children ...*Element) *Element {
		e := NewElement(name, kv...)
		e.Children = children
		return e
	}
}

func TestParseXMLAccepts(t *testing.T) {
	sys := func(children ...*Element) *Element { return xmlEl("system", "version", "1")(children...) }
	cases := []struct {
		name  string
		in    string
		want  *Element
		lines map[string]int // element name -> expected Line (first of that name, depth first)
		warns []int          // lines of the expected warnings
	}{
		{
			name: "single quotes",
			in:   "<system version='1'>\n  <cpu numaid='0' arch=\"x86_64\" affinity='ff'/>\n</system>\n",
			want: sys(xmlEl("cpu", "numaid", "0", "arch", "x86_64", "affinity", "ff")()),
		},
		{
			name: "comments anywhere",
			in: "<!-- leading -->\n<system version=\"1\"> <!-- same line -->\n<!-- multi\nline\n<cpu numaid=\"9\"/>\ncomment -->\n" +
				"  <cpu numaid=\"0\"><!----><pci busid=\"0000:01:00.0\"/><!-- x --></cpu>\n</system>\n<!-- trailing\n-->\n",
			want:  sys(xmlEl("cpu", "numaid", "0")(xmlEl("pci", "busid", "0000:01:00.0")())),
			lines: map[string]int{"system": 2, "cpu": 7, "pci": 7},
		},
		{
			name: "space before />",
			in:   "<system version=\"1\" >\n<cpu numaid=\"0\" />\n</system>",
			want: sys(xmlEl("cpu", "numaid", "0")()),
		},
		{
			name:  "CR LF line endings",
			in:    "<system version=\"1\">\r\n  <cpu numaid=\"0\">\r\n    <nic>\r\n      <net dev=\"0\"/>\r\n    </nic>\r\n  </cpu>\r\n</system>\r\n",
			want:  sys(xmlEl("cpu", "numaid", "0")(xmlEl("nic")(xmlEl("net", "dev", "0")()))),
			lines: map[string]int{"system": 1, "cpu": 2, "nic": 3, "net": 4},
		},
		{
			name: "no whitespace at all",
			in:   `<system version="1"><cpu numaid="0"/><cpu numaid="1"/></system>`,
			want: sys(xmlEl("cpu", "numaid", "0")(), xmlEl("cpu", "numaid", "1")()),
		},
		{
			name: "unknown element inside gpu",
			in: "<system version=\"1\">\n<cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\">\n<gpu dev=\"0\">\n" +
				"<xgmi target=\"0000:02:00.0\" count=\"1\"/>\n<nvlink target=\"0000:02:00.0\" count=\"2\"/>\n" +
				"<foo a=\"1\">\n<bar/>\n<nvlink target=\"x\"/>\n</foo>\n</gpu>\n</pci>\n</cpu>\n</system>\n",
			want: sys(xmlEl("cpu", "numaid", "0")(xmlEl("pci", "busid", "0000:01:00.0")(xmlEl("gpu", "dev", "0")(
				xmlEl("nvlink", "target", "0000:02:00.0", "count", "2")())))),
			lines: map[string]int{"gpu": 4, "nvlink": 6},
			warns: []int{5, 7},
		},
		{
			name:  "unknown element at top level",
			in:    "<foo/>\n<bar x=\"1\">\n<baz/>\n</bar>\n<system version=\"1\">\n<cpu numaid=\"0\"/>\n</system>\n<system version=\"1\"/>\n",
			want:  sys(xmlEl("cpu", "numaid", "0")()),
			lines: map[string]int{"system": 5, "cpu": 6},
			warns: []int{1, 2, 8},
		},
		{
			name:  "misplaced known element",
			in:    "<system version=\"1\">\n<cpu numaid=\"0\">\n<gpu dev=\"0\">\n<nvlink count=\"1\"/>\n</gpu>\n<nic/>\n</cpu>\n<pci/>\n</system>\n",
			want:  sys(xmlEl("cpu", "numaid", "0")(xmlEl("nic")())),
			warns: []int{3, 8},
		},
		{
			name:  "17 attributes: the last is dropped",
			in:    "<system version=\"1\">\n<cpu" + xmlAttrs(17) + "/>\n</system>\n",
			want:  sys(xmlEl("cpu", xmlAttrKV(16)...)()),
			warns: []int{2},
		},
		{
			name:  "dummy attributes count toward the limit",
			in:    "<system version=\"1\">\n\n<cpu " + xmlAttrs(15) + " a15=\"x\"/>\n</system>\n",
			want:  sys(xmlEl("cpu", xmlAttrKV(15)...)()),
			warns: []int{3},
		},
		{
			name: "255-character value and names",
			in: "<system version=\"1\">\n<cpu numaid=\"0\" affinity=\"" + strings.Repeat("f", 255) + "\" " + strings.Repeat("k", 255) + "=\"1\"/>\n<" +
				strings.Repeat("e", 255) + "/>\n</system>\n",
			want:  sys(xmlEl("cpu", "numaid", "0", "affinity", strings.Repeat("f", 255), strings.Repeat("k", 255), "1")()),
			warns: []int{3},
		},
		{
			name: "value spanning lines keeps line numbers",
			in:   "<system version=\"1\" name=\"a\nb\">\n<cpu numaid=\"0\"/>\n</system>\n",
			want: xmlEl("system", "version", "1", "name", "a\nb")(xmlEl("cpu", "numaid", "0")()),
			lines: map[string]int{
				"cpu": 3,
			},
		},
		{name: "version 0x1", in: `<system version="0x1"/>`, want: xmlEl("system", "version", "0x1")()},
		{name: "version 01", in: `<system version="01"/>`, want: xmlEl("system", "version", "01")()},
		{name: "version with spaces and junk", in: `<system version=" 1abc"/>`, want: xmlEl("system", "version", " 1abc")()},
		{
			name: "256 elements",
			in:   "<system version=\"1\">" + strings.Repeat(`<cpu numaid="0"/>`, MaxTopologyXMLNodes-1) + "</system>",
			want: sys(repeatXMLElement(xmlEl("cpu", "numaid", "0")(), MaxTopologyXMLNodes-1)...),
		},
		{
			name: "ignored elements do not count toward the element limit",
			in:   "<system version=\"1\">" + strings.Repeat(`<x/>`, 1000) + strings.Repeat(`<cpu numaid="0"/>`, 10) + "</system>",
			want: sys(repeatXMLElement(xmlEl("cpu", "numaid", "0")(), 10)...),
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, warns, err := parseTestXML(c.in)
			require.NoError(t, err)
			require.Empty(t, xmlTreeDiff(c.want, root), "got:\n%s", xmlString(t, root))
			for name, line := range c.lines {
				e := findXMLElement(root, name)
				require.NotNil(t, e, name)
				require.Equal(t, line, e.Line, "line of <%s>", name)
			}
			if c.name == "ignored elements do not count toward the element limit" {
				require.NotEmpty(t, warns)
				return
			}
			var lines []int
			for _, w := range warns {
				require.Equal(t, "test.xml", w.File)
				require.Contains(t, w.String(), fmt.Sprintf("test.xml:%d: ", w.Line))
				lines = append(lines, w.Line)
			}
			require.Equal(t, c.warns, lines, "warning lines: %v", warns)
			// Whatever was accepted writes back and reads again identically.
			out := xmlString(t, root)
			root2, warns2, err := parseTestXML(out)
			require.NoError(t, err)
			require.Empty(t, warns2)
			require.Empty(t, xmlTreeDiff(root, root2))
		})
	}
}

// A single-quoted value may hold a double quote; NCCL reads it, but
// WriteXML cannot write it back.
func TestParseXMLQuoteInValue(t *testing.T) {
	root, _, err := parseTestXML("<system version=\"1\" name='a\"b'/>")
	require.NoError(t, err)
	require.Empty(t, xmlTreeDiff(NewElement("system", "version", "1", "name", `a"b`), root))
	var b bytes.Buffer
	require.ErrorContains(t, WriteXML(&b, root), "write XML")
	require.Zero(t, b.Len(), "partial output")
}

func TestParseXMLWarningMessages(t *testing.T) {
	_, warns, err := parseTestXML("<system version=\"1\">\n<cpu numaid=\"0\">\n<pci busid=\"b\">\n<gpu dev=\"0\">\n<xgmi target=\"t\" count=\"1\"/>\n</gpu>\n</pci>\n</cpu>\n</system>\n")
	require.NoError(t, err)
	require.Len(t, warns, 1)
	require.Equal(t, 5, warns[0].Line)
	require.Contains(t, warns[0].Msg, "xgmi")
	require.Contains(t, warns[0].Msg, "gpu")

	_, warns, err = parseTestXML("<system version=\"1\">\n<cpu" + xmlAttrs(18) + "/>\n</system>\n")
	require.NoError(t, err)
	require.Len(t, warns, 2)
	require.Contains(t, warns[0].String(), "test.xml:2:")
	require.Contains(t, warns[0].Msg, "a16")
	require.Contains(t, warns[1].Msg, "a17")
}

// attrs returns n attributes ` a0="0" a1="1" ...`.
func xmlAttrs(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, ` a%d="%d"`, i, i)
	}
	return b.String()
}

func xmlAttrKV(n int) []string {
	var kv []string
	for i := 0; i < n; i++ {
		kv = append(kv, fmt.Sprintf("a%d", i), fmt.Sprint(i))
	}
	return kv
}

func repeatXMLElement(e *Element, n int) []*Element {
	out := make([]*Element, n)
	for i := range out {
		out[i] = e.Clone()
	}
	return out
}

func findXMLElement(e *Element, name string) *Element {
	if e.Name == name {
		return e
	}
	for _, c := range e.Children {
		if f := findXMLElement(c, name); f != nil {
			return f
		}
	}
	return nil
}

func TestParseXMLErrors(t *testing.T) {
	long := strings.Repeat("x", MaxXMLStrLen+1)
	cases := []struct {
		name string
		in   string
		line int // 0: no meaningful line
		msgs []string
	}{
		{"empty input", "", 0, []string{"no <system>"}},
		{"only whitespace and comments", "  \r\n<!-- x -->\n", 0, []string{"no <system>"}},
		{"only unknown elements", "<foo/>\n", 0, []string{"no <system>"}},
		{"tab between elements", "<system version=\"1\">\n  <cpu numaid=\"0\"/>\n\t<cpu numaid=\"1\"/>\n</system>\n", 3, []string{"tab"}},
		{"tab before the root", "\t<system version=\"1\"/>", 1, []string{"tab"}},
		{"tab inside a tag", "<system version=\"1\">\n<cpu\tnumaid=\"0\"/>\n</system>\n", 2, []string{"tab"}},
		{"tab before an attribute", "<system version=\"1\">\n<cpu \tnumaid=\"0\"/>\n</system>\n", 2, []string{"tab"}},
		{"newline between attributes", "<system version=\"1\">\n<cpu numaid=\"0\"\n arch=\"x86_64\"/>\n</system>\n", 2, []string{"expected '>'"}},
		{"CR LF between attributes", "<system version=\"1\">\r\n<cpu numaid=\"0\"\r\n arch=\"x86_64\"/>\r\n</system>\r\n", 2, []string{"expected '>'"}},
		{"newline after element name", "<system version=\"1\">\n\n<cpu\nnumaid=\"0\"/>\n</system>\n", 3, []string{"expected '>'"}},
		{"two spaces then newline", "<system version=\"1\">\n<cpu numaid=\"0\" \n/>\n</system>\n", 2, []string{"expected '>'"}},
		{"XML declaration", "<?xml version=\"1.0\"?>\n<system version=\"1\"/>\n", 1, []string{"XML declaration"}},
		{"XML declaration after a comment", "<!-- c -->\n<?xml version=\"1.0\"?>\n<system version=\"1\"/>\n", 2, []string{"<?"}},
		{"value of 256 characters", "<system version=\"1\">\n<cpu numaid=\"0\"/>\n<cpu numaid=\"" + long + "\"/>\n</system>\n", 3, []string{"longer than 255"}},
		{"value of 256 characters after a multi-line value", "<system version=\"1\" name=\"a\nb\">\n<cpu numaid='" + long + "'/>\n</system>\n", 3, []string{"longer than 255"}},
		{"unterminated value", "<system version=\"1\">\n<cpu numaid=\"0/>\n</system>\n", 2, []string{"unterminated"}},
		{"unquoted value", "<system version=\"1\">\n<cpu numaid=0/>\n</system>\n", 2, []string{"quoted"}},
		{"mixed quotes", "<system version=\"1\">\n<cpu numaid=\"0'/>\n</system>\n", 2, []string{"unterminated"}},
		{"element name of 256 characters", "<system version=\"1\">\n<" + long + "/>\n</system>\n", 2, []string{"longer than 255"}},
		{"attribute name of 256 characters", "<system version=\"1\">\n<cpu " + long + "=\"0\"/>\n</system>\n", 2, []string{"longer than 255"}},
		{"closing tag name of 256 characters", "<system version=\"1\">\n</" + long + ">\n", 2, []string{"longer than 255"}},
		{"empty attribute name", "<system version=\"1\">\n<cpu =\"0\"/>\n</system>\n", 2, []string{"empty name"}},
		{"empty element name", "<system version=\"1\">\n< cpu/>\n</system>\n", 2, []string{"empty element name"}},
		{"equals after element name", "<system version=\"1\">\n<cpu=\"0\"/>\n</system>\n", 2, []string{"'='"}},
		{"junk after slash", "<system version=\"1\">\n<cpu numaid=\"0\"/ >\n</system>\n", 2, []string{"expected '>'"}},
		{"junk after value", "<system version=\"1\">\n<cpu numaid=\"0\"arch=\"x\"/>\n</system>\n", 2, []string{"expected '>'"}},
		{"mismatched closing tag", "<system version=\"1\">\n<cpu numaid=\"0\">\n<nic>\n</cpu>\n</system>\n", 4, []string{"</cpu>", "<nic>", "line 3"}},
		{"mismatched closing tag in an ignored element", "<system version=\"1\">\n<foo>\n<bar>\n</foo>\n</system>\n", 4, []string{"</foo>", "<bar>", "line 3"}},
		{"space in closing tag", "<system version=\"1\">\n</system >\n", 2, []string{"closing tag"}},
		{"closing tag without opening", "\n</system>\n", 2, []string{"without an opening tag"}},
		{"root never closed", "<system version=\"1\">\n<cpu numaid=\"0\"/>\n", 1, []string{"never closed"}},
		{"ignored element never closed", "<system version=\"1\">\n<cpu numaid=\"0\"/>\n</system>\n<foo>\n<bar/>\n", 4, []string{"never closed"}},
		{"unterminated comment", "<system version=\"1\">\n<cpu numaid=\"0\"/>\n<!-- not closed\n-- >\n</system>\n", 3, []string{"unterminated comment"}},
		{"unterminated comment before root", "<!--", 1, []string{"unterminated comment"}},
		{"non-UTF-8 byte", "<system version=\"1\">\n<cpu numaid=\"0\"/>\n<cpu affinity=\"\xff\"/>\n</system>\n", 3, []string{"UTF-8"}},
		{"non-UTF-8 byte in a comment", "<system version=\"1\">\n<!--\n\n \xc3( -->\n</system>\n", 4, []string{"UTF-8"}},
		{"truncated UTF-8 at end of file", "<system version=\"1\"/>\n\xe2\x82", 2, []string{"UTF-8"}},
		{"text content", "<system version=\"1\">\n<cpu numaid=\"0\">hello</cpu>\n</system>\n", 2, []string{"text content"}},
		{"text content after root", "<system version=\"1\"/>\n\nx\n", 3, []string{"text content"}},
		{"no version", "\n<system name=\"x\">\n<cpu numaid=\"0\"/>\n</system>\n", 2, []string{"version"}},
		{"version 3", "<system version=\"3\"/>", 1, []string{"version", "3"}},
		{"version 0x10", "<system version=\"0x10\"/>", 1, []string{"version"}},
		{"version empty", "<system version=\"\"/>", 1, []string{"version"}},
		{"version 2 (RCCL)", "<system version=\"2\">\n<cpu numaid=\"0\"/>\n</system>\n", 1, []string{"RCCL"}},
		{"257 elements", "<system version=\"1\">\n" + strings.Repeat("<cpu numaid=\"0\"/>\n", MaxTopologyXMLNodes) + "</system>\n", MaxTopologyXMLNodes + 1, []string{"more than 256 elements"}},
		{"attribute value unterminated at EOF", "<system version=\"1", 1, []string{"unterminated"}},
		{"EOF in element name", "<system version=\"1\">\n<cp", 2, []string{"end of file"}},
		{"EOF after value", "<system version=\"1\"", 1, []string{"end of file"}},
		{"EOF after slash", "<system version=\"1\"/", 1, []string{"end of file"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, _, err := parseTestXML(c.in)
			require.Nil(t, root)
			pe := requireXMLParseError(t, err, c.line, c.msgs...)
			if c.line == 0 {
				require.Equal(t, 0, pe.Line)
			}
		})
	}
}

func TestParseTopologyVersion(t *testing.T) {
	_, _, err := parseTestXML("<system version=\"2\">\n<cpu numaid=\"0\"/>\n</system>\n")
	require.True(t, errors.Is(err, ErrUnsupportedTopology), "%v", err)
	require.Contains(t, err.Error(), "test.xml:1:")

	_, _, err = parseTestXML("<system version=\"3\"/>")
	require.True(t, errors.Is(err, ErrUnsupportedTopology), "%v", err)
	require.NotContains(t, err.Error(), "RCCL")

	// A missing version is malformed, not another dialect.
	_, _, err = parseTestXML("<system/>")
	require.False(t, errors.Is(err, ErrUnsupportedTopology), "%v", err)
	requireXMLParseError(t, err, 1, "version")

	// The generic parser does not check versions.
	root, _, err := ParseXML(strings.NewReader(`<system version="7"/>`), "test.xml", TopologyGrammar)
	require.NoError(t, err)
	require.Equal(t, "system", root.Name)
}

// TestParseXMLTruncated cuts a small valid file at every byte offset: every
// cut before the root is closed is an error naming the file, every later cut
// gives the full tree, and nothing panics.
func TestParseXMLTruncated(t *testing.T) {
	full := "<!-- c -->\r\n<system version=\"1\" name='x'>\n" +
		"  <cpu numaid=\"0\" arch=\"x86_64\">\n" +
		"    <pci busid=\"0000:01:00.0\" class=\"0x060400\" >\n" +
		"      <gpu dev=\"0\" sm=\"90\" rank=\"0\" gdr=\"1\">\n" +
		"        <nvlink target=\"fffffff:ffff:ff\" count=\"18\" tclass=\"0x068000\"/>\n" +
		"        <foo/>\n" +
		"      </gpu>\n" +
		"    </pci>\n" +
		"  </cpu>\n" +
		"</system>\n"
	want, _, err := parseTestXML(full)
	require.NoError(t, err)
	closeEnd := strings.Index(full, "</system>") + len("</system>")
	for i := 0; i <= len(full); i++ {
		root, _, err := parseTestXML(full[:i])
		if i >= closeEnd {
			require.NoError(t, err, "cut at %d", i)
			require.Empty(t, xmlTreeDiff(want, root), "cut at %d", i)
			continue
		}
		require.Nil(t, root, "cut at %d", i)
		pe := requireXMLParseError(t, err, 0)
		if i > strings.Index(full, "<system") {
			require.Positive(t, pe.Line, "cut at %d: %v", i, err)
		}
	}
}

func TestParseXMLManyElements(t *testing.T) {
	// 10^6 tiny elements (6 MB): stopped at NCCL's element limit.
	in := "<system version=\"1\">" + strings.Repeat("<cpu/>", 1000000) + "</system>"
	_, _, err := parseTestXML(in)
	requireXMLParseError(t, err, 1, "more than 256 elements")

	// 10^6 ignored elements parse, but the warnings stay bounded.
	in = "<system version=\"1\">" + strings.Repeat("<x/>\n", 1000000) + "</system>"
	root, warns, err := parseTestXML(in)
	require.NoError(t, err)
	require.Equal(t, "system", root.Name)
	require.NotEmpty(t, warns)
	require.LessOrEqual(t, len(warns), 1001)
	require.Contains(t, warns[len(warns)-1].Msg, "more warnings")

	// Deeply nested ignored elements.
	in = "<system version=\"1\"><x>" + strings.Repeat("<y>", 500000) + strings.Repeat("</y>", 500000) + "</x></system>"
	_, _, err = parseTestXML(in)
	require.NoError(t, err)
	in = "<system version=\"1\"><x>" + strings.Repeat("<y>", 500000) + "</x></system>"
	_, _, err = parseTestXML(in)
	requireXMLParseError(t, err, 1, "does not match")

	// Accepted elements nested as deep as the element limit allows.
	in = "<system version=\"1\"><cpu>" + strings.Repeat("<pci>", 300) + strings.Repeat("</pci>", 300) + "</cpu></system>"
	_, _, err = parseTestXML(in)
	requireXMLParseError(t, err, 1, "more than 256 elements")
}

func TestParseXMLSizeCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("<system version=\"1\">\n")
	for b.Len() <= maxXMLFileBytes {
		b.WriteString(strings.Repeat(" ", 1023) + "\n")
	}
	b.WriteString("</system>\n")
	_, _, err := parseTestXML(b.String())
	requireXMLParseError(t, err, 0, "larger than")

	// Just under the cap is fine.
	in := "<system version=\"1\">" + strings.Repeat(" ", maxXMLFileBytes-len("<system version=\"1\"></system>")) + "</system>"
	require.Len(t, in, maxXMLFileBytes)
	_, _, err = parseTestXML(in)
	require.NoError(t, err)
}

func TestReadTopologyFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.xml")
	require.NoError(t, os.WriteFile(p, []byte("<system version=\"1\">\n\t</system>\n"), 0o644))
	_, _, err := ReadTopologyFile(p)
	var pe *ParseError
	require.True(t, errors.As(err, &pe), "%v", err)
	require.Equal(t, p, pe.File)
	require.Equal(t, 2, pe.Line)

	_, _, err = ReadTopologyFile(filepath.Join(dir, "missing.xml"))
	require.Error(t, err)
	require.True(t, errors.Is(err, os.ErrNotExist), "%v", err)
}

func TestParseGraphGrammar(t *testing.T) {
	in := "<graphs version=\"1\">\n  <graph id=\"0\">\n    <channel>\n      <net dev=\"0\"/>\n      <gpu dev=\"1\"/>\n" +
		"      <pci/>\n    </channel>\n  </graph>\n</graphs>\n"
	root, warns, err := ParseXML(strings.NewReader(in), "g.xml", GraphGrammar)
	require.NoError(t, err)
	require.Len(t, warns, 1)
	require.Equal(t, 6, warns[0].Line)
	require.Empty(t, xmlTreeDiff(xmlEl("graphs", "version", "1")(xmlEl("graph", "id", "0")(xmlEl("channel")(
		xmlEl("net", "dev", "0")(), xmlEl("gpu", "dev", "1")()))), root))

	// A topology is not a graph file.
	_, _, err = ParseXML(strings.NewReader(`<system version="1"/>`), "g.xml", GraphGrammar)
	require.ErrorContains(t, err, "no <graphs>")
}

func TestWriteXMLFormat(t *testing.T) {
	root := xmlEl("system", "version", "1")(
		xmlEl("cpu", "numaid", "0", "affinity", "ff")(
			xmlEl("pci", "busid", "0000:01:00.0")(xmlEl("gpu", "dev", "0")()),
			xmlEl("nic")(),
		),
	)
	want := "<system version=\"1\">\n" +
		"  <cpu numaid=\"0\" affinity=\"ff\">\n" +
		"    <pci busid=\"0000:01:00.0\">\n" +
		"      <gpu dev=\"0\"/>\n" +
		"    </pci>\n" +
		"    <nic/>\n" +
		"  </cpu>\n" +
		"</system>\n"
	require.Equal(t, want, xmlString(t, root))

	// Values NCCL reads back verbatim are written as they are.
	for _, v := range []string{"", "it's", "<a>", "a b", "a\tb", "a\nb", "/>", "é", strings.Repeat("v", MaxXMLStrLen)} {
		r := NewElement("system", "version", "1", "name", v)
		out := xmlString(t, r)
		back, _, err := parseTestXML(out)
		require.NoError(t, err, "%q", out)
		require.Empty(t, xmlTreeDiff(r, back), "%q", v)
	}
}

func TestWriteXMLRefusesUnwritable(t *testing.T) {
	cases := []struct {
		name string
		root *Element
	}{
		{"value with double quote", NewElement("system", "version", "1", "name", `a"b`)},
		{"value too long", NewElement("system", "name", strings.Repeat("v", MaxXMLStrLen+1))},
		{"value not UTF-8", NewElement("system", "name", "\xff")},
		{"empty element name", NewElement("")},
		{"element name with space", NewElement("a b")},
		{"element name with slash", NewElement("a/")},
		{"element name too long", NewElement(strings.Repeat("e", MaxXMLStrLen+1))},
		{"empty attribute name", NewElement("system", "", "1")},
		{"attribute name with space", NewElement("system", "a b", "1")},
		{"attribute name with equals", NewElement("system", "a=b", "1")},
		{"attribute name with quote", NewElement("system", "a'", "1")},
		{"attribute name with tab", NewElement("system", "a\tb", "1")},
		{"attribute name with newline", NewElement("system", "a\nb", "1")},
		{"deep child", xmlEl("system", "version", "1")(xmlEl("cpu")(xmlEl("pci", "busid", `"`)()))},
		{"nil child", xmlEl("system", "version", "1")(xmlEl("cpu")(), nil)},
		{"last of many children", xmlEl("system", "version", "1")(append(repeatXMLElement(xmlEl("cpu", "numaid", "0")(), 1000), NewElement("cpu", "numaid", `"`))...)},
	}
	require.ErrorContains(t, WriteXML(io.Discard, nil), "write XML")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			err := WriteXML(&b, c.root)
			require.Error(t, err)
			require.Contains(t, err.Error(), "write XML")
			require.Zero(t, b.Len(), "partial output")
		})
	}
}
