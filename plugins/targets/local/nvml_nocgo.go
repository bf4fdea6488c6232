//go:build !cgo

package local

import (
	"github.com/kbplatform/kbplatform/internal/contract"
	"github.com/kbplatform/kbplatform/sdk"
)

// Built without cgo (the kbplatform binary itself): no NVML; nvidia-smi gives the GPU half.
const nvmlAvailable = false

type nvmlGPU struct {
	Name   string
	Driver string
}

func nvmlDevices() []nvmlGPU { return nil }

func hostInfo(device string) sdk.Fingerprint { return contract.DefaultHostInfo(device) }
