// The doctor's internals: where it reads the system from (a root for the probes, a GPU platform that tests
// replace with fakes), the facts gathered once and shared by the sections, and one function per section.
// Each section function gathers what it needs into the context and returns its checks; later sections and
// the prediction read what earlier ones found, so run_doctor calls them in a fixed order.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "platform/probes/block_device.hpp"
#include "platform/probes/cufile_config.hpp"
#include "platform/probes/gpu_sysfs.hpp"
#include "platform/probes/mountinfo.hpp"
#include "platform/probes/nvidia_fs.hpp"
#include "platform/probes/udev_record.hpp"
#include "ferry/doctor.hpp"
#include "ferry/file.hpp"
#include "platform/cuda/primary_context.hpp"
#include "platform/cufile/cufile_driver.hpp"
#include "platform/gpu_platform.hpp"

namespace ferry::detail::doctor {

// The platform probes (platform/probes) are the doctor's vocabulary.
using namespace probes;

/// Where the doctor looks. Production uses the defaults; tests point `root` at a fixture tree and `gpu`
/// at the fake CUDA and cuFile tables. The file itself (PATH) is always a real file: its mount, block
/// device and udev record are looked up under `root`.
struct DoctorEnvironment {
  std::filesystem::path root = "/";
  const GpuPlatform* gpu = nullptr;                 // nullptr: process_gpu_platform()
  std::optional<std::string> cufile_env_path_json;  // nullopt: the process's CUFILE_ENV_PATH_JSON
};

struct DoctorContext {
  DoctorOptions options;
  DoctorEnvironment env;
  const GpuPlatform* gpu = nullptr;

  // Settings (settings_section reports them; everything else reads them).
  Config config;
  Status config_status;

  // CUDA.
  const CudaApi* cuda = nullptr;
  Status cuda_status;
  std::vector<DeviceInfo> devices;
  Status devices_status;
  std::optional<GpuSysfsProbe> sysfs_gpus;
  std::string gpu_bdf;  // sysfs address of GPU `options.device`, when known

  // cuFile.
  const CuFileApi* cufile = nullptr;
  Status cufile_status;
  const CuFileDriver* driver = nullptr;
  Status driver_status;  // OK only when the driver opened
  bool driver_tried = false;
  std::optional<CuFileConfig> cufile_config;

  // nvidia-fs.
  std::optional<NvidiaFsProbe> nvidia_fs;

  // The file.
  std::string path;           // as given
  std::optional<File> file;   // opened for reading with `config` on `gpu`
  Status file_status;
  std::uint64_t file_size = 0;
  std::optional<MountEntry> mount;
  bool have_block_numbers = false;
  unsigned dev_major = 0, dev_minor = 0;
  std::optional<BlockDevice> block;
  std::optional<UdevProbe> udev;
  bool registration_tried = false;
  Status registration;        // cuFileHandleRegister on this file
  CuFileFailure registration_failure;

  /// GPU `options.device` exists and CUDA works.
  bool gpu_usable() const {
    return cuda != nullptr && options.device >= 0 && static_cast<std::size_t>(options.device) < devices.size();
  }
  /// The udev record cuFile needs is missing (any of the three missing states).
  bool udev_record_missing() const { return udev && udev->state != UdevRecordState::ok; }
};

// Sections, in the order run_doctor calls them.
DoctorSection cuda_section(DoctorContext& c);
DoctorSection cufile_section(DoctorContext& c);
DoctorSection nvidia_fs_section(DoctorContext& c);
DoctorSection file_section(DoctorContext& c);      // before platform: it finds the block device
DoctorSection platform_section(DoctorContext& c);
DoctorSection settings_section(DoctorContext& c);

/// The route a read would take, through the same router as a real read.
DoctorPrediction predict(DoctorContext& c);
/// The probe read (options.probe), compared with the prediction.
DoctorProbe run_probe(DoctorContext& c, const DoctorPrediction& prediction);

/// What to do about a missing udev record: the systemd-udevd way, the container way, and by hand.
std::string udev_fix_advice(const DoctorContext& c);
/// What to check to get nvidia-fs (or P2PDMA) going.
std::string nvidia_fs_advice();

/// Makes `k` a warning saying `summary`, with `evidence` (usually why a probe could not read its files).
void set_warning(DoctorCheck& k, std::string summary, std::string evidence);

/// The worst status of `checks` (ok < warning < problem; n/a only when all are n/a).
CheckStatus worst_status(const std::vector<DoctorCheck>& checks);

/// run_doctor with a chosen environment (tests).
Result<DoctorReport> run_doctor(const DoctorOptions& options, const DoctorEnvironment& env);

}  // namespace ferry::detail::doctor
