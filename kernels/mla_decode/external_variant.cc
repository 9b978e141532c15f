#include "mla_decode/external_variant.h"

#include <array>
#include <string>

namespace mlatune {
namespace {

mlatune_decode_shape_v1 to_abi(const DecodeShape& s) {
  mlatune_decode_shape_v1 a{};
  a.batch = s.batch;
  a.qlen = s.qlen;
  a.heads = s.heads;
  a.page_size = s.page_size;
  a.q_dtype = static_cast<int32_t>(s.q_dtype);
  a.kv_dtype = static_cast<int32_t>(s.kv_dtype);
  a.q_scale = s.q_scale;
  a.kv_scale = s.kv_scale;
  a.sm_scale = s.sm_scale;
  a.return_lse = s.return_lse ? 1 : 0;
  a.num_pages = s.num_pages;
  a.max_pages_per_seq = s.max_pages_per_seq;
  a.max_kv_len = s.max_kv_len;
  return a;
}

mlatune_launch_params_v1 to_abi(const LaunchParams& p) {
  return {p.kv_splits, p.kv_tile, p.block_rows, p.workers};
}

std::vector<int32_t> copy_values(const int32_t* values, size_t count, const char* field,
                                 const std::string& name) {
  if (values == nullptr || count == 0) {
    throw std::invalid_argument("external variant '" + name + "': empty parameter list " + field);
  }
  return std::vector<int32_t>(values, values + count);
}

bool valid_name(std::string_view n) {
  if (n.empty() || n.size() >= 64 || n[0] < 'a' || n[0] > 'z') return false;
  for (char c : n) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

class ExternalVariant final : public Variant {
 public:
  explicit ExternalVariant(const mlatune_variant_v1& d) : d_(d) {
    name_ = d.name;
    if (!d.description || !d.backend || !d.code_identity) {
      throw std::invalid_argument("external variant '" + name_ + "': null string field");
    }
    std::string_view backend = d.backend;
    if (backend == "host") {
      backend_ = Backend::kHost;
    } else if (backend == "hip") {
      backend_ = Backend::kHip;
    } else {
      throw std::invalid_argument("external variant '" + name_ + "': unknown backend '" +
                                  std::string(backend) + "'");
    }
    if (std::string_view(d.code_identity).empty()) {
      throw std::invalid_argument("external variant '" + name_ + "': empty code identity");
    }
    space_.kv_splits = copy_values(d.kv_splits, d.kv_splits_count, "kv_splits", name_);
    space_.kv_tile = copy_values(d.kv_tile, d.kv_tile_count, "kv_tile", name_);
    space_.block_rows = copy_values(d.block_rows, d.block_rows_count, "block_rows", name_);
    space_.workers = copy_values(d.workers, d.workers_count, "workers", name_);
  }

  std::string_view name() const override { return name_; }
  std::string_view description() const override { return d_.description; }
  Backend backend() const override { return backend_; }
  std::string_view code_identity() const override { return d_.code_identity; }
  ParamSpace param_space() const override { return space_; }

  Support can_implement(const DecodeShape& s, const LaunchParams& p) const override {
    if (!space_.contains(p)) return Support::no("launch parameters outside the declared space");
    std::array<char, 256> why{};
    auto shape = to_abi(s);
    auto params = to_abi(p);
    if (d_.can_implement(d_.user, &shape, &params, why.data(), why.size()) == 1) {
      return Support::yes();
    }
    why.back() = '\0';
    return Support::no(why[0] ? why.data() : "refused by the external variant");
  }

  size_t workspace_bytes(const DecodeShape& s, const LaunchParams& p) const override {
    auto shape = to_abi(s);
    auto params = to_abi(p);
    return static_cast<size_t>(d_.workspace_bytes(d_.user, &shape, &params));
  }

  void run(const DecodeShape& s, const LaunchParams& p, const DecodeArgs& a) const override {
    auto shape = to_abi(s);
    auto params = to_abi(p);
    mlatune_decode_args_v1 args{a.q,   a.kv,  a.block_table, a.kv_lens,
                                a.out, a.lse, a.workspace,   a.workspace_bytes};
    std::array<char, 512> error{};
    if (d_.run(d_.user, &shape, &params, &args, error.data(), error.size()) != 0) {
      error.back() = '\0';
      throw LaunchError(name_ + ": " + (error[0] ? error.data() : "launch failed"));
    }
  }

 private:
  mlatune_variant_v1 d_;
  std::string name_;
  Backend backend_ = Backend::kHost;
  ParamSpace space_;
};

}  // namespace

std::unique_ptr<Variant> wrap_external_variant(const mlatune_variant_v1* d) {
  if (d == nullptr) throw std::invalid_argument("external variant: null descriptor");
  if (d->abi_version != MLATUNE_VARIANT_ABI_VERSION) {
    throw std::invalid_argument("external variant: ABI version " + std::to_string(d->abi_version) +
                                ", expected " + std::to_string(MLATUNE_VARIANT_ABI_VERSION));
  }
  if (d->struct_size < sizeof(mlatune_variant_v1)) {
    throw std::invalid_argument("external variant: descriptor too small (" +
                                std::to_string(d->struct_size) + " bytes)");
  }
  if (d->name == nullptr || !valid_name(d->name)) {
    throw std::invalid_argument("external variant: name must match [a-z][a-z0-9_]{0,62}");
  }
  if (!d->can_implement || !d->workspace_bytes || !d->run) {
    throw std::invalid_argument("external variant '" + std::string(d->name) + "': null callback");
  }
  return std::make_unique<ExternalVariant>(*d);
}

}  // namespace mlatune
