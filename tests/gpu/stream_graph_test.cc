// Every GPU variant launches on the caller's stream (DecodeArgs::stream) and nowhere else, and a
// launch can be captured into a graph: for each variant, with a split-KV or a persistent launch
// (combine kernel included), the output on a stream of its own and the output of a captured
// graph replayed there equal, bit for bit, the output on the default stream. Captures use the
// global mode, in which a synchronising call or work on the legacy default stream during the
// capture fails it. Skips without a GPU.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gpu/gpu_test_problem.h"
#include "mla_decode/hip/hip_memory.h"
#include "mla_decode/memory.h"
#include "mla_decode/registry.h"
#include "mla_decode/variant.h"

namespace mlatune {
namespace {

using gpu_test::Config;
using gpu_test::DeviceInputs;
using gpu_test::GuardedBuffer;
using gpu_test::Problem;

// How the launch is issued.
enum class Issue { kDefaultStream, kOwnStream, kGraph };

struct Launch {
  const Variant* v;
  const LaunchParams* lp;
  const DecodeShape* shape;
  DecodeArgs* args;
};

class StreamGraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    m_ = gpu_test::gpu_or_null(&why);
    if (!m_) GTEST_SKIP() << why;
    stream_ = std::make_unique<HipStream>();
  }

  // The output of `v` with `lp` on `p`, issued as `how`.
  std::vector<uint16_t> run(const Variant& v, const LaunchParams& lp, const Problem& p, Issue how) {
    const DeviceInputs in(*m_, p);
    GuardedBuffer out(*m_, static_cast<size_t>(p.shape.out_elems()) * 2, 0xff);
    GuardedBuffer lse(*m_, static_cast<size_t>(p.shape.rows()) * 4, 0xff);
    GuardedBuffer ws(*m_, v.workspace_bytes(p.shape, lp), 0xff);
    const std::vector<int32_t> plan = plan_launch(v, p.shape, lp, p.kv_lens);
    DecodeArgs a = in.args();
    a.out = reinterpret_cast<uint16_t*>(out.data());
    a.lse = reinterpret_cast<float*>(lse.data());
    a.workspace = ws.data();
    a.workspace_bytes = ws.size();
    a.plan = plan.empty() ? nullptr : plan.data();
    a.plan_words = plan.size();
    m_->synchronize();  // the inputs' fills and copies are done before another stream reads them
    if (how != Issue::kDefaultStream) a.stream = stream_->handle();
    Launch launch{&v, &lp, &p.shape, &a};
    auto enqueue = [](void* c) {
      const Launch& l = *static_cast<Launch*>(c);
      l.v->run(*l.shape, *l.lp, *l.args);
    };
    try {
      if (how == Issue::kGraph) {
        stream_->run_captured(enqueue, &launch);
      } else {
        enqueue(&launch);
      }
      stream_->synchronize();
      m_->synchronize();
    } catch (const LaunchError& e) {
      ADD_FAILURE() << e.what();
    }
    EXPECT_TRUE(out.guards_intact() && lse.guards_intact() && ws.guards_intact());
    return out.read<uint16_t>();
  }

  MemorySpace* m_ = nullptr;
  std::unique_ptr<HipStream> stream_;
};

TEST_F(StreamGraphTest, EveryGpuVariantRunsOnTheCallersStreamAndInAGraph) {
  const Registry registry = builtin_registry();
  int checked = 0;
  for (DType kv : {DType::kBF16, DType::kFP8E4M3FN}) {
    Config c;
    c.kv_dtype = kv;
    c.page_size = 64;
    c.lens = {700, 1, 2100};
    const Problem p = gpu_test::make_problem(c);
    for (const Variant* v : registry.all()) {
      if (v->backend() != Backend::kHip) continue;
      // The first launch that needs a second kernel (a combine step): splits, or a plan.
      for (const LaunchParams& lp : v->param_space().enumerate()) {
        if (!v->can_implement(p.shape, lp).ok || (lp.kv_splits < 2 && lp.workers == 0)) continue;
        SCOPED_TRACE(std::string(v->name()) + " " + lp.to_string() + " " + gpu_test::describe(c));
        const std::vector<uint16_t> want = run(*v, lp, p, Issue::kDefaultStream);
        EXPECT_EQ(run(*v, lp, p, Issue::kOwnStream), want);
        EXPECT_EQ(run(*v, lp, p, Issue::kGraph), want);
        ++checked;
        break;
      }
    }
  }
  // bf16: portable, mma, wgmma; fp8: portable, mma, fp8kv, fp8kv persistent (NVIDIA sm_90a).
  EXPECT_GE(checked, 4);
}

}  // namespace
}  // namespace mlatune
