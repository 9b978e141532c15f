#include "tuner/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>

#include "common/sha256.h"

namespace mlatune {

namespace {

constexpr size_t kMaxConfigBytes = size_t{1} << 20;
// A config whose spaces hold more buckets than this could never be tuned; refusing it also keeps
// buckets() from exhausting memory on a typo such as a million batch edges.
constexpr int64_t kMaxBuckets = int64_t{1} << 20;
constexpr DType kAllDtypes[] = {DType::kBF16, DType::kFP8E4M3FN, DType::kFP8E4M3FNUZ};

// ---- Error reporting ------------------------------------------------------------------------

// A node plus what messages about it need: where to point and its dotted path.
struct Item {
  YAML::Node node;
  YAML::Mark mark;   // the node's own mark, or its key's / list's when it is empty (Ctx::mark_of)
  std::string path;  // "spaces[0].qlen"; empty for the top level
};

std::string location(const std::string& origin, const YAML::Mark& mark) {
  // yaml-cpp marks are 0-based; a null mark (no position known) points at the file's start.
  const int line = mark.is_null() ? 1 : mark.line + 1;
  const int column = mark.is_null() ? 1 : mark.column + 1;
  return origin + ":" + std::to_string(line) + ":" + std::to_string(column);
}

class Ctx {
 public:
  Ctx(std::string origin, std::string_view text) : origin_(std::move(origin)), text_(text) {}

  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& path,
                         const std::string& msg) const {
    std::string what = location(origin_, mark) + ": ";
    if (!path.empty()) what += path + ": ";
    throw ConfigError(what + msg);
  }
  [[noreturn]] void fail(const Item& item, const std::string& msg) const {
    fail(item.mark, item.path, msg);
  }

  // "FILE:LINE:COLUMN" of `item`.
  std::string where(const Item& item) const { return location(origin_, item.mark); }

  // Whether a null node's mark is where "~" or "null" is written. An empty value ("key:" or a bare
  // "-") has no position of its own: yaml-cpp gives it the mark of the next token, which would
  // point at an unrelated line.
  bool null_written_at(const YAML::Mark& mark) const {
    if (mark.is_null() || mark.pos < 0 || size_t(mark.pos) >= text_.size()) return false;
    const std::string_view rest = text_.substr(size_t(mark.pos));
    return rest.starts_with('~') || rest.starts_with("null") || rest.starts_with("Null") ||
           rest.starts_with("NULL");
  }

  // The mark to blame for `node`, or `fallback` when the node is an empty value.
  YAML::Mark mark_of(const YAML::Node& node, const YAML::Mark& fallback) const {
    if (node.Mark().is_null() || (node.IsNull() && !null_written_at(node.Mark()))) return fallback;
    return node.Mark();
  }

 private:
  std::string origin_;
  std::string_view text_;  // the whole config
};

std::string child_path(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

// Values echoed in messages are shortened: a scalar can be most of a 1 MiB file.
std::string clip(std::string_view s) {
  constexpr size_t kMaxShown = 64;
  return s.size() <= kMaxShown ? std::string(s) : std::string(s.substr(0, kMaxShown)) + "...";
}

std::string quote(std::string_view s) { return "'" + clip(s) + "'"; }

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      if (n.Tag() == "!") return "the quoted string \"" + clip(n.Scalar()) + "\"";
      if (n.Tag() != "?") return "a value tagged " + clip(n.Tag());
      return "the value " + quote(n.Scalar());
    default:
      return "nothing (null)";
  }
}

