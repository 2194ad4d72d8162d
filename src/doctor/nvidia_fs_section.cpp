// The nvidia-fs section: the kernel module cuFile's direct path (route nvfs) needs, its version, and its
// device nodes (a container sees the host's module list but only the /dev nodes it was given). cuFile's
// own view (the nvfs version in its driver properties) is shown beside the kernel's.
#include <fmt/format.h>

#include "doctor/doctor_internal.hpp"

namespace ferry::detail::doctor {

std::string nvidia_fs_advice() {
  return "For the direct route, check: the nvidia-fs kernel module is installed (nvidia-fs / "
         "nvidia-gds packages matching the driver) and loaded (`modprobe nvidia_fs`), and the file is on "
         "a file system and device GDS supports (ext4 or xfs on local NVMe, or a supported parallel or "
         "network file system). Alternatively, cuFile can use PCI P2PDMA without nvidia-fs: set "
         "\"use_pci_p2pdma\": true in cufile.json, with Linux >= 6.2 and an NVMe driver that supports it "
         "(check your GDS release notes).";
}

DoctorSection nvidia_fs_section(DoctorContext& c) {
  DoctorSection s{"nvidia_fs", "nvidia-fs", CheckStatus::not_applicable, {}};
  DoctorCheck mod{"kernel module", CheckStatus::ok, "", {}, ""};
  auto probe = probe_nvidia_fs(c.env.root);
  if (!probe.ok()) {
    set_warning(mod, "could not read the module list", probe.status().message());
    s.checks.push_back(std::move(mod));
    s.status = worst_status(s.checks);
    return s;
  }
  c.nvidia_fs = *probe;
  const NvidiaFsProbe& p = *probe;
  mod.evidence = p.evidence;
  // Only cuFile uses nvidia-fs: without a GPU or without cuFile, its absence is nothing to warn about (the
  // prediction's steps to the direct route still name it, after those steps).
  const bool gpu_relevant = c.cuda != nullptr && c.cufile != nullptr;
  if (!p.module_loaded) {
    mod.status = gpu_relevant ? CheckStatus::warning : CheckStatus::not_applicable;
    mod.summary = "not loaded: cuFile has no direct (nvfs) route here, only P2PDMA or its POSIX path";
    if (gpu_relevant) mod.advice = nvidia_fs_advice();
  } else {
    mod.summary = fmt::format("loaded, version {}", p.version ? *p.version : std::string("unknown"));
  }
  s.checks.push_back(std::move(mod));

  DoctorCheck nodes{"device nodes", CheckStatus::ok, "", {}, ""};
  if (p.device_nodes.empty()) {
    nodes.status = p.module_loaded ? CheckStatus::problem : CheckStatus::not_applicable;
    nodes.summary = p.module_loaded ? "no /dev/nvidia-fs* here although the module is loaded"
                                    : "no /dev/nvidia-fs* (the module is not loaded)";
    if (p.loaded_but_nodes_missing()) {
      nodes.advice = "Typical inside a container: pass the nodes in (e.g. --device /dev/nvidia-fs0 ... for each "
                     "node on the host, or the NVIDIA container toolkit's GDS option).";
    }
  } else {
    nodes.summary = fmt::format("{} node(s): {}{}", p.device_nodes.size(), p.device_nodes.front(),
                                p.device_nodes.size() > 1 ? " ..." : "");
  }
  s.checks.push_back(std::move(nodes));

  if (c.driver != nullptr) {
    const CuFileProperties& props = c.driver->properties();
    DoctorCheck view{"cuFile's view", CheckStatus::ok, "", {}, ""};
    view.summary = props.nvidia_fs_loaded
                       ? fmt::format("cuFile reports nvidia-fs {}.{}", props.nvfs_major, props.nvfs_minor)
                       : "cuFile reports nvfs version 0: it will not use nvidia-fs";
    if (props.nvidia_fs_loaded != p.module_loaded) {
      view.status = CheckStatus::warning;
      view.evidence.push_back(p.module_loaded
                                  ? "the kernel lists the module but cuFile does not use it (device nodes missing, "
                                    "or a version mismatch; see cuFile's log)"
                                  : "cuFile reports nvidia-fs although /proc/modules does not list it");
    } else if (!props.nvidia_fs_loaded) {
      view.status = CheckStatus::warning;
    }
    s.checks.push_back(std::move(view));
  }
  s.status = worst_status(s.checks);
  return s;
}

}  // namespace ferry::detail::doctor
