#include "mla_decode/memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(MLATUNE_WITH_HIP)
#include "mla_decode/hip/hip_memory.h"
#endif

namespace mlatune {
namespace {

TEST(HostMemorySpace, IsTheHostBackendsSpace) {
  MemorySpace& m = memory_space(Backend::kHost);
  EXPECT_EQ(m.name(), "host");
  EXPECT_EQ(&m, &memory_space(Backend::kHost));  // one process-wide instance
  EXPECT_EQ(m.timer_description(), "host steady_clock");
}

TEST(HostMemorySpace, AllocationsAre256ByteAlignedForAnySize) {
  MemorySpace& m = memory_space(Backend::kHost);
  for (size_t bytes : {size_t{1}, size_t{3}, size_t{255}, size_t{256}, size_t{257}, size_t{4097},
                       size_t{1} << 20}) {
    void* p = m.allocate(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u) << bytes;
    m.fill(p, 0x5a, bytes);  // the whole requested size is usable
    EXPECT_EQ(static_cast<uint8_t*>(p)[bytes - 1], 0x5a);
    m.release(p);
  }
}

TEST(HostMemorySpace, ZeroBytesGiveNullAndNullReleasesAreFine) {
  MemorySpace& m = memory_space(Backend::kHost);
  EXPECT_EQ(m.allocate(0), nullptr);
  m.release(nullptr);
  m.copy_to_device(nullptr, nullptr, 0);
  m.copy_to_host(nullptr, nullptr, 0);
  m.fill(nullptr, 0xff, 0);
}

TEST(HostMemorySpace, ASizeThatOverflowsWhenAlignedThrowsLaunchError) {
  // Refused before reaching the allocator (a merely huge size would abort under ASan).
  EXPECT_THROW(memory_space(Backend::kHost).allocate(SIZE_MAX - 10), LaunchError);
}

TEST(HostMemorySpace, CopiesRoundTripAndFillWritesEveryByte) {
  MemorySpace& m = memory_space(Backend::kHost);
  std::vector<int32_t> in(1000);
  std::iota(in.begin(), in.end(), -500);
  const size_t bytes = in.size() * sizeof(int32_t);
  DeviceBuffer buf(m, bytes);
  ASSERT_EQ(buf.size(), bytes);
  m.copy_to_device(buf.data(), in.data(), bytes);
  std::vector<int32_t> out(in.size(), 0);
  m.copy_to_host(out.data(), buf.data(), bytes);
  EXPECT_EQ(out, in);

  m.fill(buf.data(), 0xa5, bytes);
  m.synchronize();
  std::vector<uint8_t> raw(bytes, 0);
  m.copy_to_host(raw.data(), buf.data(), bytes);
  EXPECT_EQ(raw, std::vector<uint8_t>(bytes, 0xa5));
}

TEST(HostMemorySpace, DeviceBufferMovesOwnership) {
  MemorySpace& m = memory_space(Backend::kHost);
  DeviceBuffer a(m, 512);
  void* p = a.data();
  DeviceBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): documented moved-from state
  EXPECT_EQ(a.size(), 0u);
  DeviceBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.size(), 512u);
}

TEST(HostMemorySpace, TimerIntervalsAreNonNegativeAndNested) {
  MemorySpace& m = memory_space(Backend::kHost);
  auto outer = m.make_timer();
  auto inner = m.make_timer();
  outer->start();
  inner->start();
  inner->stop();
  outer->stop();
  const double in_s = inner->seconds();
  const double out_s = outer->seconds();
  EXPECT_GE(in_s, 0.0);
  EXPECT_GE(out_s, in_s);  // the clock is monotonic and the outer interval contains the inner
  EXPECT_EQ(inner->seconds(), in_s);  // reading again does not change the measurement
}

TEST(HostMemorySpace, TimerRefusesAReadBeforeStop) {
  auto t = memory_space(Backend::kHost).make_timer();
  EXPECT_THROW(t->seconds(), std::logic_error);
  t->start();
  EXPECT_THROW(t->seconds(), std::logic_error);
  t->stop();
  EXPECT_GE(t->seconds(), 0.0);
  t->start();  // restarting invalidates the previous reading until the next stop
  EXPECT_THROW(t->seconds(), std::logic_error);
}

