// ferry/safetensors.hpp: safetensors checkpoints (one file, or a sharded set with its
// model.safetensors.index.json) into GPU or host memory through Ferry's engine.
//
// The format: an 8-byte little-endian header length N, N bytes of JSON mapping each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets into the data section that follows the header),
// plus an optional "__metadata__" object of strings; then the data section. Ferry validates the whole
// header before anything is written to memory: every dtype the format defines, shapes and sizes (with
// overflow checks), offsets in bounds, neither overlapping nor leaving holes, the data section covered
// exactly (as the format requires), and a size limit on the header.
//
// Loading reads each contiguous run of tensors with one File::pread into one allocation per device (or
// into memory the caller provides, to refresh weights in place), so that a hot checkpoint moves at the
// staged route's pace rather than tensor by tensor. Shards are read in parallel, a device map places
// tensors on several GPUs, and a checkpoint can be copied onto several GPUs while reading the file once.
//
// Errors (Status codes): invalid_argument for a malformed checkpoint (the message names the file and,
// where one is to blame, the tensor) or bad options; not_found for missing files or tensors; io_error and
// the other I/O codes from the reads; unavailable when CUDA is needed and unusable; cancelled when the
// progress callback asked to stop.
// Thread safety: a Checkpoint may be read from several threads at once (each load has its own state);
// LoadedCheckpoint and LoadPlan are values.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ferry/config.hpp"
#include "ferry/route.hpp"
#include "ferry/status.hpp"

namespace ferry::safetensors {

namespace detail {
class CheckpointState;
class AllocationAccess;
}  // namespace detail

/// Every element type the safetensors format defines.
enum class Dtype : std::uint8_t { boolean, u8, u16, u32, u64, i8, i16, i32, i64, f8_e4m3, f8_e5m2, f16, bf16, f32, f64 };
inline constexpr std::size_t kDtypeCount = 15;

/// The format's spelling: "BOOL", "U8", ..., "F8_E4M3", "F8_E5M2", "F16", "BF16", "F32", "F64".
const char* dtype_name(Dtype d) noexcept;
/// The dtype spelled `name` (case-sensitive, as the format), or nullopt for anything else.
std::optional<Dtype> dtype_from_name(std::string_view name) noexcept;
/// Bytes per element: 1 (BOOL, U8, I8, F8_*), 2, 4 or 8.
std::uint64_t dtype_size(Dtype d) noexcept;

/// The header size limit by default: 100 MB, the reference implementation's cap.
inline constexpr std::uint64_t kDefaultMaxHeaderBytes = 100'000'000;
/// The device number that means host memory (LoadOptions::device, device maps, Allocation::device).
inline constexpr int kHostMemory = -1;

/// One tensor of a header. Offsets are those of the file: `data_begin`/`data_end` into the data section as
/// written in the header, `file_offset` from the start of the file (8 + N + data_begin).
struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::u8;
  std::vector<std::uint64_t> shape;  // empty for a 0-d tensor (one element)
  std::uint64_t data_begin = 0;
  std::uint64_t data_end = 0;
  std::uint64_t file_offset = 0;
  std::size_t shard = 0;             // index into Checkpoint::files() (0 for a single file)

  std::uint64_t size_bytes() const { return data_end - data_begin; }
  /// Product of the shape (1 for 0-d, 0 when any dimension is 0). Fits: the parser checked it.
  std::uint64_t element_count() const;
};

/// A parsed, validated header of one file.
struct Header {
  std::uint64_t header_bytes = 0;  // N, the JSON length the 8-byte prefix gives (padding included)
  std::uint64_t data_bytes = 0;    // the data section: file size - 8 - N, exactly covered by the tensors
  std::vector<TensorInfo> tensors; // sorted by data_begin (then data_end, then name)
  std::map<std::string, std::string> metadata;  // "__metadata__", empty when absent

  std::uint64_t data_offset() const { return 8 + header_bytes; }
  /// Linear search; Checkpoint::find is indexed.
  const TensorInfo* find(std::string_view name) const;
};

struct ParseOptions {
  /// Larger headers are refused before they are read.
  std::uint64_t max_header_bytes = kDefaultMaxHeaderBytes;
};

/// Parses and validates header JSON (`json`: the N bytes after the prefix) for a data section of `data_bytes`
/// bytes, with `header_bytes` = N for the offsets. `source` names the file in messages. Errors:
/// invalid_argument: "Invalid safetensors header in "<source>": <what>[ (tensor "<name>")]".
[[nodiscard]] Result<Header> parse_header(std::string_view json, std::uint64_t header_bytes, std::uint64_t data_bytes,
                                          std::string_view source, const ParseOptions& options = {});

/// Parses a whole file held in memory (prefix, header, data): what read_header does after reading, and what
/// the fuzzer drives. Errors: as parse_header, plus a prefix that does not fit the buffer or the limit.
[[nodiscard]] Result<Header> parse_file_image(const void* bytes, std::size_t size, std::string_view source,
                                              const ParseOptions& options = {});

