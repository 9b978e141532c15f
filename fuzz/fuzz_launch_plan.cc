// libFuzzer target: the launch-plan reader (kernels/mla_decode/launch_plan.h), the one way a plan
// from outside the planner reaches a kernel. The input picks a launch (batch, workers, kv_tile,
// lengths), plans it, checks that the planner's own plan is accepted (and that the allocation-free
// writer of plan_writer.h wrote the same words as plan_work + encode_plan), then damages the
// encoded words as the rest of the input says (overwrite or xor at chosen positions, or truncate)
// and runs check_plan on the result: it must either refuse with std::invalid_argument or accept a
// plan all of whose indices lie inside the launch. Anything else (another exception, an index out
// of range, a sanitizer report) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "mla_decode/launch_plan.h"
#include "mla_decode/plan_writer.h"
#include "mla_decode/work_plan.h"

namespace {

struct Reader {
  const uint8_t* data;
  size_t size;
  uint32_t u32() {
    uint32_t v = 0;
    const size_t n = size < 4 ? size : 4;
    std::memcpy(&v, data, n);
    data += n;
    size -= n;
    return v;
  }
};

void require(bool ok) {
  if (!ok) std::abort();  // a finding
}

void walk(const mlatune::PlanView& v, int32_t max_len) {
  require(v.slots <= mlatune::max_plan_slots(v.batch, v.workers));
  for (int32_t w = 0; w < v.workers; ++w) {
    require(0 <= v.worker_first(w) && v.worker_first(w) <= v.worker_first(w + 1) &&
            v.worker_first(w + 1) <= v.pieces);
  }
  for (int32_t i = 0; i < v.pieces; ++i) {
    const mlatune::WorkPiece p = v.piece(i);
    require(p.seq >= 0 && p.seq < v.batch);
    require(0 <= p.key_begin && p.key_begin <= p.key_end && p.key_end <= max_len);
    require(p.slot >= -1 && p.slot < v.slots);
  }
  for (int32_t c = 0; c < v.cut_seqs; ++c) require(v.cut_seq(c) >= 0 && v.cut_seq(c) < v.batch);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in{data, size};
  const int32_t batch = 1 + static_cast<int32_t>(in.u32() % 64);
  const int32_t workers = 1 + static_cast<int32_t>(in.u32() % 300);
  const int32_t tile = 16 << (in.u32() % 3);
  const int32_t max_len = 1 + static_cast<int32_t>(in.u32() % 20000);
  std::vector<int32_t> lens(static_cast<size_t>(batch));
  for (int32_t& l : lens) l = static_cast<int32_t>(in.u32() % (static_cast<uint32_t>(max_len) + 1));

  std::vector<int32_t> words(static_cast<size_t>(mlatune::max_plan_words(batch, workers)));
  const int64_t used = mlatune::write_launch_plan(lens, tile, workers, max_len, words);
  words.resize(static_cast<size_t>(used));
  walk(mlatune::check_plan(words, batch, workers, tile, max_len), max_len);  // must not throw
  // The allocation-free writer and the planner it replaces on the decode path agree word for word.
  std::vector<int32_t> want(static_cast<size_t>(mlatune::max_plan_words(batch, workers)));
  want.resize(static_cast<size_t>(
      mlatune::encode_plan(mlatune::plan_work(lens, tile, workers, max_len), want)));
  require(want == words);

  // Damage: (position, value, mode) triples; mode 3 truncates.
  while (in.size >= 12) {
    const uint32_t pos = in.u32();
    const uint32_t value = in.u32();
    const uint32_t mode = in.u32() % 4;
    if (words.empty()) break;
    const size_t at = pos % words.size();
    if (mode == 0) words[at] = static_cast<int32_t>(value);
    if (mode == 1) words[at] ^= static_cast<int32_t>(value);
    if (mode == 2) {  // +-2, wrapping (unsigned: no overflow in the harness itself)
      words[at] = static_cast<int32_t>(static_cast<uint32_t>(words[at]) + value % 5 - 2);
    }
    if (mode == 3) words.resize(at);
  }
  try {
    walk(mlatune::check_plan(words, batch, workers, tile, max_len), max_len);
  } catch (const std::invalid_argument&) {
    // refused: what a damaged plan should get
  }
  return 0;
}
