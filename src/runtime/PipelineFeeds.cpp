#include "heddle/runtime/PipelineFeeds.h"

#include <algorithm>

#include "heddle/ops/TileInit.h"
#include "heddle/support/Assert.h"

namespace heddle {

PipelineFeeds pack_pipeline_feeds(const PipelineProgram& P, const Graph& g,
                                  const TensorMap& feeds) {
  const int64_t m = P.micro_batches;
  PipelineFeeds f;
  for (ValueId p : g.params())
    if (auto it = feeds.find(p); it != feeds.end()) f.params.emplace(g.value(p).name, it->second);
  f.inputs.resize(static_cast<size_t>(m));
  for (ValueId x : g.inputs())
    for (int64_t k = 0; k < m; ++k)
      f.inputs[k].emplace(g.value(x).name,
                          m == 1 ? feeds.at(x) : micro_batch_of(feeds.at(x), m, k));
  return f;
}

PipelineFeeds device_pipeline_feeds(const PipelineProgram& P, const Graph& g, int64_t device,
                                    uint64_t seed, int64_t int_hi) {
  PipelineFeeds f;
  f.inputs.resize(static_cast<size_t>(P.micro_batches));
  for (const auto& [name, box] : P.device_loads(device)) {
    auto v = g.find_value(name);
    HEDDLE_ASSERT(v.has_value()) << "no value '" << name << "' in " << g.name();
    const TensorType& type = g.type(*v);
    if (g.value(*v).role == ValueRole::kParam) {
      f.params.emplace(name, init_param_tile(name, type, seed, box));
      continue;
    }
    // Micro-batch k holds rows [k * rows, (k + 1) * rows) of the whole batch.
    for (int64_t k = 0; k < P.micro_batches; ++k) {
      std::vector<int64_t> shift(static_cast<size_t>(box.rank()), 0);
      if (k > 0) shift[0] = k * P.input_types.at(name).shape()[0];
      Tensor whole = random_input_tile(name, type, seed + 1, int_hi, box.translate(IVec(shift)));
      Tensor t(whole.dtype(), box.shape(), box.start());  // the same elements, micro coordinates
      if (t.is_int())
        std::copy(whole.i64(), whole.i64() + whole.numel(), t.i64());
      else
        std::copy(whole.f32(), whole.f32() + whole.numel(), t.f32());
      f.inputs[static_cast<size_t>(k)].emplace(name, std::move(t));
    }
  }
  return f;
}

Result<TensorMap> unpack_pipeline_result(const PipelineProgram& P, const Graph& g,
                                         const std::vector<ParamUpdate>& updates,
                                         const PipelineResult& r) {
  TensorMap out;
  for (size_t k = 0; k < P.output_names.size(); ++k) {
    ValueId v = g.outputs()[k];
    std::vector<Tensor> parts;
    for (const auto& mo : r.outputs) parts.push_back(mo.at(P.output_names[k]));
    if (P.train) {  // the loss of the whole batch: the mean over micro-batches
      double sum = 0;
      for (const auto& t : parts) sum += t.f32()[0];
      Tensor loss(g.type(v));
      loss.f32()[0] = static_cast<float>(sum / static_cast<double>(parts.size()));
      out.emplace(v, std::move(loss));
    } else if (parts.size() == 1) {
      out.emplace(v, parts[0]);
    } else {
      if (parts[0].rank() == 0 ||
          parts[0].shape()[0] * static_cast<int64_t>(parts.size()) != g.type(v).shape()[0])
        return Diagnostic("output '" + g.value(v).name + "' " + g.type(v).to_string() +
                          " is not split by batch along dim 0, so micro-batches cannot be "
                          "joined; use microbatches=1");
      out.emplace(v, concat_micro_batches(parts));
    }
  }
  auto take = [&](ValueId v, const std::map<std::string, Tensor>& from, const std::string& n) {
    if (auto it = from.find(n); it != from.end()) out.insert_or_assign(v, it->second);
  };
  for (const auto& u : updates) {
    const std::string& p = g.value(u.param).name;
    take(u.updated, r.updated, p);
    take(u.grad, r.grads, p);
    for (const auto& [st, next] : u.state) take(next, r.updated, g.value(st).name);
  }
  for (ValueId v : g.outputs())
    if (!out.count(v))
      return Diagnostic("the pipeline produced no value for output '" + g.value(v).name + "'");
  return out;
}

}  // namespace heddle
