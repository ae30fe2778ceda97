// Package hw is twinccl's hardware runtime: everything that talks to real
// GPUs, NICs and the operating system. It is the only package of the
// repository that uses cgo.
//
// This first part discovers the local machine and writes its topology as the
// XML that NCCL 2.28.9 dumps with NCCL_TOPO_DUMP_FILE for a job that uses
// every visible GPU, one rank per GPU, ranks in NVML index order.
//
// The discovery logic (sysfs walking, NIC selection, XML assembly, per-rank
// trimming and fusion) is plain Go behind small interfaces ([NVML],
// [NVMLDevice], [CUDA]) and injectable roots ([Options]), so that it is tested
// with fake sysfs trees and fake devices. The cgo adapters live in files of
// their own: nvml.go (go-nvml; binaries must be linked with
// -ldflags=-extldflags=-Wl,-z,lazy) and cuda.go (libcuda through dlopen).
// Without cgo both adapters report that they are unavailable.
//
// How each attribute is obtained, and where it may differ from NCCL:
//
//   - <cpu host_hash>: NCCL's getHostHash: NCCL's 64-bit getHash (the
//     eatHash/digestHash mix of utils.h) of the host name followed by the
//     first word of /proc/sys/kernel/random/boot_id, or of $NCCL_HOSTID
//     alone when set. It changes at every boot; on the nvidia-h200-x2
//     machine it matched NCCL 2.28.9's own dump of the same boot.
//   - <cpu numaid affinity>: numa_node of the topmost PCI device under the
//     root complex, and /sys/devices/system/node/node<N>/cpumap when readable.
//   - <cpu vendor familyid modelid>: NCCL executes CPUID; we read
//     /proc/cpuinfo (vendor_id, cpu family, model) and convert the family
//     back to CPUID's base+extended form (family 0xF+ext becomes
//     15+(ext<<4), e.g. AMD Zen 2 "23" becomes 143).
//   - <gpu gdr>: NCCL uses cudaDevAttrGPUDirectRDMASupported. We read the
//     same attribute through the CUDA driver (cuDeviceGetAttribute, attribute
//     116) when libcuda can be loaded; otherwise gdr is 1 when a peer-memory
//     module (nvidia_peermem, nv_peer_mem) is loaded and 0 if not.
//   - <nvlink>: NCCL's loop: links 0..N-1 (N = 4, 6, 12 or 18 by SM
//     version) that are P2P-capable and active (field value
//     NVML_FI_DEV_NVLINK_GET_STATE from SM 9.0, nvmlDeviceGetNvLinkState
//     before), grouped by the remote bus id as NVML's legacy busId string
//     reports it (NVSwitches hidden in a VM read "fffffff:ff:ff.0"). tclass is
//     the remote device's sysfs class, or 0x068000 when the remote is not in
//     sysfs.
//   - <c2c bw count>: from SM 9.0, NVML field values C2C_LINK_COUNT,
//     C2C_LINK_GET_STATUS and C2C_LINK_GET_MAX_BW, as NCCL does.
//   - NICs: the IB plugin's devices from /sys/class/infiniband (active ports
//     with an InfiniBand or Ethernet link layer, NCCL_IB_HCA, ordered by PCI
//     address, speed from the port's rate, guid from sys_image_guid, ports
//     of one PCI device numbered as NCCL does). maxconn is the device's max_qp,
//     which sysfs does not show: we write 131072 (ConnectX-6 Dx and later).
//     NET gdr is 1 when a peer-memory module is loaded, or when DMA-BUF
//     looks usable (CUDA says the GPU supports it and the kernel is 5.12 or
//     later), an approximation of NCCL's verbs probe. Without an active RDMA
//     port the socket plugin's interfaces are used: NCCL_SOCKET_IFNAME,
//     otherwise "ib" interfaces, then anything but docker* and lo, then
//     docker*, then lo; at most 16; speed from /sys/class/net/X/speed (10000
//     when unknown); a NIC whose device is not a PCI device (virtio, none)
//     goes under the first <cpu> created.
//
// Element order follows NCCL's procedure rather than a sort: each rank's
// XML is built on its own (its GPU first, then every NIC; new PCI children
// inserted in bus-id order; a PCI switch is represented by its upstream
// port), trimmed, and the ranks' XMLs are then fused in rank order, where
// anything rank 0 did not have is appended at the end of its parent. That is
// why, in the H200 VM dump, the <nic> sits between the two GPUs' <pci>
// elements.
//
// Not verified on real hardware yet: RDMA NICs (no machine here has one;
// the IB path follows NCCL's current sources, including the PCI ordering of
// devices), multi-socket machines and Grace C2C links.
package hw
