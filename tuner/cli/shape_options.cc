#include "tuner/cli/shape_options.h"

#include "mla_decode/problem.h"
#include "tuner/cli/decimal_option.h"

namespace mlatune::cli {

void ShapeOptions::add_to(CLI::App& cmd) {
  const auto dtypes = CLI::IsMember({"bf16", "fp8_e4m3fn", "fp8_e4m3fnuz"});
  add_decimal_option(cmd, "--heads", heads, "query heads per KV head")->capture_default_str();
  add_decimal_option(cmd, "--qlen", qlen, "query tokens per sequence")->capture_default_str();
  cmd.add_option("--q-dtype", q_dtype, "q dtype")->check(dtypes)->capture_default_str();
  cmd.add_option("--kv-dtype", kv_dtype, "KV cache dtype")->check(dtypes)->capture_default_str();
  add_decimal_option(cmd, "--page-size", page_size, "KV rows per page")->required();
  cmd.add_flag("--lse", lse, "the call returns the LSE");
  add_decimal_option(cmd, "--batch", batch, "sequences in the call")->required();
  add_decimal_option(cmd, "--max-kv", max_kv, "longest KV length in the call")->required();
}

mlatune_decode_key ShapeOptions::key() const {
  mlatune_decode_key k{};
  k.heads = heads;
  k.qlen = qlen;
  k.q_dtype = static_cast<int32_t>(parse_dtype(q_dtype).value_or(DType::kBF16));
  k.kv_dtype = static_cast<int32_t>(parse_dtype(kv_dtype).value_or(DType::kBF16));
  k.page_size = page_size;
  k.lse = lse ? 1 : 0;
  k.batch = batch;
  k.max_kv_len = max_kv;
  return k;
}

std::string ShapeOptions::describe() const {
  return "heads=" + std::to_string(heads) + " qlen=" + std::to_string(qlen) + " q=" + q_dtype +
         " kv=" + kv_dtype + " page=" + std::to_string(page_size) + " lse=" + (lse ? "1" : "0") +
         " batch=" + std::to_string(batch) + " max_kv=" + std::to_string(max_kv);
}

}  // namespace mlatune::cli
