#include "mla_decode/launch_plan.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace mlatune {
namespace {

struct Encoded {
  WorkPlan plan;
  std::vector<int32_t> words;
};

Encoded encode(const std::vector<int32_t>& lens, int32_t tile, int32_t workers, int32_t max_len) {
  Encoded e;
  e.plan = plan_work(lens, tile, workers, max_len);
  e.words.assign(static_cast<size_t>(max_plan_words(static_cast<int32_t>(lens.size()), workers)),
                 -7);
  e.words.resize(static_cast<size_t>(encode_plan(e.plan, e.words)));
  return e;
}

std::vector<int32_t> random_lens(std::mt19937& rng, int32_t max_len) {
  std::uniform_int_distribution<int32_t> batch(1, 40), len(0, max_len);
  std::vector<int32_t> lens(static_cast<size_t>(batch(rng)));
  for (int32_t& l : lens) l = len(rng);
  return lens;
}

// What a kernel relies on of an accepted plan: every index it reads through is in range.
void expect_in_bounds(const PlanView& v, int32_t max_len) {
  EXPECT_LE(v.slots, max_plan_slots(v.batch, v.workers));
  for (int32_t w = 0; w < v.workers; ++w) {
    ASSERT_LE(0, v.worker_first(w));
    ASSERT_LE(v.worker_first(w), v.worker_first(w + 1));
    ASSERT_LE(v.worker_first(w + 1), v.pieces);
  }
  for (int32_t i = 0; i < v.pieces; ++i) {
    const WorkPiece p = v.piece(i);
    ASSERT_GE(p.seq, 0);
    ASSERT_LT(p.seq, v.batch);
    ASSERT_LE(0, p.key_begin);
    ASSERT_LE(p.key_begin, p.key_end);
    ASSERT_LE(p.key_end, max_len);
    ASSERT_GE(p.slot, -1);
    ASSERT_LT(p.slot, v.slots);
  }
  for (int32_t c = 0; c < v.cut_seqs; ++c) {
    ASSERT_GE(v.cut_seq(c), 0);
    ASSERT_LT(v.cut_seq(c), v.batch);
  }
}

TEST(LaunchPlan, RoundTripsEveryPlan) {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 300; ++iter) {
    const int32_t tile = iter % 2 ? 64 : 16;
    const int32_t workers = 1 + static_cast<int32_t>(rng() % 80);
    const int32_t max_len = 1 + static_cast<int32_t>(rng() % 3000);
    const std::vector<int32_t> lens = random_lens(rng, max_len);
    const int32_t batch = static_cast<int32_t>(lens.size());
    const Encoded e = encode(lens, tile, workers, max_len);
    SCOPED_TRACE("iter " + std::to_string(iter));
    EXPECT_LE(static_cast<int64_t>(e.words.size()), max_plan_words(batch, workers));
    EXPECT_EQ(e.words.size() % 4, 0u) << "sections are whole 16-byte lines";
    const PlanView v = check_plan(e.words, batch, workers, tile, max_len);
    ASSERT_EQ(v.pieces, static_cast<int32_t>(e.plan.pieces.size()));
    EXPECT_EQ(v.slots, e.plan.slots());
    EXPECT_EQ(v.layout.pieces % 4, 0);
    for (int32_t w = 0; w <= workers; ++w) EXPECT_EQ(v.worker_first(w), e.plan.worker_first[w]);
    for (int32_t i = 0; i < v.pieces; ++i) {
      const WorkPiece a = v.piece(i), b = e.plan.pieces[i];
      EXPECT_EQ(a.seq, b.seq);
      EXPECT_EQ(a.key_begin, b.key_begin);
      EXPECT_EQ(a.key_end, b.key_end);
      EXPECT_EQ(a.slot, b.slot);
    }
    int32_t c = 0;
    for (int32_t b = 0; b <= batch; ++b) {
      EXPECT_EQ(v.seq_first_slot(b), e.plan.seq_first_slot[b]);
      if (b < batch && e.plan.seq_first_slot[b + 1] > e.plan.seq_first_slot[b]) {
        ASSERT_LT(c, v.cut_seqs);
        EXPECT_EQ(v.cut_seq(c++), b);
      }
    }
    EXPECT_EQ(c, v.cut_seqs);
  }
}

