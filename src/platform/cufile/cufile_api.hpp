// The cuFile API as a table of function pointers, loaded from libcufile at run time.
//
// Not a singleton: the router is handed a `const CuFileApi*` (the process's real one from
// process_cufile_api(), or tests/support/fake_cufile.hpp's), so routing and GDS logic run without cuFile.
// Members are named after the exported symbol they hold (cufile.h maps cuFileDriverClose to
// cuFileDriverClose_v2 by macro).
// Thread safety: a loaded table is immutable; cuFile's functions are documented as thread-safe.
#pragma once

#include <string>
#include <vector>

#include "ferry/status.hpp"
#include "platform/cufile/cufile_abi.hpp"

namespace ferry::detail {

struct CuFileApi {
  // One member per entry point of cufile_symbols.hpp, named after its exported symbol (cuFileDriverClose_v2
  // may hold an older library's cuFileDriverClose). Optional ones are null where this libcufile lacks them,
  // and their names are listed in missing_optional.
#define FERRY_CUFILE_MEMBER_(need, symbol, result, parameters) symbol##_fn symbol = nullptr;
  FERRY_CUFILE_SYMBOLS(FERRY_CUFILE_MEMBER_)
#undef FERRY_CUFILE_MEMBER_

  std::string library;                    // the name or path that was opened ("libcufile.so.0")
  std::vector<std::string> missing_optional;  // optional symbols this library lacks

  /// Opens `library`, or with nullptr the first of "libcufile.so.0", "libcufile.so",
  /// "/usr/local/cuda/lib64/libcufile.so.0" that loads. Errors: unavailable, naming every name tried and
  /// the loader's reason for each ("libcufile.so.0 not found: ...; libcufile.so not found: ..."), or the
  /// missing required symbol.
  [[nodiscard]] static Result<CuFileApi> load(const char* library = nullptr);

  /// True when cuFile's per-GPU statistics can be read (level 3 settable and readable).
  bool has_stats() const noexcept { return cuFileSetStatsLevel && cuFileStatsStart && cuFileGetStatsL3; }
};

/// The process's cuFile library, loaded on first call (after pointing cuFile's log at Ferry's per-process
/// file, see cufile_log.hpp). nullptr when it cannot be loaded; process_cufile_status() says why.
/// Loading does not open the driver: see CuFileDriver::open. Thread-safe.
const CuFileApi* process_cufile_api();
Status process_cufile_status();

}  // namespace ferry::detail
