// Parsing the text form of graphs (see TextPrinter.h). Errors are diagnostics carrying
// `file:line:col`; the parser checks syntax and names, verify() checks the structural rules.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "heddle/ir/Graph.h"
#include "heddle/support/Result.h"

namespace heddle {

/// Parses one graph from `text`. `file` names the input in diagnostics. Never crashes or hangs on
/// malformed input; the first error is returned.
Result<Graph> parse_graph(std::string_view text, const std::string& file = "<input>");

/// Reads and parses a file; a missing or unreadable file is a diagnostic naming it.
Result<Graph> parse_graph_file(const std::string& path);

/// Parses a projection such as `(n, ci, 2*oh - 1, 2*ow - 1)[1, 1, 3, 3]` over index dims `names`.
Result<IndexProjection> parse_projection(std::string_view text,
                                         const std::vector<std::string>& names);

/// Parses an index space such as `[m=64, n=32, k=128:sum]`.
Result<IndexSpace> parse_index_space(std::string_view text);

}  // namespace heddle
