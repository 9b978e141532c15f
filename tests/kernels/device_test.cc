#include "mla_decode/device.h"

#include <gtest/gtest.h>
#include <sys/utsname.h>

#include <thread>

namespace mlatune {
namespace {

TEST(HostDeviceInfo, FieldsAreFilledFromTheMachine) {
  const DeviceInfo d = host_device_info();
  EXPECT_EQ(d.backend, "host");
  EXPECT_FALSE(d.arch.empty());
  EXPECT_FALSE(d.name.empty());
  EXPECT_GE(d.compute_units, 1);
  EXPECT_FALSE(d.driver_version.empty());
  EXPECT_FALSE(d.runtime_version.empty());
  struct utsname u {};
  ASSERT_EQ(uname(&u), 0);
  EXPECT_EQ(d.arch, u.machine);
  EXPECT_EQ(d.driver_version, u.release);
  const unsigned hc = std::thread::hardware_concurrency();
  if (hc > 0) {
    EXPECT_EQ(d.compute_units, static_cast<int32_t>(hc));
  }
}

TEST(HostDeviceInfo, IsStableAndMatchesItself) {
  const DeviceInfo a = host_device_info();
  const DeviceInfo b = host_device_info();
  EXPECT_TRUE(a.matches(b));
  EXPECT_EQ(a.to_string(), b.to_string());
}

DeviceInfo sample() {
  return {"host", "x86_64", "Some CPU @ 3.0GHz", 16, "6.1.0-18-amd64", "gcc 12.2.0"};
}

TEST(DeviceInfo, EachComparedFieldBreaksTheMatch) {
  const DeviceInfo base = sample();
  ASSERT_TRUE(base.matches(sample()));
  DeviceInfo d = sample();
  d.backend = "hip";
  EXPECT_FALSE(base.matches(d));
  d = sample();
  d.arch = "aarch64";
  EXPECT_FALSE(base.matches(d));
  d = sample();
  d.name = "Some CPU @ 3.1GHz";
  EXPECT_FALSE(base.matches(d));
  d = sample();
  d.compute_units = 15;
  EXPECT_FALSE(base.matches(d));
}

TEST(DeviceInfo, VersionsDoNotAffectMatching) {
  DeviceInfo d = sample();
  d.driver_version = "6.5.0";
  d.runtime_version = "clang 17";
  EXPECT_TRUE(sample().matches(d));
  EXPECT_TRUE(d.matches(sample()));
}

TEST(DeviceInfo, ToStringIsOneLineWithEveryField) {
  const std::string s = sample().to_string();
  EXPECT_EQ(s.find('\n'), std::string::npos);
  for (const char* part :
       {"host", "x86_64", "Some CPU @ 3.0GHz", "16", "6.1.0-18-amd64", "gcc 12.2.0"}) {
    EXPECT_NE(s.find(part), std::string::npos) << part << " missing from " << s;
  }
}

}  // namespace
}  // namespace mlatune
