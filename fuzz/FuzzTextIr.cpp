// libFuzzer target: the text-IR parser, the verifier and the printer. Whatever parses must verify
// without crashing, and a graph that verifies must print to text that parses back to the same
// text.
#include <cstdint>
#include <string_view>

#include "FuzzCheck.h"
#include "heddle/ir/GraphStats.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ir/Verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = heddle::parse_graph(text, "fuzz.hd");
  if (!g.ok()) return 0;
  auto diags = heddle::verify(*g);
  std::string printed = heddle::print_graph(*g);
  auto again = heddle::parse_graph(printed, "printed.hd");
  HEDDLE_FUZZ_CHECK(again.ok() && heddle::print_graph(*again) == printed);
  if (diags.empty()) (void)heddle::graph_stats(*g);
  return 0;
}
