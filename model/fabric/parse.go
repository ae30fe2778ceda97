package fabric

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// ReadFile reads and checks a fabric file.
func ReadFile(path string) (*Fabric, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fabric: %w", err)
	}
	return Parse(path, data)
}

// Parse reads a fabric from YAML. name is the file name errors carry, with
// the line of the offending key: unknown keys, missing ones, values out of
// range and duplicates are all errors. An example:
//
//	name: 128 DGX H100, 8 rails, 4 scalable units
//	hosts: 128
//	leaf:
//	  kind: rail          # rail | tor
//	  hosts: 32           # hosts per leaf group
//	  uplinks: 32         # links from one leaf to the spine
//	  oversubscription: 1 # NIC-facing : spine-facing bandwidth
//	  latency_us: 0.3
//	spine:
//	  latency_us: 0.3
//	adaptive_routing: true
func Parse(name string, data []byte) (*Fabric, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty fabric file", name)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, fmt.Errorf("%s:%d: a second YAML document; a fabric file holds one", name, extra.Line)
	}
	p := parser{name: name}
	f := &Fabric{File: name}
	root := doc.Content[0]
	top, err := p.mapping(root, "the file", map[string]bool{"name": false, "hosts": false, "leaf": true, "spine": false, "adaptive_routing": false})
	if err != nil {
		return nil, err
	}
	if n := top["name"]; n != nil {
		if f.Name, err = p.str(n, "name"); err != nil {
			return nil, err
		}
	}
	if n := top["hosts"]; n != nil {
		if f.Hosts, err = p.integer(n, "hosts", 1, 1<<20); err != nil {
			return nil, err
		}
	}
	if n := top["adaptive_routing"]; n != nil {
		if f.AdaptiveRouting, err = p.boolean(n, "adaptive_routing"); err != nil {
			return nil, err
		}
	}
	leaf, err := p.mapping(top["leaf"], "leaf", map[string]bool{"kind": true, "hosts": true, "uplinks": false, "oversubscription": false, "latency_us": false})
	if err != nil {
		return nil, err
	}
	if f.Leaf.Kind, err = p.str(leaf["kind"], "leaf.kind"); err != nil {
		return nil, err
	}
	if f.Leaf.Kind != KindRail && f.Leaf.Kind != KindToR {
		return nil, p.errorf(leaf["kind"], "leaf.kind %q: want %s or %s", f.Leaf.Kind, KindRail, KindToR)
	}
	if f.Leaf.Hosts, err = p.integer(leaf["hosts"], "leaf.hosts", 1, 1<<20); err != nil {
		return nil, err
	}
	f.Leaf.Uplinks, f.Leaf.Oversubscription = 1, 1
	if n := leaf["uplinks"]; n != nil {
		if f.Leaf.Uplinks, err = p.integer(n, "leaf.uplinks", 1, 4096); err != nil {
			return nil, err
		}
	}
	if n := leaf["oversubscription"]; n != nil {
		if f.Leaf.Oversubscription, err = p.number(n, "leaf.oversubscription", 1, 1024); err != nil {
			return nil, err
		}
	}
	if n := leaf["latency_us"]; n != nil {
		if f.Leaf.LatencyUs, err = p.number(n, "leaf.latency_us", 0, 1e6); err != nil {
			return nil, err
		}
	}
	if n := top["spine"]; n != nil {
		sp, err := p.mapping(n, "spine", map[string]bool{"latency_us": false})
		if err != nil {
			return nil, err
		}
		f.Spine = &Spine{}
		if n := sp["latency_us"]; n != nil {
			if f.Spine.LatencyUs, err = p.number(n, "spine.latency_us", 0, 1e6); err != nil {
				return nil, err
			}
		}
	}
	if f.Spine == nil && f.Leaf.Kind == KindRail {
		return nil, p.errorf(leaf["kind"], "a rail leaf level needs a spine: traffic between rails crosses it")
	}
	if f.Spine == nil && (f.Leaf.Oversubscription != 1 || leaf["uplinks"] != nil) {
		return nil, p.errorf(root, "leaf.uplinks and leaf.oversubscription describe links to a spine, and the fabric has none")
	}
	if f.Hosts > 0 && f.Spine == nil && f.Hosts > f.Leaf.Hosts {
		return nil, p.errorf(top["hosts"], "%d hosts fill %d leaf groups of %d and the fabric has no spine to join them", f.Hosts, f.Groups(f.Hosts), f.Leaf.Hosts)
	}
	return f, nil
}

// parser turns YAML nodes into values, with errors that name the file and
// line.
type parser struct{ name string }

func (p parser) errorf(n *yaml.Node, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return fmt.Errorf("%s:%d: %s", p.name, line, fmt.Sprintf(format, args...))
}

// mapping reads a mapping whose keys must be among keys (true: required).
func (p parser) mapping(n *yaml.Node, what string, keys map[string]bool) (map[string]*yaml.Node, error) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, p.errorf(n, "%s must be a mapping of keys to values", what)
	}
	out := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if _, ok := keys[k.Value]; !ok {
			return nil, p.errorf(k, "unknown key %q in %s (known: %s)", k.Value, what, known(keys))
		}
		if _, dup := out[k.Value]; dup {
			return nil, p.errorf(k, "key %q given twice in %s", k.Value, what)
		}
		out[k.Value] = v
	}
	for _, k := range sortedKeys(keys) {
		if keys[k] && out[k] == nil {
			return nil, p.errorf(n, "%s lacks the required key %q", what, k)
		}
	}
	return out, nil
}

func (p parser) scalar(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", p.errorf(n, "%s must be a single value", what)
	}
	return n.Value, nil
}

func (p parser) str(n *yaml.Node, what string) (string, error) {
	return p.scalar(n, what)
}

func (p parser) integer(n *yaml.Node, what string, lo, hi int) (int, error) {
	s, err := p.scalar(n, what)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		return 0, p.errorf(n, "%s %q: want an integer in %d..%d", what, s, lo, hi)
	}
	return v, nil
}

func (p parser) number(n *yaml.Node, what string, lo, hi float64) (float64, error) {
	s, err := p.scalar(n, what)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || v < lo || v > hi {
		return 0, p.errorf(n, "%s %q: want a number in %g..%g", what, s, lo, hi)
	}
	return v, nil
}

func (p parser) boolean(n *yaml.Node, what string) (bool, error) {
	s, err := p.scalar(n, what)
	if err != nil {
		return false, err
	}
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, p.errorf(n, "%s %q: want true or false", what, s)
}
