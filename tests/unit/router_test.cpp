// The router's every decision, without a GPU: decide() is a pure function of the query and the facts.
#include "route/router.hpp"
#include "support/status_matchers.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

using ferry::testing::StatusIs;

using ::testing::HasSubstr;

namespace ferry::detail {
namespace {

RouteQuery device_query(CompatMode compat = CompatMode::automatic, std::uint64_t size = 1 << 20) {
  RouteQuery q;
  q.buffer = BufferKind{MemoryKind::device, 0};
  q.size = size;
  q.compat = compat;
  q.gds_threshold = 16 * 1024;
  q.path = "/data/shard.bin";
  return q;
}

CuFileFacts registered(bool nvfs, bool p2p = false) {
  CuFileFacts f;
  f.nvidia_fs_loaded = nvfs;
  f.p2pdma_supported = p2p;
  return f;
}

CuFileFacts registration_failed() {
  CuFileFacts f;
  f.handle = Status(ErrorCode::unavailable,
                    "cuFileHandleRegister failed with cuFile error 5027 (CU_FILE_...): ...; cuFile log: udev property "
                    "not found: ID_FS_USAGE");
  return f;
}

// A batch's pieces are packed into bounce buffers: where cuFile would have taken the request they take the
// staged route (batch_pieces), other decisions stand, and require=gds refuses them. (Decided here since issue
// 50; it was an override in the file layer.)
TEST(Router, PiecesOfABatchTakeTheStagedRouteWhereCuFileWouldHaveTakenThem) {
  RouteQuery q = device_query(CompatMode::off);
  q.pieces = true;
  auto d = decide(q, registered(/*nvfs=*/true));
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->route, Route::staged);
  EXPECT_EQ(d->reason, Reason::batch_pieces);
  q.compat = CompatMode::on;
  EXPECT_EQ(decide(q, registered(true))->reason, Reason::compat_mode_on);
  q.compat = CompatMode::automatic;
  q.size = 4096;  // below the threshold: staged already, with that reason
  EXPECT_EQ(decide(q, registered(true))->reason, Reason::below_gds_threshold);
  q.buffer = BufferKind{MemoryKind::host_pageable, -1};
  EXPECT_EQ(decide(q, registered(true))->route, Route::host);
  RouteQuery strict = device_query(CompatMode::automatic);
  strict.pieces = true;
  strict.require = Requirement::gds;
  EXPECT_THAT(decide(strict, registered(true)),
              StatusIs(ErrorCode::failed_precondition, HasSubstr("a batch into GPU memory from \"/data/shard.bin\"")));
}

TEST(Router, HostBuffersTakeTheHostRoute) {
  RouteQuery q = device_query();
  q.buffer = BufferKind{MemoryKind::host_pageable, -1};
  EXPECT_FALSE(needs_cufile(q));
  auto d = decide(q, {});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->route, Route::host);
  EXPECT_EQ(d->reason, Reason::buffer_is_host_memory);
  q.buffer.kind = MemoryKind::host_pinned;
  EXPECT_EQ(decide(q, {})->route, Route::host);
}

TEST(Router, CompatOnNeverAsksCuFile) {
  RouteQuery q = device_query(CompatMode::on);
  EXPECT_FALSE(needs_cufile(q));
  auto d = decide(q, registered(true));
  EXPECT_EQ(d->route, Route::staged);
  EXPECT_EQ(d->reason, Reason::compat_mode_on);
}

TEST(Router, SmallRequestsStayStagedInAuto) {
  RouteQuery q = device_query(CompatMode::automatic, 4096);
  EXPECT_FALSE(needs_cufile(q));
  auto d = decide(q, registered(true));
  EXPECT_EQ(d->route, Route::staged);
  EXPECT_EQ(d->reason, Reason::below_gds_threshold);
  EXPECT_EQ(d->detail, "16384 bytes") << "one detail whatever the size";
  EXPECT_EQ(decide(device_query(CompatMode::automatic, 100), registered(true))->detail, d->detail);
}

TEST(Router, AutoUsesCuFileOnlyWhereItGoesDirect) {
  auto nvfs = decide(device_query(), registered(true));
  EXPECT_EQ(nvfs->route, Route::nvfs);
  EXPECT_EQ(nvfs->reason, Reason::gds_available);
  auto p2p = decide(device_query(), registered(false, true));
  EXPECT_EQ(p2p->route, Route::p2p);
  auto none = decide(device_query(), registered(false));
  EXPECT_EQ(none->route, Route::staged);
  EXPECT_EQ(none->reason, Reason::nvidia_fs_not_loaded);
}

