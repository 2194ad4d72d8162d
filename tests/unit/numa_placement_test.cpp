#include "platform/numa_placement.hpp"

#include <gtest/gtest.h>

#include "base/host_memory.hpp"

namespace ferry::detail {
namespace {

TEST(NumaPlacement, CountsSysfsNodeLists) {
  EXPECT_EQ(count_nodes("0\n"), 1);
  EXPECT_EQ(count_nodes("0-1"), 2);
  EXPECT_EQ(count_nodes("0-3,5"), 5);
  EXPECT_EQ(count_nodes("0,2,4-5\n"), 4);
  EXPECT_EQ(count_nodes(""), 0);
  EXPECT_EQ(count_nodes("x"), 0);
  EXPECT_EQ(count_nodes("3-1"), 0);
  EXPECT_GE(online_numa_nodes(), 1);
}

TEST(NumaPlacement, PlacesOnlyWhereThereIsAChoice) {
  EXPECT_EQ(bounce_buffer_node(1, 2), 1);
  EXPECT_EQ(bounce_buffer_node(0, 1), -1) << "one node: nothing to place";
  EXPECT_EQ(bounce_buffer_node(-1, 4), -1) << "the driver does not know the GPU's node";
}

TEST(NumaPlacement, PreferringNodeZeroIsAccepted) {
  std::size_t bytes = 2u << 20;
  auto memory = HostMemory::allocate(bytes);  // a mapping of its own, as the staging pool's
  ASSERT_TRUE(memory.ok()) << memory.status().to_string();
  EXPECT_TRUE(prefer_node(memory->data(), bytes, 0));  // node 0 exists on every Linux machine
  EXPECT_FALSE(prefer_node(memory->data(), bytes, -1));
}

}  // namespace
}  // namespace ferry::detail
