package hw

import (
	"github.com/twinccl/twinccl/model"
)

// xnode is one element of a topology XML under construction. It mirrors
// NCCL's ncclXmlNode: attributes in insertion order, children in document
// order and a parent pointer (nil while the node is detached).
type xnode struct {
	el      *model.Element // name and attributes; Children is filled by export
	parent  *xnode
	subs    []*xnode
	removed bool
}

// xdoc is a topology XML under construction. Like NCCL's node array, nodes
// keeps every node in creation order: NCCL's "find the first tag" lookups
// (xmlFindTag, xmlFindTagKv) scan that array, not the tree, so a node
// created earlier wins even when it sits later in the document.
type xdoc struct {
	nodes []*xnode
}

func (d *xdoc) root() *xnode {
	for _, n := range d.nodes {
		if !n.removed && n.parent == nil && n.el.Name == "system" {
			return n
		}
	}
	return nil
}

// add creates a node named name and appends it to parent's children when
// parent is not nil.
func (d *xdoc) add(parent *xnode, name string) *xnode {
	n := &xnode{el: &model.Element{Name: name}, parent: parent}
	d.nodes = append(d.nodes, n)
	if parent != nil {
		parent.subs = append(parent.subs, n)
	}
	return n
}

// findTag returns the first node (in creation order) named name.
func (d *xdoc) findTag(name string) *xnode {
	for _, n := range d.nodes {
		if !n.removed && n.el.Name == name {
			return n
		}
	}
	return nil
}

// findTagKv returns the first node (in creation order) named name whose
// attribute key equals value.
func (d *xdoc) findTagKv(name, key, value string) *xnode {
	for _, n := range d.nodes {
		if n.removed || n.el.Name != name {
			continue
		}
		if v, ok := n.el.Get(key); ok && v == value {
			return n
		}
	}
	return nil
}

func (n *xnode) get(key string) (string, bool) { return n.el.Get(key) }
func (n *xnode) set(key, value string)         { n.el.Set(key, value) }

// setIfUnset sets key only when the node does not have it yet (NCCL's
// xmlInitAttr* and xmlSetAttrIfUnset).
func (n *xnode) setIfUnset(key, value string) {
	if _, ok := n.el.Get(key); !ok {
		n.el.Set(key, value)
	}
}

func (n *xnode) has(key string) bool {
	_, ok := n.el.Get(key)
	return ok
}

// sub returns n's first child named name.
func (n *xnode) sub(name string) *xnode {
	for _, s := range n.subs {
		if s.el.Name == name {
			return s
		}
	}
	return nil
}

// subKv returns n's first child named name whose attribute key equals value.
func (n *xnode) subKv(name, key, value string) *xnode {
	for _, s := range n.subs {
		if s.el.Name != name {
			continue
		}
		if v, ok := s.el.Get(key); ok && v == value {
			return s
		}
	}
	return nil
}

// attachSorted makes child a child of parent, placed before the first
// sibling whose busid sorts after child's (siblings without a busid are
// skipped), as NCCL keeps PCI children ordered by bus id.
func attachSorted(parent, child *xnode) {
	child.parent = parent
	newID, _ := child.get("busid")
	idx := len(parent.subs)
	for i, s := range parent.subs {
		if id, ok := s.get("busid"); ok && newID < id {
			idx = i
			break
		}
	}
	parent.subs = append(parent.subs, nil)
	copy(parent.subs[idx+1:], parent.subs[idx:])
	parent.subs[idx] = child
}

// remove detaches n from its parent.
func (n *xnode) remove() {
	n.removed = true
	if n.parent == nil {
		return
	}
	p := n.parent
	for i, s := range p.subs {
		if s == n {
			p.subs = append(p.subs[:i], p.subs[i+1:]...)
			break
		}
	}
}

// trim applies NCCL's ncclTopoTrimXml: a node with keep="1" is kept (and
// loses the attribute) without looking further down; any other pci, cpu,
// nic or net node without a kept descendant is removed. It returns the number
// of kept nodes under n.
func trim(n *xnode) int {
	if v, ok := n.get("keep"); ok && v == "1" {
		n.el.Delete("keep")
		return 1
	}
	subs := append([]*xnode(nil), n.subs...)
	kept := 0
	for _, s := range subs {
		kept += trim(s)
	}
	if kept == 0 {
		switch n.el.Name {
		case "pci", "cpu", "nic", "net":
			n.remove()
		}
	}
	return kept
}

// export converts the tree under n into a model.Element tree.
func export(n *xnode) *model.Element {
	e := &model.Element{Name: n.el.Name, Attrs: append([]model.Attr(nil), n.el.Attrs...)}
	for _, s := range n.subs {
		e.Children = append(e.Children, export(s))
	}
	return e
}

// sameNode reports whether a and b match for fusion: same name, same number
// of attributes, and every attribute of b present in a with the same value
// (NCCL's xmlFindNode).
func sameNode(a *model.Element, b *model.Element) bool {
	if a.Name != b.Name || len(a.Attrs) != len(b.Attrs) {
		return false
	}
	for _, kv := range b.Attrs {
		if v, ok := a.Get(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// fuse merges src into dst the way NCCL fuses the XMLs of the local ranks
// (ncclTopoFuseXml): each child of src is matched against dst's children
// at the same level; a match is merged recursively, anything else is copied
// with its subtree and appended as dst's last child.
func fuse(dst, src *model.Element) {
	for _, s := range src.Children {
		var match *model.Element
		for _, d := range dst.Children {
			if sameNode(d, s) {
				match = d
				break
			}
		}
		if match == nil {
			dst.Children = append(dst.Children, clone(s))
		} else {
			fuse(match, s)
		}
	}
}

// clone returns a deep copy of e.
func clone(e *model.Element) *model.Element {
	c := &model.Element{Name: e.Name, Line: e.Line, Attrs: append([]model.Attr(nil), e.Attrs...)}
	for _, ch := range e.Children {
		c.Children = append(c.Children, clone(ch))
	}
	return c
}