template <typename T>
std::string format_number(T v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// ---- Maps -----------------------------------------------------------------------------------

// The entries of one YAML map, checked once for key types, duplicates and (optionally) unknown
// keys. yaml-cpp keeps duplicate keys silently and its operator[] returns the first, so every map
// is read through this class, never through operator[].
class MapFields {
 public:
  struct Entry {
    std::string key;
    Item key_item;  // the key node itself (for messages about the key)
    Item value;
  };

  // `allowed` empty: any key is accepted (maps keyed by dtype pair or variant name).
  MapFields(const Ctx& ctx, const Item& map, std::vector<std::string> allowed)
      : ctx_(ctx), map_(map), allowed_(std::move(allowed)) {
    if (!map.node.IsMap()) ctx.fail(map, "expected a map, got " + describe(map.node));
    for (auto it = map.node.begin(); it != map.node.end(); ++it) add(it->first, it->second);
  }

  const std::vector<Entry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }

  const Item* get(std::string_view key) const {
    const auto it = index_.find(key);
    return it == index_.end() ? nullptr : &entries_[it->second].value;
  }

  // Missing keys are reported at the enclosing map: there is no node for them.
  const Item& require(std::string_view key) const {
    if (const Item* v = get(key)) return *v;
    ctx_.fail(map_, "missing required key " + quote(key));
  }

 private:
  void add(const YAML::Node& key, const YAML::Node& value) {
    const Item key_item{key, key.Mark(), map_.path};
    if (!key.IsScalar()) {
      ctx_.fail(key_item, "map keys must be plain strings, got " + describe(key));
    }
    const std::string& name = key.Scalar();
    if (!allowed_.empty() && std::find(allowed_.begin(), allowed_.end(), name) == allowed_.end()) {
      ctx_.fail(key_item, "unknown key " + quote(name) + " (allowed: " + join(allowed_) + ")");
    }
    const auto [it, inserted] = index_.emplace(name, entries_.size());
    if (!inserted) {
      ctx_.fail(key_item, "duplicate key " + quote(name) + " (first at line " +
                              std::to_string(entries_[it->second].key_item.mark.line + 1) + ")");
    }
    entries_.push_back({name, key_item,
                        Item{value, ctx_.mark_of(value, key.Mark()), child_path(map_.path, name)}});
  }

  const Ctx& ctx_;
  Item map_;
  std::vector<std::string> allowed_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t, std::less<>> index_;  // key -> position in entries_
};

// ---- Scalars --------------------------------------------------------------------------------

// Numbers and booleans must be plain (unquoted, untagged) scalars: "5" in quotes is a string.
const std::string& plain_scalar(const Ctx& ctx, const Item& item, std::string_view expected) {
  if (!item.node.IsScalar() || item.node.Tag() != "?") {
    ctx.fail(item, "expected " + std::string(expected) + ", got " + describe(item.node));
  }
  return item.node.Scalar();
}

std::string read_string(const Ctx& ctx, const Item& item) {
  const YAML::Node& n = item.node;
  if (!n.IsScalar() || (n.Tag() != "?" && n.Tag() != "!")) {
    ctx.fail(item, "expected a string, got " + describe(n));
  }
  return n.Scalar();
}

