package ib

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twinccl/twinccl/exec/hw/auth"
	"github.com/twinccl/twinccl/exec/hw/ib/rdma"
	"github.com/twinccl/twinccl/exec/hw/ib/soft"
	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// ProviderEnv is the environment variable that picks the verbs provider
// of the ib plugin (see OpenProvider).
const ProviderEnv = "TWINCCL_IB_PROVIDER"

// Provider choices.
const (
	ProviderAuto = "auto"
	ProviderRDMA = "rdma"
	ProviderSoft = "soft"
)

// ParseProviderChoice checks a TWINCCL_IB_PROVIDER value: "rdma", "soft",
// or "auto" (also the empty string).
func ParseProviderChoice(v string) (string, error) {
	switch c := strings.ToLower(strings.TrimSpace(v)); c {
	case "", ProviderAuto:
		return ProviderAuto, nil
	case ProviderRDMA, ProviderSoft:
		return c, nil
	}
	return "", fmt.Errorf("%s=%q: want rdma, soft or auto", ProviderEnv, v)
}

// RDMADevices lists the devices of the real provider (libibverbs) that
// the ib plugin would use: those the NCCL_IB_HCA-style filter hca keeps
// whose port 1 is active. It fails when libibverbs cannot be used (no
// cgo build, library missing).
func RDMADevices(hca string) ([]string, error) {
	p, err := rdma.New()
	if err != nil {
		return nil, err
	}
	return activeDevices(p, hca)
}

func activeDevices(p verbs.Provider, hca string) ([]string, error) {
	names, err := p.Devices()
	if err != nil {
		return nil, fmt.Errorf("list %s devices: %w", p.Name(), err)
	}
	var out []string
	for _, n := range SelectHCA(names, hca) {
		ctx, err := p.Open(n)
		if err != nil {
			continue
		}
		if pa, err := ctx.QueryPort(1); err == nil && pa.Active {
			out = append(out, n)
		}
		ctx.Close()
	}
	return out, nil
}

// OpenProvider returns the verbs provider the ib plugin runs over, for a
// choice of ParseProviderChoice: "rdma" is libibverbs and needs a device
// (an active port 1 among the devices hca keeps); "soft" is the software
// provider, one device listening on host (a TCP test vehicle, not RDMA);
// "auto" is rdma when such a device exists, else soft. note says which
// was taken and why, for a log line. secret is the job's secret, which
// the soft provider's connections prove. The caller closes a provider
// that is an io.Closer (the soft one) after the plugin.
func OpenProvider(choice, host, hca string, secret auth.Secret) (p verbs.Provider, note string, err error) {
	if choice, err = ParseProviderChoice(choice); err != nil {
		return nil, "", err
	}
	if choice != ProviderSoft {
		devs, derr := RDMADevices(hca)
		if derr == nil && len(devs) == 0 {
			derr = fmt.Errorf("no RDMA device with an active port (HCA filter %q): %w", hca, verbs.ErrNoDevice)
		}
		if derr == nil {
			rp, _ := rdma.New()
			return rp, fmt.Sprintf("RDMA devices %v through libibverbs", devs), nil
		}
		if choice == ProviderRDMA {
			return nil, "", fmt.Errorf("%s=rdma: %w", ProviderEnv, derr)
		}
		if !errors.Is(derr, verbs.ErrNoDevice) {
			return nil, "", fmt.Errorf("ib plugin: %w", derr)
		}
		note = fmt.Sprintf("no RDMA device (%v): the software verbs provider stands in (TCP on %s, a test vehicle, not RDMA; %s=rdma refuses to run without a device)", derr, host, ProviderEnv)
	} else {
		note = fmt.Sprintf("the software verbs provider, as %s=soft asks (TCP on %s, a test vehicle, not RDMA)", ProviderEnv, host)
	}
	sp, err := soft.New(soft.Options{Host: host, Secret: secret})
	if err != nil {
		return nil, "", fmt.Errorf("ib plugin: software verbs provider: %w", err)
	}
	return sp, note, nil
}
