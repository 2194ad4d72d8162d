// The spelling rule of user-visible names (docs/routes.md, "Names"), held against every route, reason and
// setting: routes are lowercase words joined by hyphens; reasons, settings, setting values and error codes
// are snake_case; a setting's variable is FERRY_ and its name in capitals. Names are unique in their kind.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "ferry/config.hpp"
#include "ferry/route.hpp"
#include "ferry/status.hpp"

namespace ferry {
namespace {

const std::regex kHyphenated("[a-z0-9]+(-[a-z0-9]+)*");
const std::regex kSnakeCase("[a-z0-9]+(_[a-z0-9]+)*");

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

TEST(Names, RoutesAreLowercaseWithHyphensAndUnique) {
  std::set<std::string> seen;
  for (std::size_t i = 0; i < kRouteCount; ++i) {
    std::string name = route_name(static_cast<Route>(i));
    EXPECT_TRUE(std::regex_match(name, kHyphenated)) << "route " << i << " is spelled \"" << name << "\"";
    EXPECT_TRUE(seen.insert(name).second) << "two routes are called " << name;
  }
  // kRouteCount covers the whole enum: the value after the last has no name.
  EXPECT_STREQ(route_name(static_cast<Route>(kRouteCount)), "?");
}

TEST(Names, ReasonsAreSnakeCaseAndUnique) {
  std::set<std::string> seen;
  for (std::size_t i = 0; i < kReasonCount; ++i) {
    std::string name = reason_name(static_cast<Reason>(i));
    EXPECT_TRUE(std::regex_match(name, kSnakeCase)) << "reason " << i << " is spelled \"" << name << "\"";
    EXPECT_TRUE(seen.insert(name).second) << "two reasons are called " << name;
    EXPECT_STRNE(reason_text(static_cast<Reason>(i)), "?") << name << " has no text";
  }
  EXPECT_STREQ(reason_name(static_cast<Reason>(kReasonCount)), "?") << "kReasonCount is behind the enum";
}

TEST(Names, SettingsAreSnakeCaseUniqueAndTheirVariablesFollow) {
  std::set<std::string> names;
  std::set<std::string> variables;
  for (const SettingInfo& row : settings_table()) {
    EXPECT_TRUE(std::regex_match(row.name, kSnakeCase)) << "setting \"" << row.name << "\"";
    EXPECT_EQ(row.env, "FERRY_" + upper(row.name));
    EXPECT_TRUE(names.insert(row.name).second) << "two settings are called " << row.name;
    EXPECT_TRUE(variables.insert(row.env).second) << "two settings use " << row.env;
  }
  EXPECT_FALSE(names.empty());
}

TEST(Names, SettingValuesAndErrorCodesAreSnakeCase) {
  for (CompatMode m : {CompatMode::automatic, CompatMode::on, CompatMode::off}) {
    EXPECT_TRUE(std::regex_match(compat_mode_name(m), kSnakeCase)) << compat_mode_name(m);
  }
  for (DirectIo d : {DirectIo::automatic, DirectIo::on, DirectIo::off}) {
    EXPECT_TRUE(std::regex_match(direct_io_name(d), kSnakeCase)) << direct_io_name(d);
  }
  for (IoEngine e : {IoEngine::psync, IoEngine::io_uring}) {
    EXPECT_TRUE(std::regex_match(io_engine_name(e), kSnakeCase)) << io_engine_name(e);
  }
  for (Requirement r : {Requirement::none, Requirement::gds}) {
    EXPECT_TRUE(std::regex_match(requirement_name(r), kSnakeCase)) << requirement_name(r);
  }
  for (SettingSource s : {SettingSource::default_value, SettingSource::environment, SettingSource::api}) {
    EXPECT_TRUE(std::regex_match(setting_source_name(s), kSnakeCase)) << setting_source_name(s);
  }
  std::set<std::string> codes;
  for (int c = static_cast<int>(ErrorCode::ok); c <= static_cast<int>(ErrorCode::internal); ++c) {
    std::string name = error_code_name(static_cast<ErrorCode>(c));
    EXPECT_TRUE(std::regex_match(name, kSnakeCase)) << "error code " << c << " is spelled \"" << name << "\"";
    EXPECT_TRUE(codes.insert(name).second) << "two error codes are called " << name;
  }
}

// docs/routes.md is where people look a name up: every route and reason is there, as code.
TEST(Names, RoutesPageNamesEveryRouteAndReason) {
  std::ifstream in(std::string(FERRY_TEST_FIXTURES) + "/../../docs/routes.md");
  ASSERT_TRUE(in.good()) << "docs/routes.md not found";
  std::stringstream text;
  text << in.rdbuf();
  for (std::size_t i = 0; i < kRouteCount; ++i) {
    std::string name = route_name(static_cast<Route>(i));
    EXPECT_NE(text.str().find("`" + name + "`"), std::string::npos) << "route " << name << " is not in docs/routes.md";
  }
  for (std::size_t i = 0; i < kReasonCount; ++i) {
    std::string name = reason_name(static_cast<Reason>(i));
    EXPECT_NE(text.str().find("`" + name + "`"), std::string::npos) << "reason " << name << " is not in docs/routes.md";
  }
}

}  // namespace
}  // namespace ferry
