// How a function table's symbol list is loaded (find_listed_symbol): required symbols fail naming the
// library and the symbol, optional ones come back null and are recorded, and a `_v2` symbol falls back to
// its plain name as older libcufile versions need. libm stands in for libcuda and libcufile.
#include "platform/dynamic_library.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "support/status_matchers.hpp"

namespace ferry::detail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ferry::testing::StatusIs;

// The check that decides whether a host read may ask the CUDA driver about its buffer: the C library is loaded
// in every process, under its versioned file name; a stem alone, a longer name or an absent library is not.
TEST(LibraryLoaded, FindsLoadedLibrariesByTheirFileStem) {
  EXPECT_TRUE(library_loaded("libc.so"));  // libc.so.6
  EXPECT_FALSE(library_loaded("libc.so.7"));
  EXPECT_FALSE(library_loaded("libc.s"));  // "libc.so.6" goes on with 'o', not '.', after it
  EXPECT_FALSE(library_loaded("libstdc"));  // "libstdc++.so.6": a stem is matched up to a dot
  EXPECT_FALSE(library_loaded("libferry-no-such-library.so"));
}

// The cache of a "not loaded" answer is keyed on this version: it must move when a library comes in.
TEST(LibraryLoaded, TheLoadedLibrariesVersionMovesWhenALibraryIsLoaded) {
  const std::uint64_t before = loaded_libraries_version();
  ASSERT_NE(before, 0u) << "the loader gives no load counts here";
  EXPECT_EQ(loaded_libraries_version(), before);  // nothing loaded in between
  for (const char* name : {"libutil.so.1", "libanl.so.1", "libnss_files.so.2", "libBrokenLocale.so.1"}) {
    std::string stem(name, std::string_view(name).find(".so") + 3);
    if (library_loaded(stem)) continue;
    if (!open_dynamic_library(name).ok()) continue;
    EXPECT_TRUE(library_loaded(stem));
    EXPECT_NE(loaded_libraries_version(), before) << name << " was loaded";
    return;
  }
  GTEST_SKIP() << "no small system library that this process has not loaded yet could be loaded";
}

class ListedSymbol : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<void*> handle = open_dynamic_library("libm.so.6");
    ASSERT_TRUE(handle.ok()) << handle.status().to_string();
    libm_ = *handle;
  }
  void* libm_ = nullptr;
};

TEST_F(ListedSymbol, RequiredSymbolIsFoundOrNamedInTheError) {
  Result<void*> cos = find_listed_symbol(libm_, "libm.so.6", "cos", SymbolNeed::required);
  ASSERT_TRUE(cos.ok()) << cos.status().to_string();
  EXPECT_NE(*cos, nullptr);
  EXPECT_THAT(find_listed_symbol(libm_, "libm.so.6", "cuInit", SymbolNeed::required),
              StatusIs(ErrorCode::unavailable, HasSubstr("libm.so.6 has no symbol cuInit: ")));
}

TEST_F(ListedSymbol, MissingOptionalSymbolIsNullAndRecorded) {
  std::vector<std::string> missing;
  Result<void*> absent = find_listed_symbol(libm_, "libm.so.6", "cuFileGetStatsL3", SymbolNeed::optional, &missing);
  ASSERT_TRUE(absent.ok()) << absent.status().to_string();
  EXPECT_EQ(*absent, nullptr);
  Result<void*> present = find_listed_symbol(libm_, "libm.so.6", "sin", SymbolNeed::optional, &missing);
  ASSERT_TRUE(present.ok());
  EXPECT_NE(*present, nullptr);
  EXPECT_THAT(missing, ElementsAre("cuFileGetStatsL3"));
}

TEST_F(ListedSymbol, VersionedSymbolFallsBackToThePlainName) {
  Result<void*> plain = find_listed_symbol(libm_, "libm.so.6", "cos", SymbolNeed::required);
  Result<void*> fallback = find_listed_symbol(libm_, "libm.so.6", "cos_v2", SymbolNeed::v2_or_plain);
  ASSERT_TRUE(fallback.ok()) << fallback.status().to_string();
  EXPECT_EQ(*fallback, *plain);
  // Neither name: the error names the plain one, as the older library would have had it.
  EXPECT_THAT(find_listed_symbol(libm_, "libm.so.6", "cuFileDriverClose_v2", SymbolNeed::v2_or_plain),
              StatusIs(ErrorCode::unavailable, HasSubstr("has no symbol cuFileDriverClose: ")));
}

}  // namespace
}  // namespace ferry::detail
