// Where a request's bytes are in memory. A request moves consecutive bytes of a file; its tasks name their
// bytes by their offset from the request's start (Task::buffer_offset). Most requests have one buffer, the
// caller's, so request byte i is at base + i. A scattered read (a run of checkpoint tensors that follow one
// another in the file, each placed at an aligned address of its own) has several: segment k holds the
// request's bytes [offset_k, offset_k + length_k), the segments in order and without gaps, so the file is
// still read in large, aligned tasks and only the copies out of the bounce buffers follow the segments.
// Thread safety: immutable once made; copies share the segment list.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace ferry::detail {

/// Bytes [offset, offset + length) of a request are at `address`.
struct Segment {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uintptr_t address = 0;
};

class Destination {
 public:
  /// One buffer: request byte i at `base` + i (base 0: tasks carry absolute addresses, as a batch's do).
  explicit Destination(std::uintptr_t base = 0) : base_(base) {}
  explicit Destination(const void* base) : base_(reinterpret_cast<std::uintptr_t>(base)) {}
  /// Several buffers. `segments` must start at offset 0 and follow one another without gaps (the caller's
  /// plan guarantees it: FileState::submit_scattered checks it).
  static Destination scattered(std::vector<Segment> segments) {
    Destination d;
    d.segments_ = std::make_shared<const std::vector<Segment>>(std::move(segments));
    return d;
  }

  bool is_scattered() const { return segments_ != nullptr; }
  const std::vector<Segment>& segments() const { return *segments_; }

  /// The address of request byte `offset`.
  std::uintptr_t address(std::uint64_t offset) const {
    if (!segments_) return base_ + offset;
    const Segment& s = segment_of(offset);
    return s.address + (offset - s.offset);
  }
  /// Whether request bytes [offset, offset + length) lie in one buffer (then they are at address(offset)).
  bool contiguous(std::uint64_t offset, std::uint64_t length) const {
    if (!segments_ || length == 0) return true;
    const Segment& s = segment_of(offset);
    return offset + length <= s.offset + s.length;
  }
  /// Calls `part(address, length, offset)` for the pieces of request bytes [offset, offset + length), in
  /// order, one per buffer they touch (`offset`: where the piece starts, from the request's start).
  template <typename Part>
  void for_each_part(std::uint64_t offset, std::uint64_t length, Part&& part) const {
    if (!segments_) {
      if (length > 0) part(base_ + offset, length, offset);
      return;
    }
    const std::uint64_t end = offset + length;
    auto it = segment_iterator(offset);
    for (std::uint64_t at = offset; at < end && it != segments_->end(); ++it) {
      const std::uint64_t n = std::min(end, it->offset + it->length) - at;
      if (n > 0) part(it->address + (at - it->offset), n, at);
      at += n;
    }
  }

 private:
  std::vector<Segment>::const_iterator segment_iterator(std::uint64_t offset) const {
    // The last segment that starts at or before `offset` (empty segments before it are passed over).
    auto it = std::upper_bound(segments_->begin(), segments_->end(), offset,
                               [](std::uint64_t o, const Segment& s) { return o < s.offset; });
    return it == segments_->begin() ? it : std::prev(it);
  }
  const Segment& segment_of(std::uint64_t offset) const { return *segment_iterator(offset); }

  std::uintptr_t base_ = 0;
  std::shared_ptr<const std::vector<Segment>> segments_;  // null: one buffer at base_
};

}  // namespace ferry::detail
