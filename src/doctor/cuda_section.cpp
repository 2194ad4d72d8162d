// The CUDA section: is the driver library there and does it initialise, which GPUs it sees (name, PCI bus
// id, NUMA node), and what sysfs says about them (BAR1 size, NUMA node) even when the driver is missing.
#include <fmt/format.h>

#include "base/ascii.hpp"
#include "doctor/doctor_internal.hpp"
#include "platform/cuda/cuda_api.hpp"

namespace ferry::detail::doctor {
namespace {

const GpuPciDevice* sysfs_gpu(const DoctorContext& c, const std::string& bdf) {
  if (!c.sysfs_gpus) return nullptr;
  for (const GpuPciDevice& g : c.sysfs_gpus->gpus) {
    if (g.bdf == bdf) return &g;
  }
  return nullptr;
}

std::string numa_text(int node) { return node < 0 ? std::string("unknown") : std::to_string(node); }

}  // namespace

DoctorSection cuda_section(DoctorContext& c) {
  DoctorSection s{"cuda", "CUDA", CheckStatus::not_applicable, {}};
  c.cuda = c.gpu->cuda(&c.cuda_status);
  if (c.cuda == nullptr && c.cuda_status.ok()) c.cuda_status = Status(ErrorCode::unavailable, "CUDA is not usable");
  if (auto probe = probe_gpus_sysfs(c.env.root); probe.ok()) c.sysfs_gpus = std::move(*probe);

  DoctorCheck lib{"driver library", CheckStatus::ok, "", {}, ""};
  if (c.cuda == nullptr) {
    lib.status = CheckStatus::problem;
    lib.summary = "no usable CUDA driver: reads into GPU memory are impossible here; host reads still work";
    lib.evidence.push_back(c.cuda_status.message());
    lib.advice = "Install the NVIDIA driver (it provides libcuda.so.1) and check that `nvidia-smi` lists the "
                 "GPU; in a container, start it with the GPUs given to it (e.g. --gpus all).";
  } else {
    int version = 0;
    if (c.cuda->cuDriverGetVersion != nullptr) (void)c.cuda->cuDriverGetVersion(&version);
    lib.summary = fmt::format("{} loaded, CUDA driver API {}.{}", c.cuda->library, version / 1000,
                              (version % 1000) / 10);
    lib.evidence.push_back(fmt::format("cuDriverGetVersion: {}", version));
  }
  s.checks.push_back(std::move(lib));

  if (c.cuda != nullptr) {
    auto devices = list_devices(*c.cuda);
    if (devices.ok()) {
      c.devices = std::move(*devices);
    } else {
      c.devices_status = devices.status();
    }
  }
  if (c.cuda != nullptr && !c.devices_status.ok()) {
    s.checks.push_back({"GPUs", CheckStatus::problem, "the driver could not list its devices",
                        {c.devices_status.message()}, ""});
  } else if (c.cuda != nullptr && c.devices.empty()) {
    s.checks.push_back({"GPUs", CheckStatus::problem, "the driver reports no GPU", {}, ""});
  }
  for (const DeviceInfo& d : c.devices) {
    DoctorCheck g{fmt::format("GPU {}", d.ordinal), CheckStatus::ok, "", {}, ""};
    std::string bdf = ascii_lower(d.pci_bus_id);
    const GpuPciDevice* sys = sysfs_gpu(c, bdf);
    if (d.ordinal == c.options.device) c.gpu_bdf = sys ? bdf : std::string();
    g.summary = fmt::format("{}, PCI {}, NUMA node {}, {} memory, BAR1 {}", d.name, bdf, numa_text(d.host_numa_id),
                            format_size(d.total_memory_bytes),
                            sys && sys->bar1_size_bytes ? format_size(sys->bar1_size_bytes) : "unknown");
    g.evidence.push_back(fmt::format("compute capability {}.{}; driver NUMA ids: memory {}, nearest host {}",
                                     d.compute_capability_major, d.compute_capability_minor, d.numa_id,
                                     d.host_numa_id));
    if (sys) {
      g.evidence.insert(g.evidence.end(), sys->evidence.begin(), sys->evidence.end());
      if (sys->bar1_size_bytes != 0 && sys->bar1_size_bytes < (256ull << 20)) {
        g.status = CheckStatus::warning;
        g.advice = "BAR1 is small: GPUDirect Storage maps GPU memory through BAR1, so large buffers may not "
                   "fit; check the GPU's BAR1 mode (nvidia-smi -q -d MEMORY).";
      }
    } else {
      g.evidence.push_back(fmt::format("{}: not found under {}/sys/bus/pci/devices (BAR1 and sysfs NUMA node "
                                       "unknown)",
                                       bdf, c.env.root == "/" ? "" : c.env.root.string()));
    }
    if (d.ordinal == c.options.device) g.summary += " (the target GPU)";
    s.checks.push_back(std::move(g));
  }
  if (c.cuda != nullptr && c.devices_status.ok() && !c.gpu_usable() && !c.devices.empty()) {
    s.checks.push_back({fmt::format("GPU {}", c.options.device), CheckStatus::problem,
                        fmt::format("no GPU {}: the driver reports {} GPU(s), ordinals 0..{}", c.options.device,
                                    c.devices.size(), c.devices.size() - 1),
                        {}, "Pass --device with an existing ordinal."});
  }
  if (c.cuda == nullptr && c.sysfs_gpus) {
    DoctorCheck g{"GPUs in sysfs", CheckStatus::not_applicable, "", {}, ""};
    g.summary = c.sysfs_gpus->gpus.empty()
                    ? "no NVIDIA GPU on the PCI bus"
                    : fmt::format("{} NVIDIA GPU(s) on the PCI bus, but CUDA cannot use them",
                                  c.sysfs_gpus->gpus.size());
    for (const GpuPciDevice& d : c.sysfs_gpus->gpus) {
      g.evidence.push_back(fmt::format("{}: device 0x{:04x}, NUMA node {}, BAR1 {}", d.bdf, d.device_id,
                                       numa_text(d.numa_node),
                                       d.bar1_size_bytes ? format_size(d.bar1_size_bytes) : "unknown"));
    }
    if (!c.sysfs_gpus->gpus.empty()) {
      g.status = CheckStatus::problem;
      g.advice = "The GPUs are there but the driver is not usable: check that the nvidia kernel module is "
                 "loaded (lsmod | grep nvidia) and matches the user-space driver.";
    }
    s.checks.push_back(std::move(g));
  }
  s.status = worst_status(s.checks);
  return s;
}

}  // namespace ferry::detail::doctor
