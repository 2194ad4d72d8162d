// ferry/safetensors.hpp: safetensors checkpoints (one file, or a sharded set with its
// model.safetensors.index.json) into GPU or host memory through Ferry's engine. Ferry validates the whole
// header before anything is written to memory, and reads each contiguous run of tensors with one pread; the
// format, what is refused, and how tensors are placed and read: docs/safetensors.md.
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
  /// Caps the pinned staging memory this checkpoint's reads use at once (0: no cap beyond the Config); how
  /// the cap is met: docs/safetensors.md. Errors: invalid_argument when the cap is below one thread's two
  /// smallest buffers (512 KiB).
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
  /// Requests in flight at once across all shards, at most (0: no limit of its own). Either way a request
  /// starts only while those in flight leave a thread without a task: one with a task for every thread runs
  /// alone, smaller ones go together until each thread has a task.
  unsigned max_requests_in_flight = 0;
  /// Called on the calling thread with (bytes read, bytes to read): at the start, at most every
  /// `progress_interval` while reading, and at the end. Return false to cancel: requests not yet started
  /// are dropped, those in flight are waited for, and the load fails with `cancelled`.
  std::function<bool(std::uint64_t done, std::uint64_t total)> progress;
  std::chrono::milliseconds progress_interval{100};
};

/// Every tensor a load places starts where the framework's own allocator would put it (cudaMalloc: 256 bytes;
/// host allocators: 64), since GPU kernels choose their code by their operands' alignment (docs/safetensors.md).
inline constexpr std::uint64_t kDeviceTensorAlignment = 256;
inline constexpr std::uint64_t kHostTensorAlignment = 64;

