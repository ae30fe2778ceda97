// Package search will hold NCCL's channel search and tuner (ncclTopoCompute,
// ring/tree wiring, tuning tables): topology -> model.Plan. It is not written
// yet; see the project's issues.
package search
