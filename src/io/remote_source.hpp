// An HTTP(S) or S3 object as a Source (ferry/remote.hpp does the HTTP): each task is one range read into
// host memory, so the host route reads straight into the caller's memory and the staged route into its
// pinned bounce buffers, then to the GPU. cuFile cannot serve it (no descriptor); writes are refused.
#pragma once

#include <memory>
#include <string>

#include "ferry/remote.hpp"
#include "io/source.hpp"

namespace ferry::detail {

/// Opens `url` with the FERRY_REMOTE_* / FERRY_S3_* settings. Errors: remote::Object::open's.
Result<std::shared_ptr<Source>> open_remote_source(const std::string& url, std::string_view mode);

}  // namespace ferry::detail
