package model

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// Limits of NCCL's XML parser (xml.h). Exceeding a structural limit is an
// error; extra attributes are dropped with a warning, as NCCL does.
const (
	MaxXMLStrLen        = 255     // longest element name, attribute key or value (MAX_STR_LEN-1)
	MaxXMLAttrs         = 16      // attributes kept per element (MAX_ATTR_COUNT)
	MaxXMLChildren      = 640     // children per element (MAX_SUBS)
	MaxTopologyXMLNodes = 256     // elements in a topology XML (NCCL_TOPO_XML_MAX_NODES)
	MaxGraphXMLNodes    = 65536   // elements in a graph XML (NCCL_GRAPH_XML_MAX_NODES)
	maxXMLFileBytes     = 8 << 20 // refuse files larger than this before parsing
	maxXMLWarnings      = 1000    // warnings kept per file; one more says the rest were dropped
)

// Attr is one attribute of an Element, kept in document order.
type Attr struct {
	Key   string
	Value string
}

// Element is one element of an NCCL XML document (topology or graph file).
// Attributes keep their order so that a file read and written again is
// stable; Line is the 1-based line of the opening tag in the source (0 for
// elements built in memory).
type Element struct {
	Name     string
	Attrs    []Attr
	Children []*Element
	Line     int
}

// NewElement returns an element with the given name and key/value pairs
// (kv must have an even length).
func NewElement(name string, kv ...string) *Element {
	e := &Element{Name: name}
	for i := 0; i+1 < len(kv); i += 2 {
		e.Attrs = append(e.Attrs, Attr{kv[i], kv[i+1]})
	}
	return e
}

