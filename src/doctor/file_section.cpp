// The file section: can Ferry open PATH, which mount and file system hold it, does O_DIRECT work and with
// which alignment, which block device is behind it, does udev have the record cuFile needs, does cuFile
// register the file, and where the device sits on the PCIe tree relative to each GPU.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "doctor/doctor_internal.hpp"
#include "platform/probes/direct_io_probe.hpp"
#include "platform/probes/pci_topology.hpp"
#include "file/open_options.hpp"
#include "platform/cufile/cufile_errors.hpp"

namespace ferry::detail::doctor {

std::string udev_fix_advice(const DoctorContext& c) {
  std::string record = c.udev ? c.udev->record_path
                              : fmt::format("/run/udev/data/b{}:{}", c.dev_major, c.dev_minor);
  std::string fs = c.mount ? c.mount->fs_type : std::string("ext4");
  std::string first = c.udev && c.udev->state == UdevRecordState::no_udev_dir
                          ? "Inside a container (no /run/udev here): bind-mount the host's udev database "
                            "read-only, e.g. docker run --volume /run/udev:/run/udev:ro ... On a host: "
                          : "On a host with systemd-udevd: ";
  return fmt::format(
      "cuFile reads ID_FS_USAGE from udev's record of block device {}:{} ({}). {}check that udev runs "
      "(systemctl status systemd-udevd), then `udevadm trigger --subsystem-match=block && udevadm settle`. "
      "{}As a last resort, as root write the record by hand (udev may replace it on its next event): "
      "mkdir -p /run/udev/data && printf 'E:ID_FS_USAGE=filesystem\\nE:ID_FS_TYPE={}\\n' > {}",
      c.dev_major, c.dev_minor, record, first,
      c.udev && c.udev->state == UdevRecordState::no_udev_dir
          ? ""
          : "Inside a container: bind-mount the host's /run/udev read-only (--volume /run/udev:/run/udev:ro). ",
      fs, record);
}

namespace {

DoctorCheck mount_check(DoctorContext& c, const std::string& canonical) {
  DoctorCheck k{"file system", CheckStatus::ok, "", {}, ""};
  auto m = probe_mount_for_path(canonical, c.env.root);
  if (!m.ok() || !m->mount) {
    set_warning(k, "no mount found for the file",
                m.ok() ? m->mountinfo_path + ": no entry holds " + canonical : m.status().message());
    return k;
  }
  c.mount = *m->mount;
  const MountEntry& e = *c.mount;
  k.summary = fmt::format("{} on {} (from {}), options {}", e.fs_type, e.mount_point, e.source, e.mount_options);
  k.evidence = m->evidence;
  k.evidence.push_back(fmt::format("device numbers {}:{}; superblock options {}", e.major, e.minor, e.super_options));
  static const char* kNoBlock[] = {"tmpfs", "overlay", "nfs", "nfs4", "proc", "sysfs", "ramfs", "squashfs"};
  for (const char* t : kNoBlock) {
    if (e.fs_type == t) {
      k.status = CheckStatus::warning;
      k.advice = fmt::format("{} is not a local block file system: cuFile's direct route does not apply to it "
                             "(GDS supports ext4/xfs on NVMe and some distributed file systems).",
                             e.fs_type);
    }
  }
  return k;
}

DoctorCheck direct_io_check(DoctorContext& c) {
  DoctorCheck k{"O_DIRECT", CheckStatus::ok, "", {}, ""};
  bool opened = c.file->direct_io_available();
  DioAlignProbe align = probe_dio_align(c.path);
  if (opened) {
    k.summary = align.direct_io_allowed()
                    ? fmt::format("opens; alignment: memory {} B, offsets {} B (statx)", align.mem_align_bytes,
                                  align.offset_align_bytes)
                    : "opens; alignment not reported by statx (assumed 4096 B)";
  } else {
    k.status = CheckStatus::warning;
    k.summary = "refused: reads are buffered, and cuFile cannot use its direct path on this file";
    k.advice = "Put the file on a file system that supports O_DIRECT (ext4, xfs; not tmpfs or overlay).";
  }
  if (!c.file->direct_io_note().empty()) k.evidence.push_back(c.file->direct_io_note());
  if (!align.detail.empty()) k.evidence.push_back(align.detail);
  return k;
}

DoctorCheck block_check(DoctorContext& c) {
  DoctorCheck k{"block device", CheckStatus::ok, "", {}, ""};
  struct stat st {};
  if (c.env.root == "/" && ::stat(c.path.c_str(), &st) == 0) {
    c.dev_major = major(st.st_dev);
    c.dev_minor = minor(st.st_dev);
    c.have_block_numbers = true;
    k.evidence.push_back(fmt::format("stat: st_dev {}:{}", c.dev_major, c.dev_minor));
  } else if (c.mount) {
    c.dev_major = c.mount->major;
    c.dev_minor = c.mount->minor;
    c.have_block_numbers = true;
    k.evidence.push_back(fmt::format("mountinfo: device {}:{}", c.dev_major, c.dev_minor));
  }
  if (!c.have_block_numbers) {
    k.status = CheckStatus::warning;
    k.summary = "unknown";
    return k;
  }
  auto b = probe_block_device(c.dev_major, c.dev_minor, c.env.root);
  if (!b.ok()) {
    set_warning(k, fmt::format("no block device {}:{} (a virtual or network file system)", c.dev_major, c.dev_minor),
                b.status().message());
    return k;
  }
  c.block = *b;
  const BlockDevice& d = *c.block;
  k.summary = fmt::format("{} ({}:{}){}{}", d.name, d.major, d.minor,
                          d.is_partition ? ", a partition of " + d.disk_name : std::string(),
                          d.pci.has_pci() ? ", controller " + d.controller_bdf() : std::string(", no PCI controller"));
  k.evidence.insert(k.evidence.end(), d.evidence.begin(), d.evidence.end());
  if (!d.no_pci_reason.empty()) k.evidence.push_back(d.no_pci_reason);
  return k;
}

DoctorCheck udev_check(DoctorContext& c) {
  DoctorCheck k{"udev record", CheckStatus::ok, "", {}, ""};
  if (!c.have_block_numbers) {
    k.status = CheckStatus::not_applicable;
    k.summary = "no block device to look up";
    return k;
  }
  auto u = probe_udev_record(c.dev_major, c.dev_minor, c.env.root);
  if (!u.ok()) {
    set_warning(k, "could not read the record", u.status().message());
    return k;
  }
  c.udev = *u;
  k.evidence = u->evidence;
  std::string what;  // what is wrong with the record
  switch (u->state) {
    case UdevRecordState::ok:
      k.summary = fmt::format("{}: ID_FS_USAGE={}, ID_FS_TYPE={}", u->record_path, u->id_fs_usage,
                              u->id_fs_type.empty() ? "(absent)" : u->id_fs_type);
      return k;
    case UdevRecordState::no_udev_dir: what = "no /run/udev here"; break;
    case UdevRecordState::no_record: what = fmt::format("{} is missing", u->record_path); break;
    case UdevRecordState::missing_id_fs_usage: what = fmt::format("{} has no ID_FS_USAGE", u->record_path); break;
  }
  if (c.cufile == nullptr) {
    // Only cuFile reads the record: without cuFile there is nothing to warn about or fix.
    k.status = CheckStatus::not_applicable;
    k.summary = what + " (only cuFile needs the record, and there is no cuFile library)";
    k.evidence.clear();  // what the probe read says what cuFile would make of it
    return k;
  }
  k.status = CheckStatus::problem;
  k.summary = fmt::format("{}: cuFile cannot register {} (error 5027)", what,
                          u->state == UdevRecordState::no_udev_dir ? "files" : "this file");
  k.advice = udev_fix_advice(c);
  return k;
}

DoctorCheck registration_check(DoctorContext& c) {
  DoctorCheck k{"cuFile registration", CheckStatus::ok, "", {}, ""};
  if (c.driver == nullptr) {
    k.status = CheckStatus::not_applicable;
    k.summary = c.cufile == nullptr ? "not tried: no cuFile library" : "not tried: cuFile's driver did not open";
    return k;
  }
  // The descriptor a read would register: O_DIRECT where the file system takes it.
  int fd = ::open(c.path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  bool direct = fd >= 0;
  if (fd < 0) fd = ::open(c.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    k.status = CheckStatus::warning;
    k.summary = "not tried: could not open the file";
    return k;
  }
  c.registration_tried = true;
  auto handle = c.driver->register_handle(fd, c.path, &c.registration_failure);
  if (handle.ok()) {
    c.driver->deregister_handle(*handle);
    k.summary = fmt::format("cuFileHandleRegister succeeded ({} descriptor)", direct ? "O_DIRECT" : "buffered");
  } else {
    c.registration = handle.status();
    k.status = CheckStatus::problem;
    k.summary = fmt::format("cuFileHandleRegister failed with {} ({}): cuFile cannot read this file",
                            c.registration_failure.code, cufile_error_name(c.registration_failure.code));
    k.evidence.push_back(handle.status().message());
    if (c.udev_record_missing()) {
      k.summary += "; the udev record is missing";
      k.advice = udev_fix_advice(c);
    } else {
      k.advice = "See cuFile's log for its reason; the file system or device may not be supported by GDS.";
    }
  }
  ::close(fd);
  return k;
}

void pci_checks(DoctorContext& c, DoctorSection& s) {
  if (!c.block || !c.block->pci.has_pci() || !c.sysfs_gpus || c.sysfs_gpus->gpus.empty()) {
    DoctorCheck k{"PCIe placement", CheckStatus::not_applicable, "", {}, ""};
    k.summary = !c.block ? "no block device"
                : !c.block->pci.has_pci() ? "the block device has no PCI controller (virtual device)"
                                          : "no NVIDIA GPU in sysfs";
    s.checks.push_back(std::move(k));
    return;
  }
  auto dev = probe_pci_location(c.block->controller_bdf(), c.env.root);
  if (!dev.ok()) {
    s.checks.push_back({"PCIe placement", CheckStatus::warning, "the controller could not be located",
                        {dev.status().message()}, ""});
    return;
  }
  for (const GpuPciDevice& g : c.sysfs_gpus->gpus) {
    DoctorCheck k{"PCIe to GPU " + g.bdf, CheckStatus::ok, "", {}, ""};
    auto gpu = probe_pci_location(g.bdf, c.env.root);
    if (!gpu.ok()) {
      set_warning(k, "could not be located", gpu.status().message());
      s.checks.push_back(std::move(k));
      continue;
    }
    PciRelationship r = relate_pci(*dev, *gpu);
    k.summary = fmt::format("{} -> {}: {}{}", c.block->controller_bdf(), g.bdf, pci_relation_name(r.relation),
                            g.bdf == c.gpu_bdf ? " (the target GPU)" : "");
    k.evidence.push_back(r.detail);
    if (r.relation == PciRelation::across_sockets) {
      k.status = CheckStatus::warning;
      k.advice = "Storage and GPU sit on different sockets: peer-to-peer DMA crosses the inter-socket link "
                 "(slow or unsupported); prefer a GPU on the storage's socket.";
    }
    s.checks.push_back(std::move(k));
  }
}

}  // namespace

DoctorSection file_section(DoctorContext& c) {
  DoctorSection s{"file", "File", CheckStatus::not_applicable, {}};
  if (c.path.empty()) {
    s.checks.push_back({"path", CheckStatus::not_applicable, "no PATH given: file checks skipped", {},
                        "Give a file to check (`ferry doctor PATH`): most reasons for missing GPUDirect "
                        "Storage are properties of the file's mount and device."});
    return s;
  }
  OpenOptions open_options;
  open_options.gpu = c.gpu;
  auto file = open_file(c.path, "r", c.config, open_options);
  DoctorCheck open{"open", CheckStatus::ok, "", {}, ""};
  if (!file.ok()) {
    c.file_status = file.status();
    open.status = CheckStatus::problem;
    open.summary = "cannot open the file: no read would work";
    open.evidence.push_back(file.status().to_string());
    s.checks.push_back(std::move(open));
    s.status = worst_status(s.checks);
    return s;
  }
  c.file.emplace(std::move(*file));
  auto size = c.file->size();
  c.file_size = size.ok() ? *size : 0;
  std::error_code ec;
  std::string canonical = std::filesystem::canonical(c.path, ec).string();
  if (ec) canonical = std::filesystem::absolute(c.path, ec).string();
  open.summary = fmt::format("{} ({})", canonical, format_size(c.file_size));
  s.checks.push_back(std::move(open));

  s.checks.push_back(mount_check(c, canonical));
  s.checks.push_back(direct_io_check(c));
  s.checks.push_back(block_check(c));
  s.checks.push_back(udev_check(c));
  s.checks.push_back(registration_check(c));
  pci_checks(c, s);
  s.status = worst_status(s.checks);
  return s;
}

}  // namespace ferry::detail::doctor
