package rdma

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// SysfsRoot is where the kernel describes RDMA devices.
const SysfsRoot = "/sys/class/infiniband"

// GIDTypeFromSysfs reads the type of GID index of a device's port from
// root/<dev>/ports/<port>/gid_attrs/types/<index>, as NCCL does: "IB/RoCE
// v1" (GIDTypeIB on an IB port, RoCE v1 on an Ethernet one: NCCL counts
// both as version 1, and so does the GID selection), "RoCE v1" or "RoCE
// v2"; GIDTypeUnknown when the file is missing or unreadable (in a
// container it may be) or says something else.
func GIDTypeFromSysfs(root, dev string, port, index int) verbs.GIDType {
	b, err := os.ReadFile(filepath.Join(root, dev, "ports", fmt.Sprint(port), "gid_attrs", "types", fmt.Sprint(index)))
	if err != nil {
		return verbs.GIDTypeUnknown
	}
	s := strings.TrimSpace(string(b))
	switch {
	case strings.HasPrefix(s, "IB/RoCE v1"):
		return verbs.GIDTypeIB
	case strings.HasPrefix(s, "RoCE v1"):
		return verbs.GIDTypeRoCEv1
	case strings.HasPrefix(s, "RoCE v2"):
		return verbs.GIDTypeRoCEv2
	}
	return verbs.GIDTypeUnknown
}
