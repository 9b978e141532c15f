// The minimal valid host config the config tests edit or extend. Their line:column expectations
// are relative to this exact text (eleven lines; columns are 1-based; appended lines are 12 on).
#pragma once

namespace mlatune::testing {

inline constexpr const char* kBaseConfig = R"(backend: host
spaces:
  - heads: [16]
    qlen: [1, 2]
    dtypes: [bf16/bf16]
    page_size: [16]
    lse: [false]
    batch_edges: [4]
    kv_len_edges: [256]
tolerances:
  bf16/bf16: {atol: 1.0e-3, rtol: 1.0e-2, min_cosine: 0.9999, lse_atol: 1.0e-4}
)";

}  // namespace mlatune::testing
