// Package traces will hold the parquet call and event trace schemas, their
// readers and writers, and the NCCL log and timeline importers/exporters. It
// is not written yet; see the project's issues.
package traces
