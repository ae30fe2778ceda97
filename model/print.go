package model

import (
	"fmt"
	"io"
	"strings"
)

// NCCLLogPrefix starts every line NCCL logs for rank 0 at INFO level.
const NCCLLogPrefix = "[0] NCCL INFO "

// PrintSystem writes the system in the form of NCCL's topology log
// (ncclTopoPrint): the header with the search bounds, the tree walked from
// every CPU, then the paths from every GPU and NET. Each line starts with
// prefix (NCCLLogPrefix to match NCCL's logs byte for byte).
func PrintSystem(w io.Writer, s *System, prefix string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s=== System : maxBw %.1f totalBw %.1f ===\n", prefix, s.MaxBW, s.TotalBW)
	for _, c := range s.Nodes[CPU] {
		printTree(&b, prefix, c, nil, "")
	}
	fmt.Fprintf(&b, "%s==========================================\n", prefix)
	for _, t := range []NodeType{GPU, NET} {
		for _, n := range s.Nodes[t] {
			b.WriteString(prefix + n.Name() + " :")
			for pt := range n.Paths {
				if n.Paths[pt] == nil {
					continue
				}
				for i, m := range s.Nodes[pt] {
					p := &n.Paths[pt][i]
					fmt.Fprintf(&b, "%s (%d/%.1f/%s) ", m.Name(), p.Count(), p.BW, p.Type)
				}
			}
			b.WriteString("\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// nodeLabel is the node's name with the details NCCL prints beside it.
func nodeLabel(n *Node) string {
	switch n.Type {
	case GPU:
		return fmt.Sprintf("%s (%d)", n.Name(), n.GPU.Rank)
	case CPU:
		return fmt.Sprintf("%s (%d/%d/%d)", n.Name(), n.CPU.Arch, n.CPU.Vendor, n.CPU.Model)
	case PCI:
		return fmt.Sprintf("%s (%x)", n.Name(), n.Device)
	case NET:
		return fmt.Sprintf("%s (%d/%x/%d/%f)", n.Name(), n.NET.CollSupport, n.NET.Asic, n.NET.Port, n.NET.BW)
	}
	return n.Name()
}

// printTree prints n and, recursively, the nodes below it through PCI
// links (ncclTopoPrintRec). lead is the text printed before n on its line;
// n's own links are indented by as many blanks.
func printTree(b *strings.Builder, prefix string, n, prev *Node, lead string) {
	b.WriteString(prefix + lead + nodeLabel(n) + "\n")
	indent := strings.Repeat(" ", len(lead))
	for _, l := range n.Links {
		head := fmt.Sprintf("+ %s[%.1f] - ", l.Type, l.BW)
		switch {
		case l.Type == LinkLOC:
			b.WriteString(prefix + indent + head + l.Remote.Name() + "\n")
		case l.Type == LinkPCI && l.Remote == prev:
		case l.Type == LinkPCI:
			printTree(b, prefix, l.Remote, n, indent+head)
		case l.Remote.Type == NET:
			b.WriteString(prefix + indent + head + nodeLabel(l.Remote) + "\n")
		default:
			b.WriteString(prefix + indent + head + l.Remote.Name() + "\n")
		}
	}
}
