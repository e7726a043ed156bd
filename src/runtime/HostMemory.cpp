#include "heddle/runtime/HostMemory.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "heddle/ir/GraphStats.h"
#include "heddle/support/Strings.h"

namespace heddle {

namespace {

int64_t box_bytes(const Graph& g, ValueId v, const Box& box) {
  return tensor_storage_bytes(g.type(v).dtype(), box.volume());
}

}  // namespace

int64_t tensor_storage_bytes(DType dtype, int64_t numel) {
  return numel * (dtype_is_float(dtype) ? 4 : 8);
}

int64_t program_peak_bytes(const Graph& g, const DeviceProgram& program) {
  std::map<ValueId, int64_t> tiles, halos;
  int64_t live = 0, peak = 0;
  auto set = [&](std::map<ValueId, int64_t>& in, ValueId v, int64_t bytes) {
    auto [it, fresh] = in.emplace(v, 0);
    live += bytes - it->second;
    it->second = bytes;
    peak = std::max(peak, live);
  };
  auto drop = [&](std::map<ValueId, int64_t>& in, ValueId v) {
    if (auto it = in.find(v); it != in.end()) {
      live -= it->second;
      in.erase(it);
    }
  };
  for (const Instr& in : program.instrs) {
    switch (in.kind) {
      case Instr::Kind::kLoad:
      case Instr::Kind::kCollective:
        set(tiles, in.value, box_bytes(g, in.value, in.box));
        break;
      case Instr::Kind::kFetch:
        set(halos, in.value, box_bytes(g, in.value, in.box));
        break;
      case Instr::Kind::kKernel: {
        std::map<ValueId, int64_t> temps;
        for (const KernelCall& call : in.calls) {
          const Op& op = g.op(call.op);
          for (const auto& r : op.results) {
            bool temp = std::find(in.temporaries.begin(), in.temporaries.end(), r.value) !=
                        in.temporaries.end();
            set(temp ? temps : tiles, r.value, box_bytes(g, r.value, r.proj.image(call.box)));
          }
          for (const auto& x : op.inputs) drop(halos, x.value);
        }
        for (const auto& [v, bytes] : temps) live -= bytes;
        break;
      }
      case Instr::Kind::kFree:
        drop(tiles, in.value);
        break;
    }
  }
  return peak;
}

std::vector<int64_t> peak_bytes_per_device(const Graph& g,
                                           const std::vector<DeviceProgram>& programs) {
  std::vector<int64_t> out;
  for (const auto& p : programs) out.push_back(program_peak_bytes(g, p));
  return out;
}

std::vector<int64_t> feed_bytes_per_device(const Graph& g,
                                           const std::vector<DeviceProgram>& programs) {
  std::vector<int64_t> out;
  for (const auto& p : programs) {
    int64_t bytes = 0;
    for (const auto& [v, hull] : load_hulls(p))
      bytes += tensor_storage_bytes(g.type(v).dtype(), hull.volume());
    out.push_back(bytes);
  }
  return out;
}

std::vector<int64_t> pipeline_peak_bytes(const PipelineProgram& P) {
  std::vector<int64_t> out(static_cast<size_t>(P.num_devices()), 0);
  auto take = [&](int64_t stage, const StageBlock& b) {
    for (size_t d = 0; d < b.programs.size(); ++d) {
      int64_t& slot = out[static_cast<size_t>(P.stage_first[stage]) + d];
      slot = std::max(slot, program_peak_bytes(b.graph, b.programs[d]));
    }
  };
  for (const auto& c : P.chunks) {
    take(c.stage, c.forward);
    take(c.stage, c.backward);
    take(c.stage, c.weight);
  }
  for (size_t s = 0; s < P.optimizer.size(); ++s) take(static_cast<int64_t>(s), P.optimizer[s]);
  return out;
}

std::string HostMemoryNeed::to_string() const {
  std::string parts = "devices " + human_bytes(static_cast<double>(devices)) + " + feeds " +
                      human_bytes(static_cast<double>(feeds));
  if (reference > 0) parts += " + reference " + human_bytes(static_cast<double>(reference));
  return human_bytes(static_cast<double>(total())) + " (" + parts + ")";
}

int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<int64_t>(pages) * size : 0;
}

Status check_host_memory(const HostMemoryNeed& need, int64_t available, bool from_option) {
  if (available <= 0 || need.total() <= available) return {};
  return Diagnostic(fmt::format(
      "the run needs {} of host memory but {} {}; pick a smaller preset or shrink it with "
      "--layers, --hidden, --seq, --batch (heddle simulate predicts large models without running "
      "them){}",
      need.to_string(), from_option ? "--host-memory allows" : "the host has",
      human_bytes(static_cast<double>(available)),
      from_option ? "" : ", or give --host-memory BYTES if the host really has more"));
}

int64_t model_feed_bytes(const Graph& g) {
  int64_t n = 0;
  for (const auto* ids : {&g.inputs(), &g.params()})
    for (ValueId v : *ids)
      n += tensor_storage_bytes(g.type(v).dtype(), g.type(v).shape().product());
  return n;
}

int64_t reference_bytes(const Graph& g) {
  GraphStats size = graph_stats(g);
  return size.parameters * 4 + size.activation_bytes;
}

}  // namespace heddle
