#include "heddle/pipeline/Timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace heddle::pipeline {

namespace {

bool multiple_of(double x, double unit) {
  double q = x / unit;
  return std::fabs(q - std::round(q)) < 1e-6;
}

double time_unit(const BlockPlacement& p, const Schedule& s) {
  double shortest = p.blocks.front().span;
  for (const Block& b : p.blocks) shortest = std::min(shortest, b.span);
  for (double unit : {1.0, shortest, shortest / 2, shortest / 4}) {
    bool ok =
        std::all_of(p.blocks.begin(), p.blocks.end(),
                    [&](const Block& b) { return multiple_of(b.span, unit); }) &&
        std::all_of(s.start.begin(), s.start.end(), [&](double t) { return multiple_of(t, unit); });
    if (ok) return unit;
  }
  return shortest / 4;
}

}  // namespace

std::string render_timeline(const BlockPlacement& p, const Schedule& s, int max_cells) {
  const int nb = s.blocks;
  const double unit = time_unit(p, s);
  const int digits = static_cast<int>(std::to_string(std::max(0, s.micro_batches - 1)).size());
  const int width = 1 + digits;
  const double makespan = compute_stats(p, s).makespan;
  const int cells = static_cast<int>(std::lround(makespan / unit));
  const int shown = max_cells > 0 ? std::min(cells, max_cells) : cells;
  std::vector<std::vector<std::string>> grid(
      p.num_devices, std::vector<std::string>(shown, std::string(width, '.')));
  for (int op = 0; op < s.num_ops(); ++op) {
    const Block& b = p.blocks[op % nb];
    const int first = static_cast<int>(std::lround(s.start[op] / unit));
    const int len = std::max(1, static_cast<int>(std::lround(b.span / unit)));
    char letter = b.type.empty() ? '?' : static_cast<char>(std::toupper(b.type[0]));
    std::string label = fmt::format("{}{:<{}}", letter, op / nb, digits);
    for (int d : b.devices) {
      for (int c = first; c < first + len && c < shown; ++c) {
        grid[d][c] = c == first ? label : std::string(width, '-');
      }
    }
  }
  const int dev_digits = static_cast<int>(std::to_string(p.num_devices - 1).size());
  std::string out;
  if (unit != 1.0) out += fmt::format("one cell = {} time units\n", unit);
  for (int d = 0; d < p.num_devices; ++d) {
    out += fmt::format("dev {:>{}} |", d, dev_digits);
    for (int c = 0; c < shown; ++c) {
      out += grid[d][c];
      if (c + 1 < shown) out += ' ';
    }
    out += "|\n";
  }
  if (shown < cells) {
    out += fmt::format("({} more time cells not shown; --trace FILE writes the whole schedule)\n",
                       cells - shown);
  }
  return out;
}

}  // namespace heddle::pipeline
