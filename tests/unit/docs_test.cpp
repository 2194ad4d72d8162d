// The settings table in docs/settings.md lists every setting the code knows, with its variable.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "ferry/config.hpp"

namespace ferry {
namespace {

TEST(Docs, SettingsPageListsEverySettingAndVariable) {
  std::ifstream in(std::string(FERRY_TEST_FIXTURES) + "/../../docs/settings.md");
  ASSERT_TRUE(in.good()) << "docs/settings.md not found";
  std::stringstream text;
  text << in.rdbuf();
  for (const auto& row : settings_table()) {
    EXPECT_NE(text.str().find("| `" + row.name + "` | `" + row.env + "` |"), std::string::npos)
        << row.name << " is missing from docs/settings.md";
  }
}

}  // namespace
}  // namespace ferry
