// mlatune variants: the variant registry of this build.
#include <cstdio>

#include "mla_decode/registry.h"
#include "tuner/cli/guard.h"

namespace mlatune::cli {
namespace {
std::string join(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}
}  // namespace

void add_variants_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("variants", "list the kernel variants of this build");
  cmd->callback([&exit_code] {
    exit_code = run_guarded([] {
      Registry r = builtin_registry();
      std::printf("%-26s %-7s %-32s %s\n", "variant", "backend", "code identity",
                  "launch parameters");
      for (const Variant* v : r.all()) {
        ParamSpace s = v->param_space();
        std::printf("%-26s %-7s %-32s splits={%s} tile={%s} rows={%s} workers={%s}\n",
                    std::string(v->name()).c_str(), std::string(backend_name(v->backend())).c_str(),
                    std::string(v->code_identity()).c_str(), join(s.kv_splits).c_str(),
                    join(s.kv_tile).c_str(), join(s.block_rows).c_str(), join(s.workers).c_str());
        std::printf("  %s\n", std::string(v->description()).c_str());
      }
      std::printf("kernel build id: %s\n", kernel_build_id(r).c_str());
      return kExitOk;
    });
  });
}

}  // namespace mlatune::cli