TEST(HostMemorySpace, FlushCachesGrowsShrinksAndRepeats) {
  MemorySpace& m = memory_space(Backend::kHost);
  m.flush_caches(0);
  m.flush_caches(1 << 16);
  m.flush_caches(1 << 20);
  m.flush_caches(1 << 10);  // smaller than the kept buffer
  m.flush_caches(1 << 20);
  m.synchronize();
}

#if defined(MLATUNE_WITH_HIP)
TEST(HipMemorySpace, ObtainingItDoesNotTouchTheDevice) {
  // Must hold in a GPU build run on a machine without a GPU, too.
  MemorySpace& m = memory_space(Backend::kHip);
  EXPECT_EQ(m.name(), "hip");
  EXPECT_EQ(m.timer_description(), "device events (hipEventElapsedTime)");
  EXPECT_EQ(&m, &memory_space(Backend::kHip));
}

bool have_gpu() {
  try {
    hip_device_info();
    return true;
  } catch (const LaunchError&) {
    return false;
  }
}

TEST(HipMemorySpace, WithoutADeviceEveryUseThrowsNoGpuDevice) {
  if (have_gpu()) GTEST_SKIP() << "this machine has a GPU";
  MemorySpace& m = memory_space(Backend::kHip);
  for (int attempt = 0; attempt < 2; ++attempt) {  // the failed check is not cached as success
    try {
      m.allocate(256);
      FAIL() << "expected LaunchError";
    } catch (const LaunchError& e) {
      EXPECT_NE(std::string(e.what()).find("no GPU device"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(m.synchronize(), LaunchError);
  EXPECT_THROW(m.make_timer(), LaunchError);
}

TEST(HipDeviceInfo, DescribesTheDevice) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  const DeviceInfo d = hip_device_info();
  EXPECT_EQ(d.backend, "hip");
  EXPECT_TRUE(d.arch.rfind("sm_", 0) == 0 || d.arch.rfind("gfx", 0) == 0) << d.arch;
  EXPECT_EQ(d.arch.find(':'), std::string::npos) << d.arch;
  EXPECT_FALSE(d.name.empty());
  EXPECT_GT(d.compute_units, 0);
  EXPECT_NE(d.driver_version.find('.'), std::string::npos) << d.driver_version;
  EXPECT_NE(d.runtime_version.find('.'), std::string::npos) << d.runtime_version;
  EXPECT_TRUE(d.matches(hip_device_info()));
  std::cout << d.to_string() << "\n";
}

TEST(HipMemorySpace, RoundTripsFillsTimesAndFlushesOnTheDevice) {
  if (!have_gpu()) GTEST_SKIP() << "no GPU";
  MemorySpace& m = memory_space(Backend::kHip);
  std::vector<int32_t> in(100000);
  std::iota(in.begin(), in.end(), -7);
  const size_t bytes = in.size() * sizeof(int32_t);
  DeviceBuffer buf(m, bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % 256, 0u);
  EXPECT_EQ(m.allocate(0), nullptr);
  m.copy_to_device(buf.data(), in.data(), bytes);
  std::vector<int32_t> out(in.size(), 0);
  m.copy_to_host(out.data(), buf.data(), bytes);
  EXPECT_EQ(out, in);

  auto timer = m.make_timer();
  timer->start();
  m.fill(buf.data(), 0x3c, bytes);
  m.flush_caches(size_t{64} << 20);
  m.flush_caches(size_t{1} << 20);  // smaller: reuses the scratch buffer
  timer->stop();
  EXPECT_GE(timer->seconds(), 0.0);
  m.synchronize();
  std::vector<uint8_t> raw(bytes, 0);
  m.copy_to_host(raw.data(), buf.data(), bytes);
  EXPECT_EQ(raw, std::vector<uint8_t>(bytes, 0x3c));
}
#else
TEST(HipMemorySpace, ANonGpuBuildRefusesTheHipBackend) {
  try {
    memory_space(Backend::kHip);
    FAIL() << "expected LaunchError";
  } catch (const LaunchError& e) {
    EXPECT_NE(std::string(e.what()).find("-DMLATUNE_GPU=nvidia or amd"), std::string::npos)
        << e.what();
  }
}
#endif

}  // namespace
}  // namespace mlatune
