//go:build !cgo

// Command plugin is twinccl's NCCL profiler plugin; it needs cgo (it is a
// C shared library), so a build without cgo has nothing in it.
package main

func main() {}
