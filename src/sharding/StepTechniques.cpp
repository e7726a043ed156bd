#include "heddle/sharding/StepTechniques.h"

#include <array>
#include <string>
#include <utility>

#include "heddle/support/Assert.h"

namespace heddle {

namespace {

// One enum's names in declaration order.
template <class E, size_t N>
Result<E> parse_named(std::string_view text, const char* what,
                      const std::array<std::string_view, N>& names) {
  std::string known;
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == text) return static_cast<E>(i);
    known += (i ? ", " : "") + std::string(names[i]);
  }
  return Diagnostic("unknown " + std::string(what) + " '" + std::string(text) +
                    "'; known: " + known);
}

constexpr std::array<std::string_view, 3> kPrecisions = {"bf16", "fp8", "fp32"};
constexpr std::array<std::string_view, 2> kAttentions = {"flash", "eager"};
constexpr std::array<std::string_view, 3> kOverlaps = {"none", "dp", "dp+tp"};
constexpr std::array<std::string_view, 5> kOffloads = {"none", "optimizer", "optimizer+params",
                                                       "activations", "optimizer+params:nvme"};
constexpr std::array<std::string_view, 2> kCpComms = {"allgather", "ring"};
constexpr std::array<std::string_view, 2> kCpLayouts = {"zigzag", "contiguous"};

template <size_t N>
std::string_view name_of(size_t i, const std::array<std::string_view, N>& names) {
  HEDDLE_ASSERT(i < N) << i;
  return names[i];
}

}  // namespace

Result<Precision> parse_precision(std::string_view text) {
  return parse_named<Precision>(text, "precision", kPrecisions);
}
Result<Attention> parse_attention(std::string_view text) {
  return parse_named<Attention>(text, "attention", kAttentions);
}
Result<Overlap> parse_overlap(std::string_view text) {
  return parse_named<Overlap>(text, "overlap", kOverlaps);
}
Result<Offload> parse_offload(std::string_view text) {
  return parse_named<Offload>(text, "offload", kOffloads);
}
Result<CpComm> parse_cp_comm(std::string_view text) {
  return parse_named<CpComm>(text, "cp_comm", kCpComms);
}
Result<CpLayout> parse_cp_layout(std::string_view text) {
  return parse_named<CpLayout>(text, "cp_layout", kCpLayouts);
}

std::string_view to_string(Precision p) { return name_of(static_cast<size_t>(p), kPrecisions); }
std::string_view to_string(Attention a) { return name_of(static_cast<size_t>(a), kAttentions); }
std::string_view to_string(Overlap o) { return name_of(static_cast<size_t>(o), kOverlaps); }
std::string_view to_string(Offload o) { return name_of(static_cast<size_t>(o), kOffloads); }
std::string_view to_string(CpComm c) { return name_of(static_cast<size_t>(c), kCpComms); }
std::string_view to_string(CpLayout l) { return name_of(static_cast<size_t>(l), kCpLayouts); }

}  // namespace heddle
