// Package twinccl is a collective-communication stack for GPU clusters with
// one model and two executors: a hardware executor (exec/hw) and a
// discrete-event simulator (exec/sim) that run the same protocol programs
// over the topology model of package model.
//
// This root package only carries the topologies we recorded ourselves
// (testdata/xml), embedded so that the commands work on a fresh machine
// without any input file.
package twinccl

import (
	"embed"
	"io/fs"
	"sort"
)

//go:embed testdata/xml/*.xml
var recorded embed.FS

// DefaultTopology is the name of the embedded topology used when a command
// is given no file: an NCCL 2.28.9 dump of our GPU machine (2x H200 on
// NVSwitch, see testdata/xml/README.md).
const DefaultTopology = "h200x2-nvswitch.xml"

// RecordedTopology returns the bytes of an embedded topology XML by name.
func RecordedTopology(name string) ([]byte, error) {
	return recorded.ReadFile("testdata/xml/" + name)
}

// RecordedTopologies lists the names of the embedded topology XMLs.
func RecordedTopologies() []string {
	entries, _ := fs.ReadDir(recorded, "testdata/xml")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}
