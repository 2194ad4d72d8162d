// Ferry's router: the first of the two decision points. Given the policy, the buffer and what is known
// about cuFile for this file, it picks host, staged or cuFile, with the reason. It is a pure function of
// its inputs, so every decision is unit-tested without a GPU; gathering the inputs (loading cuFile,
// opening its driver, registering the file) happens in the file layer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/decision.hpp"
#include "ferry/config.hpp"
#include "platform/cuda/buffer_kind.hpp"

namespace ferry::detail {

struct RouteQuery {
  BufferKind buffer;
  std::uint64_t size = 0;
  CompatMode compat = CompatMode::automatic;
  std::uint64_t gds_threshold = 0;
  Requirement require = Requirement::none;
  std::string_view path;  // for messages (decide() keeps no reference to it)
  // The pieces of a batch (File::pread_batch): packed into bounce buffers, which cuFile (one request at a
  // time) would not do; where cuFile would have taken them they take the staged route (batch_pieces), and
  // require=gds refuses them.
  bool pieces = false;
};

/// What the file layer found out about cuFile for this file. Each step is only meaningful when the
/// previous one succeeded.
struct CuFileFacts {
  Status library;  // libcufile loaded
  Status driver;   // cuFileDriverOpen succeeded
  Status handle;   // cuFileHandleRegister succeeded for this file
  bool nvidia_fs_loaded = false;
  bool p2pdma_supported = false;
  bool forced_compat = false;  // CUFILE_FORCE_COMPAT_MODE is true
  // Set when the facts come from the platform checks alone (auto, where they showed that cuFile could
  // not go direct): cuFile was not opened, and this says what was checked and what it showed.
  std::string checked_without_cufile;
  // The source has no file descriptor (an object over the network, memory): cuFile cannot serve it, and
  // was not loaded for it.
  bool source_without_descriptor = false;
};

/// True when decide() needs CuFileFacts for this query: a device buffer that policy allows to go to
/// cuFile. Otherwise decide() ignores them (and nothing needs to load cuFile).
bool needs_cufile(const RouteQuery& q);

/// The decision. For cuFile routes, `route` is provisional (nvfs when nvidia-fs is loaded, p2p when only
/// P2PDMA is, else cufile-posix) until cuFile's statistics split the operations.
/// Errors: unavailable when compat mode is off and cuFile cannot be used (with the reason);
/// failed_precondition when require=gds and the direct route is impossible (before any I/O).
[[nodiscard]] Result<Decision> decide(const RouteQuery& q, const CuFileFacts& facts);

}  // namespace ferry::detail