// Get returns the value of attribute key and whether it is present.
func (e *Element) Get(key string) (string, bool) {
	for _, a := range e.Attrs {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

// Set replaces the value of attribute key, or appends it when absent.
func (e *Element) Set(key, value string) {
	for i := range e.Attrs {
		if e.Attrs[i].Key == key {
			e.Attrs[i].Value = value
			return
		}
	}
	e.Attrs = append(e.Attrs, Attr{key, value})
}

// Delete removes attribute key if present.
func (e *Element) Delete(key string) {
	for i := range e.Attrs {
		if e.Attrs[i].Key == key {
			e.Attrs = append(e.Attrs[:i], e.Attrs[i+1:]...)
			return
		}
	}
}

// Add appends child to e's children and returns child.
func (e *Element) Add(child *Element) *Element {
	e.Children = append(e.Children, child)
	return child
}

// ChildrenNamed returns e's children called name, in document order.
func (e *Element) ChildrenNamed(name string) []*Element {
	var out []*Element
	for _, c := range e.Children {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// Clone returns a deep copy of e.
func (e *Element) Clone() *Element {
	c := &Element{Name: e.Name, Line: e.Line, Attrs: append([]Attr(nil), e.Attrs...)}
	for _, ch := range e.Children {
		c.Children = append(c.Children, ch.Clone())
	}
	return c
}

// Grammar says which elements a document accepts: the root element name and,
// for each element, the names of the children it may contain. An element
// found anywhere else is skipped with its whole subtree and reported as a
// warning, as NCCL's parser does ("Ignoring element").
type Grammar struct {
	Root     string
	Children map[string][]string
	MaxNodes int
}

// TopologyGrammar is the nesting NCCL accepts in a topology XML (xml.cc).
var TopologyGrammar = Grammar{
	Root: "system",
	Children: map[string][]string{
		"system": {"cpu"},
		"cpu":    {"pci", "nic"},
		"pci":    {"pci", "gpu", "nic", "pcilink"},
		"gpu":    {"nvlink", "c2c"},
		"nic":    {"net"},
	},
	MaxNodes: MaxTopologyXMLNodes,
}

// GraphGrammar is the nesting NCCL accepts in a graph XML (NCCL_GRAPH_FILE).
var GraphGrammar = Grammar{
	Root: "graphs",
	Children: map[string][]string{
		"graphs":  {"graph"},
		"graph":   {"channel"},
		"channel": {"net", "gpu"},
	},
	MaxNodes: MaxGraphXMLNodes,
}

func (g Grammar) accepts(parent, child string) bool {
	if parent == "" {
		return child == g.Root
	}
	for _, c := range g.Children[parent] {
		if c == child {
			return true
		}
	}
	return false
}

// ParseError is a malformed-input error that names the file and line.
type ParseError struct {
	File string
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Warning is a non-fatal remark about an input file (an ignored element, a
// dropped attribute), with its location.
type Warning struct {
	File string
	Line int
	Msg  string
}

func (w Warning) String() string { return fmt.Sprintf("%s:%d: %s", w.File, w.Line, w.Msg) }

// ParseXML reads one NCCL XML document with NCCL's parser rules: attribute
// values in single or double quotes, comments skipped, only spaces, CR and LF
// between elements, one attribute separator per space, no XML declaration.
// Elements that g does not accept at their place are skipped with a warning.
// file names the input in errors and warnings.
func ParseXML(r io.Reader, file string, g Grammar) (*Element, []Warning, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxXMLFileBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: read: %w", file, err)
	}
	if len(data) > maxXMLFileBytes {
		return nil, nil, &ParseError{File: file, Msg: fmt.Sprintf("file larger than %d bytes; not an NCCL XML", maxXMLFileBytes)}
	}
	if !utf8.Valid(data) {
		line := 1 + bytes.Count(data[:firstInvalidUTF8(data)], []byte{'\n'})
		return nil, nil, &ParseError{File: file, Line: line, Msg: "invalid UTF-8"}
	}
	p := &xmlParser{data: data, line: 1, file: file, g: g}
	root, err := p.parseDocument()
	if err != nil {
		return nil, p.warnings, err
	}
	return root, p.warnings, nil
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

type xmlParser struct {
	data     []byte
	pos      int
	line     int
	file     string
	g        Grammar
	nodes    int
	warnings []Warning
}

type tokenKind int

const (
	tokNone   tokenKind = iota // end of input
	tokOpen                    // <name ...>
	tokSingle                  // <name .../>
	tokClose                   // </name>
)

type xmlToken struct {
	kind  tokenKind
	name  string
	attrs []Attr
	line  int
}

func (p *xmlParser) errorf(line int, format string, args ...any) error {
	return &ParseError{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

func (p *xmlParser) warnf(line int, format string, args ...any) {
	switch {
	case len(p.warnings) < maxXMLWarnings:
		p.warnings = append(p.warnings, Warning{File: p.file, Line: line, Msg: fmt.Sprintf(format, args...)})
	case len(p.warnings) == maxXMLWarnings:
		p.warnings = append(p.warnings, Warning{File: p.file, Line: line, Msg: fmt.Sprintf("more than %d warnings; no more warnings reported for this file", maxXMLWarnings)})
	}
}

// lastLine is the line of the last character read: a newline belongs to the
// line it ends.
func (p *xmlParser) lastLine() int {
	if p.pos > 0 && p.data[p.pos-1] == '\n' {
		return p.line - 1
	}
	return p.line
}

func (p *xmlParser) next() (byte, bool) {
	if p.pos >= len(p.data) {
		return 0, false
	}
	c := p.data[p.pos]
	p.pos++
	if c == '\n' {
		p.line++
	}
	return c, true
}

func (p *xmlParser) mustNext(what string) (byte, error) {
	c, ok := p.next()
	if !ok {
		return 0, p.errorf(p.line, "unexpected end of file in %s", what)
	}
	return c, nil
}

// word reads a name or key up to a delimiter (space, '>', '/', CR, LF or '=')
// and returns it with the delimiter.
func (p *xmlParser) word(what string) (string, byte, error) {
	start := p.pos
	for {
		c, err := p.mustNext(what)
		if err != nil {
			return "", 0, err
		}
		switch c {
		case ' ', '>', '/', '\n', '\r', '=':
			w := string(p.data[start : p.pos-1])
			if len(w) > MaxXMLStrLen {
				return "", 0, p.errorf(p.lastLine(), "%s %.40q... is longer than %d characters", what, w, MaxXMLStrLen)
			}
			return w, c, nil
		case '\t':
			return "", 0, p.errorf(p.line, "tab character in %s (NCCL's parser accepts only single spaces inside a tag)", what)
		case '<':
			return "", 0, p.errorf(p.line, "unexpected '<' in %s", what)
		}
	}
}

// value reads a quoted attribute value after '='.
func (p *xmlParser) value(key string) (string, byte, error) {
	q, err := p.mustNext("attribute " + key)
	if err != nil {
		return "", 0, err
	}
	if q != '"' && q != '\'' {
		return "", 0, p.errorf(p.line, "attribute %s: value must be quoted, got %q", key, q)
	}
	startLine := p.line
	start := p.pos
	for {
		c, ok := p.next()
		if !ok {
			return "", 0, p.errorf(startLine, "attribute %s: unterminated quoted value", key)
		}
		if c == q {
			break
		}
		if p.pos-start > MaxXMLStrLen {
			return "", 0, p.errorf(startLine, "attribute %s: value longer than %d characters", key, MaxXMLStrLen)
		}
	}
	v := string(p.data[start : p.pos-1])
	last, err := p.mustNext("element")
	return v, last, err
}

func (p *xmlParser) skipComment() error {
	line := p.line
	idx := bytes.Index(p.data[p.pos:], []byte("-->"))
	if idx < 0 {
		return p.errorf(line, "unterminated comment")
	}
	for i := 0; i < idx+3; i++ {
		p.next()
	}
	return nil
}

// token reads the next tag, skipping whitespace and comments.
func (p *xmlParser) token() (xmlToken, error) {
	for {
		c, ok := p.next()
		for ok && (c == ' ' || c == '\n' || c == '\r') {
			c, ok = p.next()
		}
		if !ok {
			return xmlToken{kind: tokNone}, nil
		}
		line := p.line
		switch {
		case c == '\t':
			return xmlToken{}, p.errorf(line, "tab character between elements (NCCL's parser accepts only spaces, CR and LF there)")
		case c != '<':
			return xmlToken{}, p.errorf(line, "expected '<', got %q (text content is not allowed)", c)
		}
		if bytes.HasPrefix(p.data[p.pos:], []byte("!--")) {
			if err := p.skipComment(); err != nil {
				return xmlToken{}, err
			}
			continue
		}
		if bytes.HasPrefix(p.data[p.pos:], []byte("?")) {
			return xmlToken{}, p.errorf(line, "XML declaration or processing instruction: NCCL's parser does not accept <?...?>; remove it")
		}
		name, last, err := p.word("element name")
		if err != nil {
			return xmlToken{}, err
		}
		if name == "" && last == '/' {
			name, last, err = p.word("closing tag")
			if err != nil {
				return xmlToken{}, err
			}
			if last != '>' {
				return xmlToken{}, p.errorf(line, "unexpected %q in closing tag </%s>", last, name)
			}
			return xmlToken{kind: tokClose, name: name, line: line}, nil
		}
		if name == "" {
			return xmlToken{}, p.errorf(line, "empty element name")
		}
		if last == '=' {
			return xmlToken{}, p.errorf(line, "unexpected '=' after element name %q", name)
		}
		tok := xmlToken{kind: tokOpen, name: name, line: line}
		nAttrs := 0
		for last == ' ' {
			key, delim, err := p.word("attribute name")
			if err != nil {
				return xmlToken{}, err
			}
			if delim != '=' {
				// NCCL turns an extra space into an empty dummy attribute; it
				// counts toward the limit but carries nothing.
				nAttrs++
				last = delim
				continue
			}
			val, l, err := p.value(key)
			if err != nil {
				return xmlToken{}, err
			}
			last = l
			nAttrs++
			if key == "" {
				return xmlToken{}, p.errorf(line, "<%s>: attribute with an empty name", name)
			}
			if nAttrs > MaxXMLAttrs {
				p.warnf(line, "<%s>: ignoring attribute %s (NCCL keeps at most %d)", name, key, MaxXMLAttrs)
				continue
			}
			tok.attrs = append(tok.attrs, Attr{key, val})
		}
		if last == '/' {
			tok.kind = tokSingle
			c, err := p.mustNext("element")
			if err != nil {
				return xmlToken{}, err
			}
			last = c
		}
		if last != '>' {
			return xmlToken{}, p.errorf(p.lastLine(), "<%s>: expected '>', got %q (attributes must stay on one line, separated by single spaces)", name, last)
		}
		return tok, nil
	}
}

func (p *xmlParser) parseDocument() (*Element, error) {
	var root *Element
	for {
		tok, err := p.token()
		if err != nil {
			return nil, err
		}
		switch tok.kind {
		case tokNone:
			if root == nil {
				return nil, p.errorf(0, "no <%s> element", p.g.Root)
			}
			return root, nil
		case tokClose:
			return nil, p.errorf(tok.line, "closing tag </%s> without an opening tag", tok.name)
		}
		if tok.name != p.g.Root || root != nil {
			p.warnf(tok.line, "ignoring element <%s> at top level", tok.name)
			if err := p.skip(tok); err != nil {
				return nil, err
			}
			continue
		}
		root, err = p.element(tok)
		if err != nil {
			return nil, err
		}
	}
}

// element builds an accepted element and its accepted subtree.
func (p *xmlParser) element(tok xmlToken) (*Element, error) {
	p.nodes++
	if p.nodes > p.g.MaxNodes {
		return nil, p.errorf(tok.line, "more than %d elements (NCCL's limit for this kind of file)", p.g.MaxNodes)
	}
	e := &Element{Name: tok.name, Attrs: tok.attrs, Line: tok.line}
	if tok.kind == tokSingle {
		return e, nil
	}
	for {
		child, err := p.token()
		if err != nil {
			return nil, err
		}
		switch child.kind {
		case tokNone:
			return nil, p.errorf(tok.line, "<%s> is never closed", tok.name)
		case tokClose:
			if child.name != tok.name {
				return nil, p.errorf(child.line, "closing tag </%s> does not match <%s> opened at line %d", child.name, tok.name, tok.line)
			}
			return e, nil
		}
		if !p.g.accepts(tok.name, child.name) {
			p.warnf(child.line, "ignoring element <%s> inside <%s>", child.name, tok.name)
			if err := p.skip(child); err != nil {
				return nil, err
			}
			continue
		}
		if len(e.Children) == MaxXMLChildren {
			return nil, p.errorf(child.line, "<%s> has more than %d children", tok.name, MaxXMLChildren)
		}
		c, err := p.element(child)
		if err != nil {
			return nil, err
		}
		e.Children = append(e.Children, c)
	}
}

// skip consumes an ignored element and its subtree, still checking that it
// is well formed.
func (p *xmlParser) skip(tok xmlToken) error {
	if tok.kind == tokSingle {
		return nil
	}
	open := []xmlToken{tok}
	for len(open) > 0 {
		t, err := p.token()
		if err != nil {
			return err
		}
		top := open[len(open)-1]
		switch t.kind {
		case tokNone:
			return p.errorf(top.line, "<%s> is never closed", top.name)
		case tokOpen:
			open = append(open, t)
		case tokClose:
			if t.name != top.name {
				return p.errorf(t.line, "closing tag </%s> does not match <%s> opened at line %d", t.name, top.name, top.line)
			}
			open = open[:len(open)-1]
		}
	}
	return nil
}

// WriteXML writes root in NCCL's dump format: two spaces of indentation per
// level, attributes in stored order, childless elements as <tag .../>, no
// XML declaration. It refuses values NCCL could not read back.
// Nothing is written when some part of the tree cannot be.
func WriteXML(w io.Writer, root *Element) error {
	if err := checkElement(root); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	writeElement(bw, root, 0)
	return bw.Flush()
}

func checkElement(e *Element) error {
	if e == nil {
		return errors.New("write XML: nil element")
	}
	if err := checkWritable("element name", e.Name, true); err != nil {
		return err
	}
	for _, a := range e.Attrs {
		if err := checkWritable("attribute name in <"+e.Name+">", a.Key, true); err != nil {
			return err
		}
		if err := checkWritable("value of "+e.Name+"."+a.Key, a.Value, false); err != nil {
			return err
		}
	}
	for _, c := range e.Children {
		if err := checkElement(c); err != nil {
			return err
		}
	}
	return nil
}

func writeElement(w *bufio.Writer, e *Element, indent int) {
	w.WriteString(strings.Repeat(" ", indent))
	w.WriteString("<" + e.Name)
	for _, a := range e.Attrs {
		fmt.Fprintf(w, " %s=\"%s\"", a.Key, a.Value)
	}
	if len(e.Children) == 0 {
		w.WriteString("/>\n")
		return
	}
	w.WriteString(">\n")
	for _, c := range e.Children {
		writeElement(w, c, indent+2)
	}
	w.WriteString(strings.Repeat(" ", indent) + "</" + e.Name + ">\n")
}

func checkWritable(what, s string, isName bool) error {
	if isName && s == "" {
		return fmt.Errorf("write XML: empty %s", what)
	}
	if len(s) > MaxXMLStrLen {
		return fmt.Errorf("write XML: %s is longer than %d characters", what, MaxXMLStrLen)
	}
	bad := "\""
	if isName {
		bad = " \t\r\n<>/=\"'"
	}
	if i := strings.IndexAny(s, bad); i >= 0 {
		return fmt.Errorf("write XML: %s %q contains %q, which NCCL cannot read back", what, s, s[i])
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("write XML: %s is not valid UTF-8", what)
	}
	return nil
}

// ErrUnsupportedTopology reports a topology file in a dialect twinccl does
// not model (RCCL's version 2 format).
var ErrUnsupportedTopology = errors.New("unsupported topology format")

// ParseTopologyXML parses an NCCL topology XML and checks its <system>
// version, like NCCL's loader: version 1 only. RCCL's version 2 files
// (with xgmi links) are rejected with ErrUnsupportedTopology.
func ParseTopologyXML(r io.Reader, file string) (*Element, []Warning, error) {
	root, warns, err := ParseXML(r, file, TopologyGrammar)
	if err != nil {
		return nil, warns, err
	}
	v, ok := root.Get("version")
	if !ok {
		return nil, warns, &ParseError{File: file, Line: root.Line, Msg: "<system> has no version attribute (NCCL requires version=\"1\")"}
	}
	if n := cStrtol(v); n != 1 {
		msg := fmt.Sprintf("<system version=%q>: NCCL reads only version 1", v)
		if n == 2 {
			msg += "; version 2 is RCCL's (AMD) topology format, which twinccl does not model"
		}
		return nil, warns, fmt.Errorf("%w: %w", ErrUnsupportedTopology, &ParseError{File: file, Line: root.Line, Msg: msg})
	}
	return root, warns, nil
}

// ReadTopologyFile opens and parses an NCCL topology XML file.
func ReadTopologyFile(path string) (*Element, []Warning, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read topology: %w", err)
	}
	defer f.Close()
	return ParseTopologyXML(f, path)
}