/// Reads and validates the header of the file at `path` (two small reads; the data is not read).
/// Errors: as parse_header, and the I/O codes of File::open and pread (not_found, permission_denied, ...).
[[nodiscard]] Result<Header> read_header(const std::string& path, const ParseOptions& options = {});

// ------------------------------------------------------------------------------------------------ loading

/// Settings for opening a checkpoint (they apply to every read from it).
struct OpenOptions {
  /// Ferry's settings for the reads; nullopt: default_config() (FERRY_* over built-in defaults).
  std::optional<Config> config;
  std::uint64_t max_header_bytes = kDefaultMaxHeaderBytes;  // also the size limit of an index file
  /// Caps the pinned staging memory the reads use at once (the staged route's bounce buffers:
  /// requests in flight x threads x bounce_buffers_per_thread x bounce_buffer_size). 0: no cap beyond
  /// the Config. With a cap, the bounce buffers shrink (to 256 KiB at least), then the threads, then
  /// fewer requests run at once. Staging kits are pooled for the process, so memory pinned by earlier
  /// reads stays pinned; the cap bounds what this checkpoint's reads use. Errors: invalid_argument when
  /// the cap is below one thread's two smallest buffers (512 KiB).
  std::uint64_t max_staging_bytes = 0;
};

/// Where and how to load. Devices are CUDA ordinals, or kHostMemory (-1).
struct LoadOptions {
  int device = 0;
  /// Tensor name or prefix -> device. A key matches a name equal to it or starting with it followed by
  /// "." ("model.layers.1" matches "model.layers.1.mlp.weight", not "model.layers.10.bias"); "" matches
  /// every name. The longest matching key wins; names no key matches go to `device`.
  std::vector<std::pair<std::string, int>> device_map;
  /// Further GPUs to hold a whole copy each: the file is read once, into `device`, and each piece is then
  /// copied GPU to GPU (cuMemcpyPeerAsync, with peer access enabled where the GPUs allow it) while the
  /// next is read. Needs a GPU `device` and no device map. Errors: invalid_argument otherwise.
  std::vector<int> replicas;
  /// The largest single pread (0: one per contiguous run of tensors; 512 MiB pieces when replicating).
  std::uint64_t max_request_bytes = 0;
  /// Requests in flight at once across all shards (0: all of them).
  unsigned max_requests_in_flight = 0;
  /// Called on the calling thread with (bytes read, bytes to read): at the start, at most every
  /// `progress_interval` while reading, and at the end. Return false to cancel: requests not yet started
  /// are dropped, those in flight are waited for, and the load fails with `cancelled`.
  std::function<bool(std::uint64_t done, std::uint64_t total)> progress;
  std::chrono::milliseconds progress_interval{100};
};

/// Where a load would put each tensor, before any memory exists: for callers that allocate themselves
/// (Python makes one torch/CuPy/NumPy buffer per region) and then call Checkpoint::load_into.
struct LoadPlan {
  struct Region {
    int device = 0;                    // CUDA ordinal or kHostMemory
    std::uint64_t size_bytes = 0;
    std::uint64_t alignment = 256;     // the base must be a multiple of this (4096 in host memory, for O_DIRECT)
    int copy_of = -1;                  // a replica: index of the region it copies (same size and offsets)
  };
  struct Placement {
    std::size_t tensor = 0;            // index into Checkpoint::tensors()
    std::size_t region = 0;            // a region with copy_of == -1
    std::uint64_t offset = 0;          // from the region's base; a multiple of the dtype's size
  };
  std::vector<Region> regions;         // primary regions by device, then one per replica device
  std::vector<Placement> placements;   // one per tensor, in Checkpoint::tensors() order
  std::uint64_t read_bytes = 0;        // bytes the load reads from files
};

/// A block of memory a load allocated (cuMemAlloc, or page-aligned host memory); freed when the last
/// owner lets go. Each LoadedTensor shares ownership of its block, so tensors may outlive their
/// LoadedCheckpoint.
class Allocation {
 public:
  ~Allocation();
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  int device() const { return device_; }
  void* data() const { return data_; }
  std::uint64_t size_bytes() const { return size_; }

 private:
  friend class detail::AllocationAccess;
  Allocation() = default;
  int device_ = kHostMemory;
  void* data_ = nullptr;
  std::uint64_t size_ = 0;
  const void* api_ = nullptr;  // the CUDA table that allocated device memory
};

struct LoadedTensor {
  std::string name;
  Dtype dtype = Dtype::u8;
  std::vector<std::uint64_t> shape;
  int device = kHostMemory;
  void* data = nullptr;              // device pointer (a CUdeviceptr) or host pointer
  std::uint64_t size_bytes = 0;
  std::shared_ptr<const Allocation> storage;  // the block `data` points into
};

