// What run and show print about a graph before planning it.
#include "Planning.h"

#include <fmt/format.h>

#include <cstdio>

#include "heddle/ir/Verifier.h"

namespace heddle::cli {

int report_verify(const Graph& g) {
  auto diags = verify(g);
  const size_t kMax = 20;
  for (size_t i = 0; i < diags.size() && i < kMax; ++i)
    std::fprintf(stderr, "%s\n", diags[i].to_string().c_str());
  if (diags.size() > kMax) std::fprintf(stderr, "... and %zu more errors\n", diags.size() - kMax);
  return diags.empty() ? 0 : 1;
}

}  // namespace heddle::cli
