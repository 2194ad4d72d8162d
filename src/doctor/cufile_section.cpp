// The cuFile section: the library (loaded as a read would load it), the configuration file in effect and
// the properties in it that decide routes, the driver (opened as a read would open it) and what it reports,
// statistics and the log cuFile writes.
#include <fmt/format.h>

#include "doctor/doctor_internal.hpp"
#include "platform/cufile/cufile_log.hpp"

namespace ferry::detail::doctor {
namespace {

template <typename T>
std::string origin(const CuFileSetting<T>& s) {
  return s.is_default ? "default" : "set in the file";
}

std::string list_text(const std::vector<std::uint64_t>& v) {
  std::string out;
  for (std::uint64_t x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return "[" + out + "]";
}

DoctorCheck config_check(DoctorContext& c) {
  DoctorCheck k{"configuration", CheckStatus::ok, "", {}, ""};
  auto cfg = probe_cufile_config(c.env.root, c.env.cufile_env_path_json);
  if (!cfg.ok()) {
    k.status = CheckStatus::problem;
    k.summary = "the cuFile configuration file could not be read: cuFile may refuse to start";
    k.evidence.push_back(cfg.status().message());
    k.advice = "Fix the JSON syntax (cuFile accepts // comments) or point CUFILE_ENV_PATH_JSON at a valid file.";
    return k;
  }
  const CuFileConfig& f = *cfg;
  k.summary = fmt::format("{} ({}){}", f.path, f.path_source, f.file_found ? "" : ": absent, cuFile's defaults");
  k.evidence.push_back(fmt::format("allow_compat_mode={} ({}); use_pci_p2pdma={} ({}); max_direct_io_size_kb={} ({})",
                                   f.allow_compat_mode.value, origin(f.allow_compat_mode), f.use_pci_p2pdma.value,
                                   origin(f.use_pci_p2pdma), f.max_direct_io_size_kb.value,
                                   origin(f.max_direct_io_size_kb)));
  k.evidence.push_back(fmt::format("POSIX pool: slab sizes {} KiB, counts {} ({}); statistics level {} ({})",
                                   list_text(f.posix_pool_slab_size_kb.value), list_text(f.posix_pool_slab_count.value),
                                   origin(f.posix_pool_slab_size_kb), f.cufile_stats.value, origin(f.cufile_stats)));
  for (const std::string& w : f.warnings) {
    k.status = CheckStatus::warning;
    k.evidence.push_back("ignored: " + w);
  }
  if (!f.allow_compat_mode.value && c.cufile != nullptr) {
    k.status = CheckStatus::warning;
    k.advice = "allow_compat_mode is false: where cuFile cannot go direct (no nvidia-fs, unsupported file system) "
               "its reads fail instead of using its POSIX path; Ferry's auto mode still stages them.";
  }
  c.cufile_config = f;
  return k;
}

}  // namespace

DoctorSection cufile_section(DoctorContext& c) {
  DoctorSection s{"cufile", "cuFile", CheckStatus::not_applicable, {}};
  c.cufile = c.gpu->cufile(&c.cufile_status);
  if (c.cufile == nullptr && c.cufile_status.ok()) {
    c.cufile_status = Status(ErrorCode::unavailable, "libcufile could not be loaded");
  }

  DoctorCheck lib{"library", CheckStatus::ok, "", {}, ""};
  if (c.cufile == nullptr) {
    lib.status = c.cuda == nullptr ? CheckStatus::not_applicable : CheckStatus::problem;
    lib.summary = "libcufile not found: device reads take Ferry's staged route";
    lib.evidence.push_back(c.cufile_status.message());
    lib.advice = "Install GPUDirect Storage's user-space library (the CUDA toolkit's libcufile, package "
                 "libcufile-<version> or nvidia-gds) and make sure the loader finds libcufile.so.0 "
                 "(e.g. /usr/local/cuda/lib64 in LD_LIBRARY_PATH or ld.so.conf).";
  } else {
    lib.summary = c.cufile->library + " loaded";
    if (!c.cufile->missing_optional.empty()) {
      std::string missing;
      for (const std::string& m : c.cufile->missing_optional) missing += (missing.empty() ? "" : ", ") + m;
      lib.evidence.push_back("optional symbols missing: " + missing);
    }
  }
  s.checks.push_back(std::move(lib));
  s.checks.push_back(config_check(c));

  DoctorCheck drv{"driver", CheckStatus::ok, "", {}, ""};
  if (c.cufile == nullptr) {
    drv.status = CheckStatus::not_applicable;
    drv.summary = "not opened: no cuFile library";
  } else if (c.cuda == nullptr) {
    drv.status = CheckStatus::not_applicable;
    drv.summary = "not opened: no usable CUDA driver";
  } else {
    c.driver_tried = true;
    CuFileFailure failure;
    auto driver = CuFileDriver::open(*c.cufile, &failure);
    if (!driver.ok()) {
      c.driver_status = driver.status();
      drv.status = CheckStatus::problem;
      drv.summary = "cuFileDriverOpen failed: device reads take the staged route";
      drv.evidence.push_back(driver.status().message());
      drv.advice = "Read cuFile's log (below) for its reason; `gdscheck -p` from the GDS tools prints the "
                   "same driver checks.";
    } else {
      c.driver = *driver;
      const CuFileProperties& p = c.driver->properties();
      int v = p.library_version;
      drv.summary = fmt::format("opened; cuFile {}.{}; {}", v / 1000, (v % 1000) / 10, p.summary());
      drv.evidence.push_back(fmt::format("nvfs version {}.{} (0.0: nvidia-fs not loaded); P2PDMA {}; compat mode {}",
                                         p.nvfs_major, p.nvfs_minor, p.p2pdma_supported ? "supported" : "no",
                                         p.allow_compat_mode ? "allowed" : "not allowed"));
      std::string storage;
      for (const std::string& st : p.supported_storage()) storage += (storage.empty() ? "" : ", ") + st;
      drv.evidence.push_back(fmt::format("max direct I/O {} KiB, poll mode {}, supported storage: {}",
                                         p.max_direct_io_kib, p.poll_mode ? "on" : "off",
                                         storage.empty() ? "none reported" : storage));
      if (!p.direct_route_possible()) {
        drv.status = CheckStatus::warning;
        drv.evidence.push_back("without nvidia-fs or P2PDMA cuFile can only use its POSIX compatibility path");
      }
      drv.evidence.push_back(c.driver->stats_status().ok()
                                 ? std::string("statistics level 3 enabled (per-GPU nvfs/posix/p2p counters)")
                                 : "statistics unavailable: " + c.driver->stats_status().message());
    }
  }
  s.checks.push_back(std::move(drv));

  if (c.cufile != nullptr) {
    DoctorCheck log{"log", CheckStatus::ok, "", {}, ""};
    std::string path = cufile_log_path();
    log.summary = path.empty() ? std::string("CUFILE_LOGFILE_PATH is empty: cuFile's log is off")
                               : "cuFile logs to " + path;
    if (c.driver_tried) {
      for (const std::string& line : cufile_log_tail(5)) log.evidence.push_back(line);
    }
    s.checks.push_back(std::move(log));
  }
  s.status = worst_status(s.checks);
  return s;
}

}  // namespace ferry::detail::doctor