/// What one load did.
struct LoadStats {
  std::uint64_t bytes_read = 0;        // from files
  std::uint64_t bytes_copied = 0;      // GPU to GPU, for replicas
  unsigned requests = 0;               // preads issued
  double seconds = 0;                  // wall time of the reads and copies (load_into, read_into)
  double replicate_wait_seconds = 0;   // of which: waiting for copies after the last read
  Report report;                       // routes and reasons of every pread
  std::vector<std::string> notes;      // settings OpenOptions changed for device reads, and why (when the load made any)
};

struct LoadedCheckpoint {
  std::vector<LoadedTensor> tensors;                 // Checkpoint::tensors() order
  std::vector<std::vector<LoadedTensor>> replicas;   // one list per LoadOptions::replicas entry, same order
  std::map<std::string, std::string> metadata;
  std::vector<std::shared_ptr<Allocation>> allocations;
  LoadStats stats;
  double open_seconds = 0;      // reading and validating headers (load() only)
  double allocate_seconds = 0;  // allocating the regions

  /// The primary copy of `name`, or nullptr. Linear search.
  const LoadedTensor* find(std::string_view name) const;
};

/// Memory the caller owns, to receive `size_bytes` bytes of tensor `name` starting `offset` bytes into it
/// (partial reads serve slicing). `size_bytes` = UINT64_MAX: to the end of the tensor.
struct Destination {
  std::string name;
  void* data = nullptr;
  std::uint64_t offset = 0;
  std::uint64_t size_bytes = UINT64_MAX;
};

/// An opened checkpoint: its files stay open (so the files read are the files validated) and every
/// header is parsed and validated. Copies share the open files.
class Checkpoint {
 public:
  /// Opens a .safetensors file, a model.safetensors.index.json (sharded: "weight_map" names each tensor's
  /// shard, relative to the index's directory), or a directory holding either (the index first, else
  /// model.safetensors, else its only *.safetensors file). Shard headers are read in parallel.
  /// Errors: not_found, permission_denied (naming the path); invalid_argument for malformed headers or
  /// index files, tensors the weight map promises but a shard lacks, a tensor in two shards.
  [[nodiscard]] static Result<Checkpoint> open(const std::string& path, const OpenOptions& options = {});

  /// Shard paths (one for a single file).
  const std::vector<std::string>& files() const;
  /// Every tensor: by shard, then by data offset.
  const std::vector<TensorInfo>& tensors() const;
  const TensorInfo* find(std::string_view name) const;
  /// "__metadata__" of the file, or of the shards merged (the first shard wins a conflict, with a note).
  const std::map<std::string, std::string>& metadata() const;
  /// Facts found while opening: tensors outside the weight map, metadata conflicts.
  const std::vector<std::string>& notes() const;
  /// Sum of the tensors' sizes.
  std::uint64_t data_bytes() const;
  /// The settings reads use (after OpenOptions' adjustments).
  const Config& config() const;

  /// The layout a load would use. Errors: invalid_argument for bad devices or replica options.
  [[nodiscard]] Result<LoadPlan> plan(const LoadOptions& options = {}) const;
  /// plan(), allocation of each region, load_into(). Errors: as load_into, and allocation failures.
  [[nodiscard]] Result<LoadedCheckpoint> load(const LoadOptions& options = {}) const;
  /// Reads every tensor of `plan` into caller-provided regions (`bases[i]` for plan.regions[i], aligned as
  /// the region asks, at least size_bytes long) and fills the replica regions from the primary ones.
  /// Bytes of a region outside the tensors are not written. Before any read, each shard is checked to
  /// still be as long as when it was opened. `options` supplies request shaping and progress (its
  /// placement fields must match those the plan was made with). Errors: invalid_argument for a base count
  /// or alignment that does not fit the plan; the reads' errors, naming the file and the tensor; a file
  /// that ends early (io_error); cancelled.
  [[nodiscard]] Result<LoadStats> load_into(const LoadPlan& plan, std::span<void* const> bases,
                                            const LoadOptions& options = {}) const;
  /// Reads (parts of) tensors into memory the caller owns, one pread per destination: host or device
  /// memory, classified by Ferry. For refreshing weights in place and for slices. Errors: not_found for an
  /// unknown name; out_of_range for a range past the tensor's end; the reads' errors.
  [[nodiscard]] Result<LoadStats> read_into(std::span<const Destination> destinations,
                                            const LoadOptions& options = {}) const;

 private:
  friend class detail::CheckpointState;
  explicit Checkpoint(std::shared_ptr<detail::CheckpointState> state);
  std::shared_ptr<detail::CheckpointState> state_;
};

/// Checkpoint::open(path, open_options), then load(options).
[[nodiscard]] Result<LoadedCheckpoint> load(const std::string& path, const LoadOptions& options = {},
                                            const OpenOptions& open_options = {});

}  // namespace ferry::safetensors
