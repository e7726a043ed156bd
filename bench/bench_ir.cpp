// The text form at scale: parse + verify + print a generated graph of 100,000 ops. The baseline
// in the same run is nlohmann-json parsing the same graph written as JSON (same content: names,
// types, index spaces, projection matrices), so the ratio says how our parser compares with a
// widely used structured-text parser on this machine.
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include "common/RandomGraph.h"
#include "heddle/ir/TextParser.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/ir/Verifier.h"

namespace heddle {
namespace {

constexpr int64_t kOps = 100000;

const Graph& big_graph() {
  static const Graph g = testing::random_graph(kOps, 2024);
  return g;
}

const std::string& big_text() {
  static const std::string t = print_graph(big_graph());
  return t;
}

std::string as_json(const Graph& g) {
  nlohmann::json ops = nlohmann::json::array();
  auto operand = [&](const Operand& o) {
    const AffineMap& m = o.proj.map();
    std::vector<int64_t> a;
    for (int64_t r = 0; r < m.out_rank(); ++r)
      for (int64_t c = 0; c < m.in_rank(); ++c) a.push_back(m.at(r, c));
    return nlohmann::json{{"value", g.value(o.value).name},
                          {"matrix", a},
                          {"offset", m.offset().values()},
                          {"window", o.proj.window().values()},
                          {"padded", o.padded}};
  };
  for (const Op& op : g.ops()) {
    nlohmann::json j;
    j["kind"] = std::string(op_kind_name(op.kind));
    j["result"] = g.value(op.results[0].value).name;
    j["type"] = g.type(op.results[0].value).to_string();
    for (const auto& d : op.space.dims())
      j["space"].push_back({{"name", d.name}, {"extent", d.extent}, {"reduce", d.is_reduce()}});
    for (const auto& in : op.inputs) j["inputs"].push_back(operand(in));
    j["outputs"].push_back(operand(op.results[0]));
    ops.push_back(j);
  }
  return nlohmann::json{{"graph", g.name()}, {"ops", ops}}.dump();
}

void BM_Parse(benchmark::State& state) {
  const std::string& text = big_text();
  for (auto _ : state) {
    auto g = parse_graph(text, "big.hd");
    if (!g.ok()) state.SkipWithError(g.error().to_string().c_str());
    benchmark::DoNotOptimize(g);
  }
  state.SetItemsProcessed(state.iterations() * big_graph().num_ops());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_Parse)->Unit(benchmark::kMillisecond);

void BM_Verify(benchmark::State& state) {
  for (auto _ : state) {
    auto d = verify(big_graph());
    if (!d.empty()) state.SkipWithError(d.front().to_string().c_str());
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(state.iterations() * big_graph().num_ops());
}
BENCHMARK(BM_Verify)->Unit(benchmark::kMillisecond);

void BM_Print(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(print_graph(big_graph()));
  state.SetItemsProcessed(state.iterations() * big_graph().num_ops());
}
BENCHMARK(BM_Print)->Unit(benchmark::kMillisecond);

void BM_ParseVerifyPrint(benchmark::State& state) {
  const std::string& text = big_text();
  for (auto _ : state) {
    auto g = parse_graph(text, "big.hd");
    auto d = verify(*g);
    benchmark::DoNotOptimize(d);
    benchmark::DoNotOptimize(print_graph(*g));
  }
  state.SetItemsProcessed(state.iterations() * big_graph().num_ops());
}
BENCHMARK(BM_ParseVerifyPrint)->Unit(benchmark::kMillisecond);

void BM_Baseline_JsonParse(benchmark::State& state) {
  static const std::string json = as_json(big_graph());
  for (auto _ : state) benchmark::DoNotOptimize(nlohmann::json::parse(json));
  state.SetItemsProcessed(state.iterations() * big_graph().num_ops());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(json.size()));
}
BENCHMARK(BM_Baseline_JsonParse)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace heddle

BENCHMARK_MAIN();