/// Where a load would put each tensor, before any memory exists: for callers that allocate themselves
/// (Python makes one torch/CuPy/NumPy buffer per region) and then call Checkpoint::load_into. Tensors follow
/// one another in file order, each at the next aligned offset (docs/safetensors.md, "Where tensors are
/// placed"): a region holds its tensors' bytes plus less than one alignment per tensor.
struct LoadPlan {
  struct Region {
    int device = 0;                    // CUDA ordinal or kHostMemory
    std::uint64_t size_bytes = 0;
    std::uint64_t alignment = 256;     // the base must be a multiple of this (kDeviceTensorAlignment on a GPU,
                                       // 4096 in host memory)
    int copy_of = -1;                  // a replica: index of the region it copies (same size and offsets)
  };
  struct Placement {
    std::size_t tensor = 0;            // index into Checkpoint::tensors()
    std::size_t region = 0;            // a region with copy_of == -1
    std::uint64_t offset = 0;          // from the region's base: a multiple of kDeviceTensorAlignment on a
                                       // GPU, of kHostTensorAlignment in host memory
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
  /// Each shard's file as it was opened and validated, in files() order: its size, and its header's length
  /// and "__metadata__". With tensors(), what two opens of one checkpoint share and two checkpoints of one
  /// layout (another step's save, say) need not: ferry.distributed checks that every rank sees the same.
  struct ShardFacts {
    std::uint64_t file_bytes = 0;
    std::uint64_t header_bytes = 0;
    std::map<std::string, std::string> metadata;
  };
  std::vector<ShardFacts> shard_facts() const;
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

// ------------------------------------------------------------------------------------------------ saving
//
// A saved file is byte-identical to what the reference implementation (safetensors.torch.save_file) writes
// for the same tensors and metadata, but for the order of several metadata keys (Ferry sorts them). It
// replaces the target atomically: a process killed at any moment leaves the old file or the new one under
// the target's name, never a torn one. How the bytes move and the file is made: docs/safetensors.md, "Saving".
//
// Errors: invalid_argument for tensors or metadata the format cannot hold (naming the tensor); the
// destination's refusals (permission_denied, is_a_directory, failed_precondition for a device, FIFO or
// socket, not_found for a missing directory), each naming the path; no_space and io_error from the writes
// and syncs (the target is then as it was); unavailable when a tensor is in GPU memory and CUDA is
// unusable; cancelled.

/// One tensor to save: dtype_size(dtype) x product(shape) contiguous bytes at `data`, in host memory or GPU
/// memory (a CUdeviceptr cast to void*); Ferry classifies the pointer. `data` may be null for 0 bytes.
struct SaveTensor {
  std::string name;
  Dtype dtype = Dtype::u8;
  std::vector<std::uint64_t> shape;  // empty for a 0-d tensor (one element)
  const void* data = nullptr;
};

/// A file's header as the reference writes it, and where each tensor goes.
struct HeaderImage {
  std::string bytes;                      // the 8-byte length prefix, then the padded JSON
  std::vector<std::size_t> order;         // indices into the input, in file order
  std::vector<std::uint64_t> data_begin;  // per input tensor: its offset in the data section
  std::vector<std::uint64_t> size_bytes;  // per input tensor
  std::uint64_t data_bytes = 0;
  std::uint64_t file_bytes() const { return bytes.size() + data_bytes; }
};

/// The header `tensors` and `metadata` make (nullopt: no "__metadata__"; an empty map writes an empty one).
/// Pure: `data` is not read. Errors: invalid_argument naming the tensor for a duplicate name, the reserved
/// name "__metadata__" (the reference writes such a file, which no reader can open), a name or metadata
/// that is not valid UTF-8, or sizes past 2^64.
[[nodiscard]] Result<HeaderImage> serialize_header(std::span<const SaveTensor> tensors,
                                                   const std::optional<std::map<std::string, std::string>>& metadata);

struct SaveOptions {
  std::optional<std::map<std::string, std::string>> metadata;
  /// fdatasync before the rename and fsync of the directory after it. false: the file may still be in the
  /// page cache when the save returns (a crash of the machine, not of the process, can lose it).
  bool durable = true;
  /// Ferry's settings for the writes; nullopt: default_config(). direct_io=auto means O_DIRECT where aligned
  /// (the data goes to the disk anyway), durable or not; direct_io=off writes through the page cache.
  std::optional<Config> config;
  /// Staging memory the save uses at once (rounded up to whole windows, at least two). 0: kDefaultSaveStaging
  /// for save(); for start_save() the whole file, at most a quarter of the machine's memory, so that
  /// the snapshot need not wait for the disk.
  std::uint64_t max_staging_bytes = 0;
  /// Refuse tensors whose bytes overlap (what safetensors.torch refuses: they would load as separate
  /// tensors). false: each is written in full (what safetensors.numpy does).
  bool refuse_overlapping = true;
  /// Called on the thread running the save with (bytes written, file size): at the start, at most every
  /// `progress_interval`, and at the end. Returning false cancels the save (the target is left as it was).
  std::function<bool(std::uint64_t done, std::uint64_t total)> progress;
  std::chrono::milliseconds progress_interval{100};
};

/// Staging windows are this large (a multiple of every O_DIRECT alignment); kDefaultSaveStaging holds 8.
inline constexpr std::uint64_t kSaveWindowBytes = 32ull << 20;
inline constexpr std::uint64_t kDefaultSaveStaging = 8 * kSaveWindowBytes;

/// What one save did.
struct SaveStats {
  std::string path;                 // as given
  std::string target;               // the file created or replaced (where a symlink leads)
  bool replaced = false;            // an existing file was replaced
  std::uint64_t file_bytes = 0;
  std::uint64_t tensors = 0;
  std::uint64_t device_bytes = 0;   // of which copied from GPU memory
  std::uint64_t staging_bytes = 0;  // staging memory used
  bool staging_pinned = false;      // pinned (some tensor was in GPU memory) or plain host memory
  unsigned requests = 0;            // File::pwrite calls
  double seconds = 0;               // from the call to the file under its name
  double snapshot_seconds = 0;      // from the call until every tensor's bytes were in staging or the file
  double snapshot_wait_seconds = 0; // of which: waiting for writes to free staging windows
  double sync_seconds = 0;          // fdatasync
  double commit_seconds = 0;        // rename and directory fsync
  Report report;                    // routes and reasons of every write
  std::vector<std::string> notes;   // what the save chose and why (staging, O_DIRECT, waits)
};

namespace detail {
class SaveState;
}

/// A save running on a thread of its own (start_save). Copies share the save; the last copy to go away
/// waits for the save to end (as a Future does), so the tensors' memory is never read after that.
/// Thread safety: every member may be called from any thread.
class SaveHandle {
 public:
  explicit SaveHandle(std::shared_ptr<detail::SaveState> state);
  SaveHandle(const SaveHandle&) = default;
  SaveHandle& operator=(const SaveHandle&) = default;
  ~SaveHandle();