// Strict decimal integer: an optional '-', then digits without leading zeros. yaml-cpp's as<int>
// accepts "0x10", " 5" and (via YAML 1.1 rules) octal; none of that belongs in a config.
int64_t read_int(const Ctx& ctx, const Item& item, int64_t lo, int64_t hi) {
  const std::string& s = plain_scalar(ctx, item, "an integer");
  const std::string_view digits = std::string_view(s).substr(s.starts_with('-') ? 1 : 0);
  const bool well_formed = !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
    return c >= '0' && c <= '9';
  }) && (digits.size() == 1 || digits[0] != '0');
  if (!well_formed) ctx.fail(item, quote(s) + " is not an integer (write plain decimal digits)");
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < lo || v > hi) {
    ctx.fail(item,
             clip(s) + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

// Bounds of a real-valued field; an open end excludes its value.
struct RealRange {
  double lo;
  bool lo_open;
  double hi;
  bool hi_open;

  bool contains(double v) const {
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
  std::string to_string() const {
    const std::string upper = std::isinf(hi) ? "inf" : format_number(hi);
    return (lo_open ? "(" : "[") + format_number(lo) + ", " + upper + (hi_open ? ")" : "]");
  }
};

constexpr double kInf = HUGE_VAL;

double read_real(const Ctx& ctx, const Item& item, const RealRange& range) {
  const std::string& s = plain_scalar(ctx, item, "a number");
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || end != s.data() + s.size() ||
      (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    ctx.fail(item, quote(s) + " is not a number");
  }
  if (ec == std::errc::result_out_of_range) {
    ctx.fail(item, clip(s) + " is beyond the range of a double");
  }
  // from_chars accepts "inf" and "nan"; neither is a meaningful setting.
  if (!std::isfinite(v)) ctx.fail(item, clip(s) + " is not a finite number");
  if (!range.contains(v)) ctx.fail(item, clip(s) + " is out of range " + range.to_string());
  return v;
}

// Only the YAML 1.2 spellings: "yes", "on", "True" and friends are refused as ambiguous.
bool read_bool(const Ctx& ctx, const Item& item) {
  const std::string& s = plain_scalar(ctx, item, "a boolean");
  if (s == "true") return true;
  if (s == "false") return false;
  ctx.fail(item, quote(s) + " is not a boolean (write true or false)");
}

std::string dtype_names() {
  std::vector<std::string> names;
  for (DType t : kAllDtypes) names.emplace_back(dtype_name(t));
  return join(names);
}

DtypePair read_dtype_pair(const Ctx& ctx, const Item& item) {
  const std::string s = read_string(ctx, item);
  const size_t slash = s.find('/');
  if (slash == std::string::npos || s.find('/', slash + 1) != std::string::npos) {
    ctx.fail(item, quote(s) + " is not a dtype pair (write q/kv, e.g. bf16/fp8_e4m3fn)");
  }
  DtypePair pair;
  const std::string_view parts[2] = {std::string_view(s).substr(0, slash),
                                     std::string_view(s).substr(slash + 1)};
  DType* fields[2] = {&pair.q, &pair.kv};
  for (int i = 0; i < 2; ++i) {
    const std::optional<DType> t = parse_dtype(parts[i]);
    if (!t) {
      ctx.fail(item, "unknown dtype " + quote(parts[i]) + " in " + quote(s) +
                         " (allowed: " + dtype_names() + ")");
    }
    *fields[i] = *t;
  }
  return pair;
}

bool is_variant_name(std::string_view s) {
  if (s.empty() || s[0] < 'a' || s[0] > 'z') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string read_variant_name(const Ctx& ctx, const Item& item) {
  const std::string s = read_string(ctx, item);
  if (!is_variant_name(s)) ctx.fail(item, quote(s) + " is not a variant name ([a-z][a-z0-9_]*)");
  return s;
}

// ---- Lists ----------------------------------------------------------------------------------

// The elements of a non-empty list. Element errors name the list's path and the bad value
// ("spaces[0].qlen: 0 is out of range [1, 16]") and point at the element.
std::vector<Item> list_items(const Ctx& ctx, const Item& list) {
  if (!list.node.IsSequence()) ctx.fail(list, "expected a list, got " + describe(list.node));
  if (list.node.size() == 0) ctx.fail(list, "empty list");
  std::vector<Item> out;
  for (const YAML::Node& n : list.node) {
    out.push_back({n, ctx.mark_of(n, list.mark), list.path});
  }
  return out;
}

// Reads every element with `read` and refuses repeated values (compared by `format`, which must
// be canonical).
template <typename T, typename ReadFn, typename FormatFn>
std::vector<T> unique_list(const Ctx& ctx, const Item& list, ReadFn read, FormatFn format) {
  std::vector<T> out;
  std::set<std::string> seen;  // canonical text of each value; lists can be long
  for (const Item& e : list_items(ctx, list)) {
    T v = read(e);
    std::string text = format(v);
    if (!seen.insert(text).second) ctx.fail(e, "duplicate value " + text);
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<int32_t> int_list(const Ctx& ctx, const Item& list, int64_t lo, int64_t hi) {
  return unique_list<int32_t>(
      ctx, list, [&](const Item& e) { return static_cast<int32_t>(read_int(ctx, e, lo, hi)); },
      [](int32_t v) { return std::to_string(v); });
}

std::vector<bool> bool_list(const Ctx& ctx, const Item& list) {
  return unique_list<bool>(
      ctx, list, [&](const Item& e) { return read_bool(ctx, e); },
      [](bool v) { return std::string(v ? "true" : "false"); });
}

std::vector<std::string> name_list(const Ctx& ctx, const Item& list) {
  return unique_list<std::string>(
      ctx, list, [&](const Item& e) { return read_variant_name(ctx, e); },
      [](const std::string& v) { return quote(v); });
}

// Upper edges of consecutive buckets; returns the element items too, for later cross-checks.
std::vector<int32_t> edge_list(const Ctx& ctx, const Item& list, int64_t hi,
                               std::vector<Item>* items) {
  *items = list_items(ctx, list);
  std::vector<int32_t> out;
  for (const Item& e : *items) {
    const auto v = static_cast<int32_t>(read_int(ctx, e, 1, hi));
    if (!out.empty() && v <= out.back()) {
      ctx.fail(e, std::to_string(v) + " is not above the previous edge " +
                      std::to_string(out.back()) + " (edges must be strictly ascending)");
    }
    out.push_back(v);
  }
  return out;
}

// ---- Sections -------------------------------------------------------------------------------

// A parsed space plus the marks of its dtype entries, needed to point at an entry whose dtype
// pair has no tolerance.
struct SpaceSource {
  ShapeSpace space;
  Item map;
  std::vector<Item> dtype_items;
};

SpaceSource read_space(const Ctx& ctx, const Item& item) {
  const MapFields m(ctx, item,
                    {"heads", "qlen", "dtypes", "page_size", "lse", "batch_edges", "kv_len_edges"});
  SpaceSource src{{}, item, {}};
  ShapeSpace& s = src.space;
  s.heads = int_list(ctx, m.require("heads"), 1, kMaxHeads);
  s.qlen = int_list(ctx, m.require("qlen"), 1, kMaxQlen);
  s.dtypes = unique_list<DtypePair>(
      ctx, m.require("dtypes"),
      [&](const Item& e) {
        src.dtype_items.push_back(e);
        return read_dtype_pair(ctx, e);
      },
      [](const DtypePair& d) { return d.to_string(); });
  s.page_size = int_list(ctx, m.require("page_size"), 1, kMaxPageSize);
  s.lse = bool_list(ctx, m.require("lse"));
  std::vector<Item> batch_items, kv_items;
  s.batch_edges = edge_list(ctx, m.require("batch_edges"), kMaxBatch, &batch_items);
  s.kv_len_edges = edge_list(ctx, m.require("kv_len_edges"), kMaxKvLen, &kv_items);
  // The first kv bucket starts at 1, but a sequence holds at least qlen keys: a first bucket that
  // ends below some qlen would contain no valid shape for it.
  const int32_t max_qlen = *std::max_element(s.qlen.begin(), s.qlen.end());
  if (s.kv_len_edges.front() < max_qlen) {
    ctx.fail(kv_items.front(), "first edge " + std::to_string(s.kv_len_edges.front()) +
                                   " is below qlen " + std::to_string(max_qlen) +
                                   " (a sequence holds at least qlen keys)");
  }
  return src;
}

std::vector<SpaceSource> read_spaces(const Ctx& ctx, const Item& list) {
  std::vector<SpaceSource> out;
  const std::vector<Item> items = list_items(ctx, list);
  for (size_t i = 0; i < items.size(); ++i) {
    Item space = items[i];
    // Appended piecewise: "[" + std::to_string(i) trips GCC 12's bogus -Wrestrict warning.
    space.path.append("[").append(std::to_string(i)).append("]");
    out.push_back(read_space(ctx, space));
  }
  return out;
}

Tolerance read_tolerance(const Ctx& ctx, const Item& item) {
  const MapFields m(ctx, item, {"atol", "rtol", "min_cosine", "lse_atol"});
  const RealRange non_negative{0, false, kInf, true};
  Tolerance t;
  t.atol = read_real(ctx, m.require("atol"), non_negative);
  t.rtol = read_real(ctx, m.require("rtol"), non_negative);
  t.min_cosine = read_real(ctx, m.require("min_cosine"), {0, false, 1, false});
  t.lse_atol = read_real(ctx, m.require("lse_atol"), non_negative);
  return t;
}

// Entries for dtype pairs no space uses are allowed (one tolerance table can serve several
// configs), but each must still be well-formed.
std::map<std::string, Tolerance> read_tolerances(const Ctx& ctx, const Item& item) {
  const MapFields m(ctx, item, {});
  if (m.empty()) ctx.fail(item, "empty map (give a tolerance for every dtype pair used)");
  std::map<std::string, Tolerance> out;
  for (const auto& e : m.entries()) {
    // Keyed canonically, so that two spellings of one pair cannot both appear.
    const std::string key = read_dtype_pair(ctx, e.key_item).to_string();
    if (out.count(key) != 0) ctx.fail(e.key_item, "duplicate entry for " + key);
    Item value = e.value;
    value.path = child_path(item.path, key);
    out.emplace(key, read_tolerance(ctx, value));
  }
  return out;
}

template <typename T>
void read_int_field(const Ctx& ctx, const MapFields& m, std::string_view key, int64_t lo,
                    int64_t hi, T* out) {
  if (const Item* v = m.get(key)) *out = static_cast<T>(read_int(ctx, *v, lo, hi));
}

void read_real_field(const Ctx& ctx, const MapFields& m, std::string_view key,
                     const RealRange& range, double* out) {
  if (const Item* v = m.get(key)) *out = read_real(ctx, *v, range);
}

ValidationSettings read_validation(const Ctx& ctx, const Item& item) {
  const MapFields m(ctx, item,
                    {"seeds", "repeats", "interior_points", "full_check_rows", "sampled_sequences",
                     "sampled_rows"});
  ValidationSettings v;
  read_int_field(ctx, m, "seeds", 1, 64, &v.seeds);
  read_int_field(ctx, m, "repeats", 2, 100, &v.repeats);
  read_int_field(ctx, m, "interior_points", 0, 16, &v.interior_points);
  read_int_field(ctx, m, "full_check_rows", 1, int64_t{1} << 40, &v.full_check_rows);
  read_int_field(ctx, m, "sampled_sequences", 1, 65536, &v.sampled_sequences);
  read_int_field(ctx, m, "sampled_rows", 0, int64_t{1} << 30, &v.sampled_rows);
  return v;
}

TimingSettings read_timing(const Ctx& ctx, const Item& item) {
  const MapFields m(ctx, item,
                    {"warmup", "samples", "cold_cache", "flush_bytes", "tie_fraction",
                     "candidate_timeout_s", "prune_factor", "prune_samples", "top_corner"});
  TimingSettings t;
  read_int_field(ctx, m, "warmup", 0, 1000, &t.warmup);
  read_int_field(ctx, m, "samples", 3, 100000, &t.samples);
  if (const Item* v = m.get("cold_cache")) t.cold_cache = read_bool(ctx, *v);
  read_int_field(ctx, m, "flush_bytes", 0, int64_t{1} << 34, &t.flush_bytes);
  read_real_field(ctx, m, "tie_fraction", {0, false, 0.5, false}, &t.tie_fraction);
  read_real_field(ctx, m, "candidate_timeout_s", {0, true, 86400, false}, &t.candidate_timeout_s);
  if (const Item* v = m.get("prune_factor")) {
    t.prune_factor = read_real(ctx, *v, {1, false, 1000, false});
  }
  read_int_field(ctx, m, "prune_samples", 1, 1000, &t.prune_samples);
  if (const Item* v = m.get("top_corner")) t.top_corner = read_bool(ctx, *v);
  return t;
}

// A params entry lists the values to try for some launch parameters. Unlike ParamSpace's own
// defaults ({1} / {0}), a parameter the entry omits is left EMPTY, meaning "every value the variant
// declares": the tuner fills it in from the registry, so restricting kv_splits does not silently
// pin workers to 0.
ParamSpace read_param_space(const Ctx& ctx, const Item& item,
                            std::map<std::string, std::string>& locations) {
  const MapFields m(ctx, item, {"kv_splits", "kv_tile", "block_rows", "workers"});
  if (m.empty()) ctx.fail(item, "empty map (omit the entry to use the variant's declared values)");
  // The values, each with its location: whether a variant declares them is known only later.
  auto values = [&](std::string_view key, int64_t lo) -> std::vector<int32_t> {
    const Item* list = m.get(key);
    if (!list) return {};
    const std::vector<int32_t> out = int_list(ctx, *list, lo, INT32_MAX);
    const std::vector<Item> items = list_items(ctx, *list);
    for (size_t i = 0; i < out.size(); ++i) {
      locations[location_key(list->path, std::to_string(out[i]))] = ctx.where(items[i]);
    }
    return out;
  };
  return ParamSpace{values("kv_splits", 1), values("kv_tile", 0), values("block_rows", 0),
                    values("workers", 0)};
}

std::map<std::string, ParamSpace> read_params(const Ctx& ctx, const Item& item,
                                              const std::vector<std::string>& variants,
                                              std::map<std::string, std::string>& locations) {
  const MapFields m(ctx, item, {});
  if (m.empty()) ctx.fail(item, "empty map (omit params to use every variant's declared values)");
  std::map<std::string, ParamSpace> out;
  for (const auto& e : m.entries()) {
    const std::string name = read_variant_name(ctx, e.key_item);
    // Parameters for a variant that the variants list excludes would never be used: a typo.
    if (!variants.empty() && std::find(variants.begin(), variants.end(), name) == variants.end()) {
      ctx.fail(e.key_item,
               "variant " + quote(name) + " is not in variants (" + join(variants) + ")");
    }
    locations[location_key(item.path, name)] = ctx.where(e.key_item);
    out.emplace(name, read_param_space(ctx, e.value, locations));
  }
  return out;
}

// The variants list, each name with its location: whether the registry has it is known only later.
std::vector<std::string> read_variants(const Ctx& ctx, const Item& list,
                                       std::map<std::string, std::string>& locations) {
  const std::vector<std::string> names = name_list(ctx, list);
  const std::vector<Item> items = list_items(ctx, list);
  for (size_t i = 0; i < names.size(); ++i) {
    locations[location_key(list.path, names[i])] = ctx.where(items[i]);
  }
  return names;
}

std::string read_name(const Ctx& ctx, const Item& item) {
  const std::string s = read_string(ctx, item);
  if (s.empty()) ctx.fail(item, "empty name");
  if (std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; })) {
    ctx.fail(item, "name contains control characters");
  }
  return s;
}

std::string read_backend(const Ctx& ctx, const Item& item) {
  const std::string s = read_string(ctx, item);
  if (s != "host" && s != "hip") {
    ctx.fail(item, "unknown backend " + quote(s) + " (allowed: host, hip)");
  }
  return s;
}

// ---- Cross-checks ---------------------------------------------------------------------------

void check_tolerances_cover(const Ctx& ctx, const std::vector<SpaceSource>& spaces,
                            const std::map<std::string, Tolerance>& tolerances) {
  for (const SpaceSource& src : spaces) {
    for (size_t i = 0; i < src.space.dtypes.size(); ++i) {
      const std::string key = src.space.dtypes[i].to_string();
      if (tolerances.count(key) == 0) {
        ctx.fail(src.dtype_items[i], "no tolerance for " + key + " (add it under tolerances)");
      }
    }
  }
}

int64_t bucket_count(const ShapeSpace& s) {
  // Each factor is bounded by its limit (<= 2^24), so the product of the first five fits easily;
  // the edge counts are multiplied with a saturating check.
  int64_t n = int64_t(s.heads.size()) * int64_t(s.qlen.size()) * int64_t(s.dtypes.size()) *
              int64_t(s.page_size.size()) * int64_t(s.lse.size());
  for (size_t f : {s.batch_edges.size(), s.kv_len_edges.size()}) {
    n = n > kMaxBuckets ? n : n * int64_t(f);
  }
  return n;
}

void check_bucket_count(const Ctx& ctx, const std::vector<SpaceSource>& spaces) {
  int64_t total = 0;
  for (const SpaceSource& src : spaces) {
    total += bucket_count(src.space);
    if (total > kMaxBuckets) {
      ctx.fail(src.map, "the spaces up to here hold " + std::to_string(total) +
                            " buckets or more; the limit is " + std::to_string(kMaxBuckets));
    }
  }
}

// ---- Document -------------------------------------------------------------------------------

// YAML allows no C0 control characters but tab, line feed and carriage return; yaml-cpp's own
// messages for them (a NUL, say) are garbled, so they are refused first, with their position.
// Moves `mark` past character c of the text.
void advance(YAML::Mark& mark, char c) {
  if (c == '\n') {
    ++mark.line;
    mark.column = 0;
  } else {
    ++mark.column;
  }
  ++mark.pos;
}

void check_characters(const Ctx& ctx, std::string_view text) {
  YAML::Mark mark;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", c);
      ctx.fail(mark, "",
               std::string("control character ") + hex +
                   " (only tab, line feed and carriage return are allowed)");
    }
    advance(mark, c);
  }
}

// Refuses a ',' in block context (outside every [...] and {...}) that starts a line, follows a
// flow collection or a quoted scalar, or ends or follows an anchor (&a) or a tag (!t): never valid
// YAML, and yaml-cpp 0.7 (Debian 12) loops for ever allocating on it (found by fuzz/fuzz_config). A
// lexer just deep enough for that: flow depth, quoted scalars and comments; block scalars are not
// told apart (a config has none).
void check_stray_commas(const Ctx& ctx, std::string_view text) {
  YAML::Mark mark;
  int depth = 0;
  char quote = 0;    // the open quote, or 0
  char last = '\n';  // the last non-blank character outside comments, '\n' at a line start
  bool comment = false;
  bool property = false;  // in or just after (blanks between) an anchor or tag word
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const bool word_start =
        i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t' || text[i - 1] == '\n';
    if (!quote && !comment && word_start && c != ' ' && c != '\t' && c != '\n' && c != '\r' &&
        c != ',') {
      property = c == '&' || c == '!';
    }
    if (c == '\n') {
      comment = false;
      property = false;
      if (!quote) last = '\n';
    } else if (comment) {
    } else if (quote) {
      if (quote == '"' && c == '\\') {
        advance(mark, text[i++]);  // the backslash; the escaped character follows
      } else if (c == quote) {
        if (quote == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
          advance(mark, text[i++]);  // the first quote of '' inside '...'
        } else {
          quote = 0;
          last = c;
        }
      }
    } else if (c == '#' && (last == '\n' || i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t')) {
      comment = true;
    } else if (c == '"' || c == '\'') {
      if (last == '\n' || last == ':' || last == '-' || last == '[' || last == '{' || last == ',' ||
          last == '?' || text[i - 1] == ' ' || text[i - 1] == '\t') {
        quote = c;
      }
      if (!quote) last = c;
    } else if (c == '[' || c == '{') {
      ++depth;
      last = c;
    } else if (c == ']' || c == '}') {
      depth = depth > 0 ? depth - 1 : 0;
      last = c;
    } else if (c == ',') {
      if (depth == 0 &&
          (property || last == '\n' || last == ']' || last == '}' || last == '"' || last == '\'')) {
        ctx.fail(mark, "", "',' outside a [...] or {...} list (YAML syntax error)");
      }
      last = c;
    } else if (c != ' ' && c != '\t' && c != '\r') {
      last = c;
    }
    advance(mark, c);
  }
}

// Counts the documents the event parser finds, stopping at the second.
class DocumentCounter : public YAML::EventHandler {
 public:
  int documents = 0;
  YAML::Mark second;
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents == 2) second = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

YAML::Node load_document(const Ctx& ctx, const std::string& text) {
  // yaml-cpp 0.7's LoadAll loops for ever, allocating, on inputs with a token no grammar rule
  // consumes: every further call finds another empty "document" (jbeder/yaml-cpp#1040, fixed
  // upstream after 0.8). So the documents are counted with the event parser, which stops at the
  // second, and only a single document is loaded.
  YAML::Node root;
  try {
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentCounter counter;
    if (parser.HandleNextDocument(counter) && parser.HandleNextDocument(counter)) {
      ctx.fail(counter.second, "", "more than one YAML document (a config is a single map)");
    }
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    ctx.fail(e.mark, "", "YAML syntax error: " + e.msg);
  }
  if (root.IsNull()) {
    ctx.fail(YAML::Mark::null_mark(), "",
             "empty document (a config is a map; see configs/README.md)");
  }
  if (!root.IsMap()) {
    ctx.fail(root.Mark(), "", "expected a map at the top level, got " + describe(root));
  }
  return root;
}

void check_size(const Ctx& ctx, uint64_t size, const std::string& what) {
  if (size > kMaxConfigBytes) {
    ctx.fail(YAML::Mark::null_mark(), "",
             what + " is " + std::to_string(size) + " bytes; configs are limited to " +
                 std::to_string(kMaxConfigBytes) + " bytes (1 MiB)");
  }
}

[[noreturn]] void throw_read_error(const std::string& path, int err) {
  throw std::runtime_error("cannot read config " + path + ": " + std::strerror(err));
}

// What a file that is not a regular file is, for the message refusing it as a config.
std::string non_regular_kind(mode_t mode) {
  if (S_ISDIR(mode)) return std::strerror(EISDIR);
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

[[noreturn]] void throw_not_regular(const std::string& path, mode_t mode) {
  throw std::runtime_error("cannot read config " + path + ": " + non_regular_kind(mode) +
                           " (a config must be a regular file)");
}

// Reads at most kMaxConfigBytes + 1 bytes, so that an oversized (or growing) file is refused
// without being read whole. Only a regular file is read: a FIFO would block the open until a
// writer comes, a device such as /dev/zero never ends, so they are refused by stat() first, and
// the open does not block should the path be swapped for a FIFO in between.
std::string read_file_capped(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw_read_error(path, errno);
  if (!S_ISREG(st.st_mode)) throw_not_regular(path, st.st_mode);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw_read_error(path, errno);
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &st) != 0) throw_read_error(path, errno);
  if (!S_ISREG(st.st_mode)) throw_not_regular(path, st.st_mode);
  const Ctx ctx(path, "");
  check_size(ctx, uint64_t(st.st_size), "file");
  std::string text(kMaxConfigBytes + 1, '\0');
  size_t used = 0;
  while (used < text.size()) {
    const ssize_t n = ::read(fd, text.data() + used, text.size() - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_read_error(path, errno);
    if (n == 0) break;
    used += size_t(n);
  }
  check_size(ctx, used, "file");
  text.resize(used);
  return text;
}

}  // namespace

std::string DtypePair::to_string() const {
  return std::string(dtype_name(q)) + "/" + std::string(dtype_name(kv));
}

std::vector<BucketKey> TuneConfig::buckets() const {
  struct Range {
    int32_t lo, hi;
  };
  const auto ranges = [](const std::vector<int32_t>& edges) {
    std::vector<Range> out;
    int32_t lo = 1;
    for (int32_t e : edges) {
      out.push_back({lo, e});
      lo = e + 1;
    }
    return out;
  };
  using Seen =
      std::tuple<int32_t, int32_t, DType, DType, int32_t, bool, int32_t, int32_t, int32_t, int32_t>;
  std::set<Seen> seen;
  std::vector<BucketKey> out;
  for (const ShapeSpace& s : spaces) {
    const std::vector<Range> batch = ranges(s.batch_edges);
    const std::vector<Range> kv = ranges(s.kv_len_edges);
    for (int32_t h : s.heads)
      for (int32_t q : s.qlen)
        for (const DtypePair& d : s.dtypes)
          for (int32_t p : s.page_size)
            for (bool l : s.lse)
              for (const Range& b : batch)
                for (const Range& k : kv) {
                  if (!seen.emplace(h, q, d.q, d.kv, p, l, b.lo, b.hi, k.lo, k.hi).second) continue;
                  const DecodeKey key{.heads = h,
                                      .qlen = q,
                                      .q_dtype = d.q,
                                      .kv_dtype = d.kv,
                                      .page_size = p,
                                      .lse = l};
                  out.push_back({key, b.lo, b.hi, k.lo, k.hi});
                }
  }
  return out;
}

const Tolerance& TuneConfig::tolerance_for(DtypePair d) const {
  const auto it = tolerances.find(d.to_string());
  if (it == tolerances.end()) throw ConfigError(path + ": no tolerance for " + d.to_string());
  return it->second;
}

std::string location_key(const std::string& path, const std::string& value) {
  return path + "=" + value;
}

ConfigError TuneConfig::error_at(const std::string& path, const std::string& value,
                                 const std::string& message) const {
  const auto it = locations.find(location_key(path, value));
  return ConfigError((it == locations.end() ? this->path : it->second) + ": " + path + ": " +
                     message);
}

TuneConfig parse_config(const std::string& text, const std::string& origin) {
  const Ctx ctx(origin, text);
  check_size(ctx, text.size(), "config text");
  check_characters(ctx, text);
  check_stray_commas(ctx, text);
  const YAML::Node root = load_document(ctx, text);
  const MapFields top(ctx, Item{root, root.Mark(), ""},
                      {"name", "backend", "sm_scale", "spaces", "tolerances", "validation",
                       "timing", "variants", "params"});
  TuneConfig c;
  c.path = origin;
  c.hash = sha256_hex(text);
  c.text = text;
  const Item* name = top.get("name");
  c.name = name ? read_name(ctx, *name) : std::filesystem::path(origin).stem().string();
  c.backend = read_backend(ctx, top.require("backend"));
  c.locations[location_key("backend", c.backend)] = ctx.where(top.require("backend"));
  c.sm_scale = 1.0 / std::sqrt(double{kHeadDimQK});
  if (const Item* v = top.get("sm_scale")) c.sm_scale = read_real(ctx, *v, {0, true, kInf, true});
  const std::vector<SpaceSource> spaces = read_spaces(ctx, top.require("spaces"));
  c.tolerances = read_tolerances(ctx, top.require("tolerances"));
  if (const Item* v = top.get("validation")) c.validation = read_validation(ctx, *v);
  if (const Item* v = top.get("timing")) c.timing = read_timing(ctx, *v);
  if (const Item* v = top.get("variants")) c.variants = read_variants(ctx, *v, c.locations);
  if (const Item* v = top.get("params")) c.params = read_params(ctx, *v, c.variants, c.locations);
  check_tolerances_cover(ctx, spaces, c.tolerances);
  check_bucket_count(ctx, spaces);
  for (const SpaceSource& src : spaces) c.spaces.push_back(src.space);
  return c;
}

TuneConfig load_config(const std::string& path) {
  return parse_config(read_file_capped(path), path);
}

}  // namespace mlatune
