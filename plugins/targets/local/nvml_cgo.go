//go:build cgo

package local

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/kbplatform/kbplatform/internal/contract"
	"github.com/kbplatform/kbplatform/internal/cudadev"
	"github.com/kbplatform/kbplatform/sdk"
)

const nvmlAvailable = true

type nvmlGPU struct {
	Name   string
	Driver string
}

// nvmlDevices lists GPUs through NVML (nil when NVML cannot be loaded: no driver).
func nvmlDevices() []nvmlGPU {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil
	}
	defer nvml.Shutdown()
	driver, _ := nvml.SystemGetDriverVersion()
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil
	}
	var out []nvmlGPU
	for i := 0; i < n; i++ {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		name, _ := d.GetName()
		out = append(out, nvmlGPU{Name: name, Driver: driver})
	}
	return out
}

// hostInfo is the contract's host fingerprint with the GPU half read through NVML.
func hostInfo(device string) sdk.Fingerprint {
	fp := contract.BaseHostInfo(device)
	// The GPU the device names on this host (cudadev): an NVML index, or a UUID taken from
	// CUDA_VISIBLE_DEVICES. Not a CUDA device: the host's half alone.
	id, ok := cudadev.HostID(device)
	if !ok {
		return fp
	}
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return contract.DefaultHostInfo(device) // no NVML: nvidia-smi
	}
	defer nvml.Shutdown()
	var d nvml.Device
	var ret nvml.Return
	if idx, err := strconv.Atoi(id); err == nil {
		d, ret = nvml.DeviceGetHandleByIndex(idx)
	} else {
		d, ret = nvml.DeviceGetHandleByUUID(id)
	}
	if ret != nvml.SUCCESS {
		return contract.DefaultHostInfo(device)
	}
	idx, ret := d.GetIndex()
	if ret != nvml.SUCCESS {
		return contract.DefaultHostInfo(device)
	}
	fp["fingerprint_source"] = "nvml"
	if v, ret := nvml.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		fp["driver"] = v
	}
	if v, ret := d.GetName(); ret == nvml.SUCCESS {
		fp["gpu_name"] = v
	}
	fp["gpu_index"] = fmt.Sprint(idx)
	if v, ret := d.GetUUID(); ret == nvml.SUCCESS {
		fp["gpu_uuid"] = v
	}
	if v, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
		fp["gpu_pci_bus_id"] = pciBusID(v.BusId)
	}
	if v, ret := d.GetClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
		fp["sm_clock_mhz"] = fmt.Sprint(v)
	}
	if v, ret := d.GetClockInfo(nvml.CLOCK_MEM); ret == nvml.SUCCESS {
		fp["mem_clock_mhz"] = fmt.Sprint(v)
	}
	if v, ret := d.GetMaxClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
		fp["max_sm_clock_mhz"] = fmt.Sprint(v)
	}
	if v, ret := d.GetPowerManagementLimit(); ret == nvml.SUCCESS {
		fp["power_limit_w"] = fmt.Sprint(v / 1000)
	}
	if v, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
		fp["temperature_c"] = fmt.Sprint(v)
	}
	if v, ret := d.GetPerformanceState(); ret == nvml.SUCCESS {
		fp["pstate"] = fmt.Sprintf("P%d", int(v))
	}
	if maj, min, ret := d.GetCudaComputeCapability(); ret == nvml.SUCCESS {
		fp["nvml_compute_capability"] = fmt.Sprintf("%d.%d", maj, min)
	}
	return fp
}

// pciBusID reads NVML's NUL-terminated bus id.
func pciBusID(b [32]int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
