// An HTTP(S) or S3 object as a Source: each task is one range request (remote::Object::read_range) on the
// engine's worker, into host memory, so the host route reads straight into the caller's memory and the
// staged route into its pinned bounce buffers, then to the GPU. A request runs remote_connections tasks
// at once. cuFile cannot serve it (no descriptor); writes are refused.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ferry/config.hpp"
#include "ferry/remote.hpp"
#include "source/source.hpp"

namespace ferry::detail {

/// Opens `url` with `settings` (and, for s3://, the credentials `given`, or else those it looks up).
/// Errors: remote::Object::open's.
Result<std::shared_ptr<Source>> open_remote_source(const std::string& url, std::string_view mode,
                                                   const RemoteSettings& settings,
                                                   const ferry::remote::Credentials* given = nullptr);

}  // namespace ferry::detail