TEST(Router, AutoNamesTheFailedCuFileStep) {
  CuFileFacts missing;
  missing.library = Status(ErrorCode::unavailable, "libcufile.so.0 not found");
  auto d1 = decide(device_query(), missing);
  EXPECT_EQ(d1->route, Route::staged);
  EXPECT_EQ(d1->reason, Reason::cufile_library_missing);
  EXPECT_THAT(d1->detail, HasSubstr("libcufile.so.0 not found"));

  CuFileFacts driver;
  driver.driver = Status(ErrorCode::unavailable, "cuFileDriverOpen failed with cuFile error 5001");
  EXPECT_EQ(decide(device_query(), driver)->reason, Reason::cufile_driver_open_failed);

  auto d3 = decide(device_query(), registration_failed());
  EXPECT_EQ(d3->route, Route::staged);
  EXPECT_EQ(d3->reason, Reason::cufile_handle_register_failed);
  EXPECT_THAT(d3->detail, HasSubstr("5027"));
  EXPECT_THAT(d3->detail, HasSubstr("ID_FS_USAGE"));
}

TEST(Router, CompatOffUsesCuFileEvenWithoutNvidiaFs) {
  auto d = decide(device_query(CompatMode::off), registered(false));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->route, Route::cufile_posix);
  EXPECT_EQ(d->reason, Reason::compat_mode_off);
  // Small requests too: off means always.
  EXPECT_TRUE(needs_cufile(device_query(CompatMode::off, 10)));
  EXPECT_EQ(decide(device_query(CompatMode::off, 10), registered(true))->route, Route::nvfs);
}

TEST(Router, CompatOffFailsClearlyWhenCuFileCannotBeUsed) {
  auto d = decide(device_query(CompatMode::off), registration_failed());
  ASSERT_THAT(d, StatusIs(ErrorCode::unavailable));
  EXPECT_THAT(d.status().message(), HasSubstr("compat mode off requires cuFile"));
  EXPECT_THAT(d.status().message(), HasSubstr("/data/shard.bin"));
  EXPECT_THAT(d.status().message(), HasSubstr("5027"));
}

TEST(Router, ForcedCompatModeIsReportedAsSuch) {
  CuFileFacts f = registered(true);
  f.forced_compat = true;
  auto a = decide(device_query(), f);
  EXPECT_EQ(a->route, Route::staged);
  EXPECT_EQ(a->reason, Reason::cufile_forced_compat);
  auto off = decide(device_query(CompatMode::off), f);
  EXPECT_EQ(off->route, Route::cufile_posix);
  EXPECT_EQ(off->reason, Reason::compat_mode_off);
}

TEST(Router, StrictModeRefusesBeforeIo) {
  struct Case {
    RouteQuery q;
    CuFileFacts f;
    const char* why;
  };
  RouteQuery host = device_query();
  host.buffer = BufferKind{MemoryKind::host_pageable, -1};
  RouteQuery on = device_query(CompatMode::on);
  CuFileFacts forced = registered(true);
  forced.forced_compat = true;
  for (Case c : {Case{host, {}, "host memory"}, Case{on, {}, "compat mode is on"},
                 Case{device_query(), registration_failed(), "5027"}, Case{device_query(), registered(false), "nvidia-fs"},
                 Case{device_query(), forced, "CUFILE_FORCE_COMPAT_MODE"}}) {
    c.q.require = Requirement::gds;
    auto d = decide(c.q, c.f);
    ASSERT_THAT(d, StatusIs(ErrorCode::failed_precondition)) << c.why;
    EXPECT_THAT(d.status().message(), HasSubstr("require=gds"));
    EXPECT_THAT(d.status().message(), HasSubstr(c.why));
    EXPECT_THAT(d.status().message(), HasSubstr("no I/O was done"));
  }
}

TEST(Router, StrictModeIgnoresTheThreshold) {
  RouteQuery q = device_query(CompatMode::automatic, 512);
  q.require = Requirement::gds;
  EXPECT_TRUE(needs_cufile(q));
  auto d = decide(q, registered(true));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->route, Route::nvfs);
}

TEST(Router, ManagedMemoryIsStaged) {
  RouteQuery q = device_query();
  q.buffer = BufferKind{MemoryKind::managed, 0};
  EXPECT_FALSE(needs_cufile(q));
  EXPECT_EQ(decide(q, {})->reason, Reason::managed_memory);
}

}  // namespace
}  // namespace ferry::detail
