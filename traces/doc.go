// Package traces holds twinccl's trace files and what converts to and from
// them: versioned parquet schemas for call traces (one row per collective
// call per rank) and event traces (one row per primitive step), streaming
// writers and readers with per-rank and per-call indexes, importers for
// NCCL_DEBUG=INFO logs and CSV/JSON call traces, and exporters to
// Chrome/Perfetto timelines, pprof profiles and summary tables. Every size a
// file claims is checked before anything is allocated for it.
package traces
