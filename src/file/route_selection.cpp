// select_route_source: host buffers only until the GPU platform lands.
#include "file/route_selection.hpp"

#include "backends/host_backend.hpp"

namespace ferry::detail {

Result<std::shared_ptr<TaskSource>> select_route_source(FileState& /*file*/, const TaskIo& io, bool is_read,
                                                        void* buffer, std::uint64_t /*size*/,
                                                        std::uint64_t /*offset*/) {
  return make_host_source(io, is_read, buffer, Decision{Route::host, Reason::buffer_is_host_memory, ""});
}

}  // namespace ferry::detail