TEST(LaunchPlan, RefusesAnotherLaunchsPlan) {
  const std::vector<int32_t> lens{100, 3000, 7};
  const Encoded e = encode(lens, 64, 8, 4096);
  EXPECT_NO_THROW(check_plan(e.words, 3, 8, 64, 4096));
  auto message = [&](int32_t batch, int32_t workers, int32_t tile, int32_t max_len) {
    try {
      check_plan(e.words, batch, workers, tile, max_len);
    } catch (const std::invalid_argument& ex) {
      return std::string(ex.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(message(4, 8, 64, 4096), "launch plan: batch 3 in word 2, the launch has 4");
  EXPECT_EQ(message(3, 16, 64, 4096), "launch plan: workers 8 in word 3, the launch has 16");
  EXPECT_EQ(message(3, 8, 32, 4096), "launch plan: kv_tile 64 in word 4, the launch has 32");
  EXPECT_NE(message(3, 8, 64, 2048).find("(sequence 1) ends at key"), std::string::npos)
      << message(3, 8, 64, 2048);
}

TEST(LaunchPlan, RefusesEveryTruncation) {
  const Encoded e = encode({500, 1, 4000, 64, 65}, 64, 12, 4096);
  for (size_t n = 0; n < e.words.size(); ++n) {
    const std::span<const int32_t> cut(e.words.data(), n);
    EXPECT_THROW(check_plan(cut, 5, 12, 64, 4096), std::invalid_argument) << n << " words";
  }
}

// A damaged plan is refused, or, where the damage leaves a well-formed plan (the end of a
// sequence's last piece: the lengths themselves are not in the plan), stays inside the launch.
TEST(LaunchPlan, DamagedWordsAreRefusedOrHarmless) {
  const std::vector<int32_t> lens{500, 1, 4000, 64, 65, 0, 129};
  const int32_t batch = static_cast<int32_t>(lens.size());
  const Encoded e = encode(lens, 64, 12, 4096);
  const PlanView good = check_plan(e.words, batch, 12, 64, 4096);
  // The words a damage must never get through: header, the ends of the worker ranges (an inner
  // boundary that moves is another valid deal), every piece's sequence, begin and slot, the slot
  // ranges and the cut list.
  std::vector<bool> must_refuse(e.words.size(), false);
  for (int64_t i = 0; i < kPlanHeaderWords; ++i) must_refuse[i] = true;
  must_refuse[good.layout.worker_first] = must_refuse[good.layout.worker_first + 12] = true;
  for (int32_t i = 0; i < good.pieces; ++i) {
    for (int k : {0, 1, 3}) must_refuse[good.layout.pieces + 4 * i + k] = true;
  }
  for (int32_t b = 0; b <= batch; ++b) must_refuse[good.layout.seq_first_slot + b] = true;
  for (int32_t c = 0; c < good.cut_seqs; ++c) must_refuse[good.layout.cut_seqs + c] = true;
  int refused = 0;
  for (size_t i = 0; i < e.words.size(); ++i) {
    for (int32_t delta : {1, -1, 1 << 20, INT32_MIN}) {
      std::vector<int32_t> bad = e.words;
      bad[i] = static_cast<int32_t>(static_cast<uint32_t>(bad[i]) + static_cast<uint32_t>(delta));
      try {
        const PlanView v = check_plan(bad, batch, 12, 64, 4096);
        EXPECT_FALSE(must_refuse[i]) << "word " << i << " + " << delta << " was accepted";
        expect_in_bounds(v, 4096);
      } catch (const std::invalid_argument&) {
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 0);
}

// Found by fuzz/fuzz_launch_plan: slot-range words whose difference overflows 32 bits (undefined
// behaviour in the reader, caught by UBSan) must be refused like any other bad range.
TEST(LaunchPlan, SlotRangesFarOutsideTheLaunchAreRefused) {
  const std::vector<int32_t> lens{500, 1, 4000};
  const Encoded e = encode(lens, 64, 12, 4096);
  const PlanView good = check_plan(e.words, 3, 12, 64, 4096);
  for (auto [first, next] : {std::pair{INT32_MIN, 0}, {INT32_MAX, -5}, {-3, INT32_MAX}}) {
    std::vector<int32_t> bad = e.words;
    bad[good.layout.seq_first_slot + 1] = first;
    bad[good.layout.seq_first_slot + 2] = next;
    EXPECT_THROW(check_plan(bad, 3, 12, 64, 4096), std::invalid_argument) << first << " " << next;
  }
}

TEST(LaunchPlan, EncodeNeedsRoom) {
  const WorkPlan plan = plan_work(std::vector<int32_t>{100, 200}, 64, 4, 256);
  std::vector<int32_t> small(8);
  EXPECT_THROW(encode_plan(plan, small), std::invalid_argument);
}

}  // namespace
}  // namespace mlatune