  /// Blocks until every tensor's bytes are in staging memory or in the file: from then on the caller may
  /// change or free its tensors. Returns the save's error if it failed or was cancelled before that.
  [[nodiscard]] Status snapshot() const;
  /// snapshot() with a limit: whether the snapshot is done (or the save failed) within `timeout`.
  bool wait_snapshot_for(std::chrono::milliseconds timeout) const;
  /// Blocks until the save ended: the file is under its name (durable unless durable = false), or the
  /// error (the target then as it was). May be called more than once.
  [[nodiscard]] Result<SaveStats> result() const;
  bool wait_for(std::chrono::milliseconds timeout) const;
  bool done() const;
  /// Bytes written to the file so far, and the file's size.
  std::uint64_t bytes_written() const;
  std::uint64_t file_bytes() const;
  /// Asks the save to stop: no window is filled or written after this, writes in flight finish, and
  /// result() is `cancelled` (unless the save had ended). The target is left as it was. Does not wait.
  void cancel() const;

 private:
  std::shared_ptr<detail::SaveState> state_;
};

/// Saves `tensors` to `path` and returns once the file is under its name. Errors: above.
[[nodiscard]] Result<SaveStats> save(const std::string& path, std::span<const SaveTensor> tensors,
                                     const SaveOptions& options = {});
/// Checks everything that can be checked without moving data (the tensors, the metadata, the destination,
/// the new file's creation), then saves on a thread of its own. The tensors' memory must stay valid and
/// unchanged until snapshot() returns. options.progress is not used. Errors: those checks'.
[[nodiscard]] Result<SaveHandle> start_save(const std::string& path, std::span<const SaveTensor> tensors,
                                            const SaveOptions& options = {});

// ------------------------------------------------------------------------------------------------ shards

/// The "__metadata__" key of every shard of a sharded save, and the index's "metadata" key, that name the
/// save they belong to (16 random hex digits); the index's "ferry.shard_bytes" maps each shard's file name to
/// its size. A load that finds shards of another save than the index's (an interrupted save over an earlier one)
/// refuses the set by name. Loads do not show the key in Checkpoint::metadata().
inline constexpr char kSaveIdKey[] = "ferry.save_id";

struct ShardedSaveOptions {
  /// Every shard's options, and the index's: the metadata goes into every shard's header, the index holding only
  /// "total_size" (as Hugging Face's writers put it there); progress is the whole save's (tensor bytes).
  SaveOptions save;
  /// No shard grows past this unless one tensor alone is larger (it then gets a shard of its own).
  std::uint64_t max_shard_bytes = 5'000'000'000;
  /// Files are <prefix>.safetensors (one shard, no index) or <prefix>-00001-of-0000N.safetensors and
  /// <prefix>.safetensors.index.json.
  std::string prefix = "model";
  /// Checkpoint files of an earlier save in the directory that this one would not replace (other shard
  /// counts, a single file where an index is written, or the reverse) would mislead readers: false refuses
  /// the save before anything is written (already_exists, naming them); true removes them once the new
  /// index (or file) is in place.
  bool remove_stale = false;
};

struct ShardedSaveStats {
  std::vector<std::string> files;  // shard paths, in order
  std::string index;               // the index's path, or empty for a single shard
  std::uint64_t total_size = 0;    // bytes of tensor data (the index's metadata.total_size)
  /// (name, kept): tensors that were the same memory as an earlier one (same address, dtype and shape) and
  /// were saved once, under the first name, as Hugging Face's save_pretrained and safetensors' save_model do.
  std::vector<std::pair<std::string, std::string>> aliases;
  std::vector<std::string> removed;  // stale files removed (remove_stale)
  std::vector<SaveStats> shards;
  double seconds = 0;
};

/// Which tensors go to which shard, as huggingface_hub's split_torch_state_dict_into_shards decides for
/// tensors that own their storage: in the given order, the shard being filled is closed when the next tensor
/// would take it past `max_shard_bytes`; a tensor larger than that gets a shard of its own at once, ahead of
/// the shard being filled. Indices into `sizes`; no empty shards.
std::vector<std::vector<std::size_t>> plan_shards(std::span<const std::uint64_t> sizes, std::uint64_t max_shard_bytes);

/// Saves `tensors` into `directory` (created if missing, one level) as shards and an index, each file as
/// save() does, the index last: a reader never finds an index naming a shard that is not complete.
/// Errors: save()'s, naming the shard; already_exists for stale files (above).
[[nodiscard]] Result<ShardedSaveStats> save_sharded(const std::string& directory, std::span<const SaveTensor> tensors,
                                                    const ShardedSaveOptions& options = {});

}  // namespace ferry::safetensors
