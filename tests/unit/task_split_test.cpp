// split_request: head, aligned body, tail; exact coverage; the alignment helpers.
#include "engine/task_split.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace ferry::detail {
namespace {

constexpr std::uint64_t kKiB = 1024;
constexpr std::uint64_t kMiB = 1024 * kKiB;
constexpr std::uint64_t kGiB = 1024 * kMiB;
constexpr std::uint64_t kAlign = 4096;

// Every invariant split_request promises, for any request.
void expect_exact_cover(const std::vector<Task>& tasks, std::uint64_t offset, std::uint64_t size,
                        std::uint64_t task_size, std::uint64_t alignment) {
  SCOPED_TRACE("offset " + std::to_string(offset) + " size " + std::to_string(size) + " task_size " +
               std::to_string(task_size));
  if (size == 0) {
    EXPECT_TRUE(tasks.empty());
    return;
  }
  ASSERT_FALSE(tasks.empty());
  std::uint64_t at = offset;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const Task& t = tasks[i];
    SCOPED_TRACE("task " + std::to_string(i));
    EXPECT_EQ(t.file_offset, at) << "tasks must be contiguous and in order";
    EXPECT_EQ(t.buffer_offset, t.file_offset - offset);
    EXPECT_GT(t.length, 0u);
    EXPECT_LE(t.length, task_size);
    if (t.aligned) {
      EXPECT_TRUE(is_aligned(t.file_offset, alignment));
      EXPECT_TRUE(is_aligned(t.length, alignment));
    }
    at += t.length;
  }
  EXPECT_EQ(at, offset + size) << "tasks must end exactly at the end of the request";
}

TEST(AlignHelpers, RoundToPowersOfTwo) {
  EXPECT_EQ(align_down(0, 4096), 0u);
  EXPECT_EQ(align_down(4095, 4096), 0u);
  EXPECT_EQ(align_down(4096, 4096), 4096u);
  EXPECT_EQ(align_down(4097, 4096), 4096u);
  EXPECT_EQ(align_up(0, 4096), 0u);
  EXPECT_EQ(align_up(1, 4096), 4096u);
  EXPECT_EQ(align_up(4096, 4096), 4096u);
  EXPECT_EQ(align_up(4097, 4096), 8192u);
  EXPECT_TRUE(is_aligned(0, 512));
  EXPECT_TRUE(is_aligned(8192, 4096));
  EXPECT_FALSE(is_aligned(8193, 4096));
  EXPECT_EQ(align_up(kGiB - 1, 2 * kMiB), kGiB);
}

TEST(TaskSplit, OneGiBAtZeroWithFourMiBTasksIs256AlignedTasks) {
  auto tasks = split_request(0, kGiB, 4 * kMiB, kAlign);
  ASSERT_EQ(tasks.size(), 256u);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    EXPECT_EQ(tasks[i].file_offset, i * 4 * kMiB);
    EXPECT_EQ(tasks[i].length, 4 * kMiB);
    EXPECT_EQ(tasks[i].buffer_offset, i * 4 * kMiB);
    EXPECT_TRUE(tasks[i].aligned);
  }
  expect_exact_cover(tasks, 0, kGiB, 4 * kMiB, kAlign);
}

TEST(TaskSplit, EmptyRequestHasNoTasks) {
  EXPECT_TRUE(split_request(0, 0, 4 * kMiB, kAlign).empty());
  EXPECT_TRUE(split_request(12345, 0, 4 * kMiB, kAlign).empty());
}

TEST(TaskSplit, TinyRequestIsOneUnalignedTask) {
  for (std::uint64_t offset : {0ull, 1ull, 100ull, 4095ull, 4096ull, 8191ull}) {
    for (std::uint64_t size : {1ull, 7ull, 100ull}) {
      auto tasks = split_request(offset, size, 64 * kKiB, kAlign);
      if (align_down(offset, kAlign) != align_down(offset + size - 1, kAlign)) {
        // Straddles a block boundary without holding a whole block: still tiny pieces, all unaligned.
        for (const Task& t : tasks) EXPECT_FALSE(t.aligned);
      } else {
        ASSERT_EQ(tasks.size(), 1u) << "offset " << offset << " size " << size;
        EXPECT_EQ(tasks[0].file_offset, offset);
        EXPECT_EQ(tasks[0].length, size);
        EXPECT_EQ(tasks[0].buffer_offset, 0u);
        EXPECT_FALSE(tasks[0].aligned);
      }
      expect_exact_cover(tasks, offset, size, 64 * kKiB, kAlign);
    }
  }
}

TEST(TaskSplit, ExactlyOneAlignedBlockIsOneAlignedTask) {
  auto tasks = split_request(4096, 4096, 64 * kKiB, kAlign);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_TRUE(tasks[0].aligned);
  EXPECT_EQ(tasks[0].length, 4096u);
}

TEST(TaskSplit, UnalignedOffsetGetsHeadUpToTheNextBoundary) {
  // [1, 1 + 200 KiB) with 64 KiB tasks: head [1, 4096), body of 64 KiB pieces, tail after the last boundary.
  const std::uint64_t offset = 1, size = 200 * kKiB, ts = 64 * kKiB;
  auto tasks = split_request(offset, size, ts, kAlign);
  ASSERT_GE(tasks.size(), 3u);
  EXPECT_EQ(tasks.front().file_offset, 1u);
  EXPECT_EQ(tasks.front().length, 4095u);
  EXPECT_FALSE(tasks.front().aligned);
  EXPECT_EQ(tasks[1].file_offset, 4096u);
  EXPECT_EQ(tasks[1].length, ts);
  EXPECT_TRUE(tasks[1].aligned);
  const Task& tail = tasks.back();
  EXPECT_FALSE(tail.aligned);
  EXPECT_EQ(tail.file_offset, align_down(offset + size, kAlign));
  EXPECT_EQ(tail.file_offset + tail.length, offset + size);
  expect_exact_cover(tasks, offset, size, ts, kAlign);
}

