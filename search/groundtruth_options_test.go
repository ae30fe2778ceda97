package search

// groundTruthOptions are NCCL's defaults as shared/groundtruth/nccl-2.28.9
// was recorded with them: NCCL_NVLS_ENABLE=0 (its README).
func groundTruthOptions() Options {
	o := DefaultOptions()
	o.Search.NVLSEnable = false
	return o
}
