// The platform section: IOMMU state and ACS on the path between the file's device and the GPU, each with
// what it means for security. The doctor never advises turning either off without saying what is lost.
#include <fmt/format.h>

#include "doctor/doctor_internal.hpp"
#include "platform/probes/iommu.hpp"
#include "platform/probes/pci_acs.hpp"

namespace ferry::detail::doctor {

DoctorSection platform_section(DoctorContext& c) {
  DoctorSection s{"platform", "Platform", CheckStatus::not_applicable, {}};
  DoctorCheck io{"IOMMU", CheckStatus::ok, "", {}, ""};
  auto iommu = probe_iommu(c.env.root);
  if (!iommu.ok()) {
    set_warning(io, "could not be read", iommu.status().message());
  } else {
    io.summary = fmt::format("{} ({} unit(s), {} group(s))", iommu_mode_name(iommu->mode), iommu->units.size(),
                             iommu->group_count);
    io.evidence = iommu->evidence;
    io.evidence.push_back("security: " + iommu->security_note);
    const bool nvfs = c.nvidia_fs && c.nvidia_fs->module_loaded;
    if (iommu->mode == IommuMode::translated && nvfs) {
      io.status = CheckStatus::warning;
      io.advice = "nvidia-fs's peer-to-peer DMA has required the IOMMU off or in passthrough on bare metal in "
                  "many GDS releases; check the release notes of yours. Passthrough (iommu=pt) or off gives up "
                  "the DMA isolation that protects host memory from faulty or malicious devices: weigh that "
                  "before changing it, and prefer hosts dedicated to trusted workloads.";
    }
  }
  s.checks.push_back(std::move(io));

  DoctorCheck acs{"ACS", CheckStatus::not_applicable, "", {}, ""};
  if (!c.block || !c.block->pci.has_pci() || c.gpu_bdf.empty()) {
    acs.summary = c.path.empty() ? "no PATH given: no storage-to-GPU path to check"
                  : c.gpu_bdf.empty() ? "the GPU's PCI location is unknown"
                                      : "the file's block device has no PCI controller";
  } else {
    auto path = probe_acs_path(c.block->controller_bdf(), c.gpu_bdf, c.env.root);
    if (!path.ok()) {
      set_warning(acs, "could not be read", path.status().message());
    } else {
      acs.status = CheckStatus::ok;
      acs.summary = path->bridges.empty()
                        ? "no bridge between storage and GPU"
                        : fmt::format("{} bridge(s) on the path; {}", path->bridges.size(),
                                      path->any_redirect ? "redirect on at some (P2P goes via the root complex)"
                                                         : "no redirect");
      for (const BridgeAcs& b : path->bridges) acs.evidence.push_back(b.evidence);
      acs.evidence.push_back("security: " + path->security_note);
      if (path->any_redirect) {
        acs.status = CheckStatus::warning;
        acs.advice = "Peer-to-peer transfers are routed through the root complex. Turning ACS redirect off would "
                     "shorten them, but lets the devices below that bridge reach each other without the IOMMU "
                     "checking, and merges them into one IOMMU group (they can no longer be isolated or given "
                     "to different VMs).";
      }
    }
  }
  s.checks.push_back(std::move(acs));
  s.status = worst_status(s.checks);
  return s;
}

}  // namespace ferry::detail::doctor
