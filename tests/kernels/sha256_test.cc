#include "common/sha256.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

namespace mlatune {
namespace {

TEST(Sha256, Fips180Vectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                       "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
}

TEST(Sha256, OneMillionAInOddSizedUpdates) {
  const std::string chunk(997, 'a');
  Sha256 h;
  size_t left = 1000000;
  for (size_t step = 1; left > 0; step = step * 3 % 997 + 1) {
    const size_t n = std::min(step, left);
    h.update(chunk.data(), n);
    left -= n;
  }
  EXPECT_EQ(h.finish_hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, DigestBytesMatchHex) {
  Sha256 h;
  h.update("abc");
  const std::array<uint8_t, 32> d = h.finish();
  EXPECT_EQ(d[0], 0xba);
  EXPECT_EQ(d[1], 0x78);
  EXPECT_EQ(d[31], 0xad);
}

// Lengths around the padding boundaries (55 fits the length in one block, 56 needs two), with
// digests from an independent implementation (Python hashlib) of bytes (7 * i + 3) mod 256.
struct Vector {
  size_t size;
  const char* hex;
};
constexpr Vector kBoundaryVectors[] = {
    {55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"},
    {56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"},
    {63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"},
    {64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"},
    {65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"},
    {119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"},
    {120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"},
    {127, "a8d23e75d936f303d248888d9b165ee543f4cbafcad3c9dd2a79bd84faa11d07"},
    {128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6"},
    {129, "307f8fc2c1622b92762e818d39a185d4d667ad49a4b07ceae1f4afa008a93ec4"},
};

TEST(Sha256, BlockBoundariesOneShotAndEverySplit) {
  for (const Vector& v : kBoundaryVectors) {
    std::string msg(v.size, '\0');
    for (size_t i = 0; i < v.size; ++i) msg[i] = static_cast<char>((7 * i + 3) % 256);
    EXPECT_EQ(sha256_hex(msg), v.hex) << "size " << v.size;
    for (size_t cut = 0; cut <= v.size; ++cut) {
      Sha256 h;
      h.update(msg.data(), cut);
      h.update(msg.data() + cut, v.size - cut);
      ASSERT_EQ(h.finish_hex(), v.hex) << "size " << v.size << " cut " << cut;
    }
    Sha256 bytewise;
    for (char c : msg) bytewise.update(&c, 1);
    EXPECT_EQ(bytewise.finish_hex(), v.hex) << "size " << v.size << " byte by byte";
  }
}

// Both compressions: the known vectors through the portable one, and the default (SHA-NI where
// this CPU has it) against the portable one on pseudo-random messages of many lengths, fed in
// uneven pieces so that multi-block runs and the buffered tail both occur.
TEST(Sha256, PortableAndCpuExtensionPathsAgree) {
  for (const Vector& v : kBoundaryVectors) {
    std::string msg(v.size, '\0');
    for (size_t i = 0; i < v.size; ++i) msg[i] = static_cast<char>((7 * i + 3) % 256);
    Sha256 portable(true);
    portable.update(msg);
    EXPECT_EQ(portable.finish_hex(), v.hex) << "portable, size " << v.size;
  }
  uint32_t x = 12345;
  for (size_t size : {0u, 1u, 63u, 64u, 65u, 191u, 1000u, 4096u, 100003u}) {
    std::string msg(size, '\0');
    for (char& c : msg) c = static_cast<char>((x = x * 1664525u + 1013904223u) >> 24);
    Sha256 fast;
    Sha256 portable(true);
    for (size_t at = 0, step = 1; at < size; at += step, step = step * 7 % 301 + 1) {
      const size_t n = std::min(step, size - at);
      fast.update(msg.data() + at, n);
      portable.update(msg.data() + at, n);
    }
    ASSERT_EQ(fast.finish_hex(), portable.finish_hex()) << "size " << size;
  }
  if (!sha256_cpu_extensions_available()) GTEST_SKIP() << "no SHA extensions: one path compared";
}

TEST(Sha256, DifferentInputsDiffer) {
  EXPECT_NE(sha256_hex("abc"), sha256_hex("abd"));
  EXPECT_NE(sha256_hex(std::string(1, '\0')), sha256_hex(""));
}

}  // namespace
}  // namespace mlatune