TEST(TaskSplit, AlignedOffsetUnalignedEndHasTailOnly) {
  auto tasks = split_request(64 * kKiB, 64 * kKiB + 10, 64 * kKiB, kAlign);
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_TRUE(tasks[0].aligned);
  EXPECT_EQ(tasks[0].length, 64 * kKiB);
  EXPECT_FALSE(tasks[1].aligned);
  EXPECT_EQ(tasks[1].file_offset, 128 * kKiB);
  EXPECT_EQ(tasks[1].length, 10u);
  EXPECT_EQ(tasks[1].buffer_offset, 64 * kKiB);
}

TEST(TaskSplit, BodyShorterThanTaskSizeEndsAtTheLastBoundary) {
  // Body [4096, 12288) is 8 KiB: one aligned task of 8 KiB, not task_size.
  auto tasks = split_request(100, 12288 - 100 + 5, 64 * kKiB, kAlign);
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[1].file_offset, 4096u);
  EXPECT_EQ(tasks[1].length, 8192u);
  EXPECT_TRUE(tasks[1].aligned);
  EXPECT_EQ(tasks[2].length, 5u);
}

TEST(TaskSplit, LastBodyTaskMayBeShorterButStaysAligned) {
  auto tasks = split_request(0, 64 * kKiB * 3 + 8192, 64 * kKiB, kAlign);
  ASSERT_EQ(tasks.size(), 4u);
  EXPECT_EQ(tasks[3].length, 8192u);
  EXPECT_TRUE(tasks[3].aligned);
}

TEST(TaskSplit, CoversEveryRequestExactlyAcrossSizesAndOffsets) {
  const std::uint64_t ts = 64 * kKiB;
  for (std::uint64_t offset : std::vector<std::uint64_t>{0, 1, 511, 4095, 4096, 4097, ts - 1, ts, ts + 1, 3 * ts + 17}) {
    for (std::uint64_t size : std::vector<std::uint64_t>{0, 1, 4095, 4096, 4097, 8191, 8192, ts - 1, ts, ts + 1,
                                                         5 * ts + 4097}) {
      auto tasks = split_request(offset, size, ts, kAlign);
      expect_exact_cover(tasks, offset, size, ts, kAlign);
      // The aligned body is as large as the request allows: only the head and the tail are unaligned.
      std::uint64_t unaligned = 0;
      for (const Task& t : tasks) {
        if (!t.aligned) unaligned += t.length;
      }
      std::uint64_t body_begin = align_up(offset, kAlign), body_end = align_down(offset + size, kAlign);
      if (body_begin < body_end) {
        EXPECT_EQ(unaligned, size - (body_end - body_begin));
      }
    }
  }
}

// A small read asks only_task() first: it names the one task exactly where split_request() makes one.
TEST(TaskSplit, OnlyTaskIsTheSplitOfOneTaskAndNothingElse) {
  const std::uint64_t ts = 64 * kKiB;
  for (std::uint64_t offset : std::vector<std::uint64_t>{0, 1, 100, 4095, 4096, 4097, ts - 1, ts, 3 * ts + 17}) {
    for (std::uint64_t size : std::vector<std::uint64_t>{0, 1, 3996, 4095, 4096, 4097, 8192, ts - 1, ts, ts + 1}) {
      auto tasks = split_request(offset, size, ts, kAlign);
      auto only = only_task(offset, size, ts, kAlign);
      ASSERT_EQ(only.has_value(), tasks.size() == 1) << offset << " + " << size;
      if (!only) continue;
      EXPECT_EQ(only->file_offset, tasks[0].file_offset);
      EXPECT_EQ(only->length, tasks[0].length);
      EXPECT_EQ(only->buffer_offset, 0u);
      EXPECT_EQ(only->aligned, tasks[0].aligned);
    }
  }
}

TEST(TaskSplit, LargeAlignmentStillCoversExactly) {
  // A device asking 64 KiB alignment with 1 MiB tasks.
  auto tasks = split_request(1000, 5 * kMiB, kMiB, 64 * kKiB);
  expect_exact_cover(tasks, 1000, 5 * kMiB, kMiB, 64 * kKiB);
  EXPECT_EQ(tasks.front().length, 64 * kKiB - 1000);
  EXPECT_TRUE(tasks[1].aligned);
}

TEST(TaskSplit, TaskSizeEqualToAlignmentGivesOneBlockPerTask) {
  auto tasks = split_request(0, 10 * 4096, 4096, kAlign);
  ASSERT_EQ(tasks.size(), 10u);
  for (const Task& t : tasks) EXPECT_EQ(t.length, 4096u);
}

TEST(TaskSplit, HighOffsetsDoNotOverflow) {
  const std::uint64_t offset = (1ull << 50) + 3;
  auto tasks = split_request(offset, 3 * kMiB, kMiB, kAlign);
  expect_exact_cover(tasks, offset, 3 * kMiB, kMiB, kAlign);
}

}  // namespace
}  // namespace ferry::detail
