// Pattern rewrites on ONNX node lists before import: subgraphs torch emits for one op (the
// Erf-based GELU, LayerNorm decomposed at opsets below 17) become that one node.
#include <cmath>

#include "OnnxImporter.h"
#include "heddle/support/Numeric.h"

namespace heddle::onnx_detail {

namespace {

// The scalar value of `name` when it is a one-element initializer or Constant output.
std::optional<double> scalar_of(const onnx::GraphProto& g, const std::string& name) {
  auto decode = [](const onnx::TensorProto& t) -> std::optional<double> {
    auto r = tensor_from_proto(t, ".", "");
    if (!r.ok() || !*r || (*r)->numel() != 1) return std::nullopt;
    const Tensor& x = **r;
    return x.is_int() ? static_cast<double>(x.i64()[0]) : static_cast<double>(x.f32()[0]);
  };
  for (const auto& t : g.initializer()) {
    if (t.name() != name) continue;
    int64_t n = 1;
    for (int64_t d : t.dims()) n *= d;
    return n == 1 ? decode(t) : std::nullopt;  // never decode weights just to look
  }
  for (const auto& n : g.node())
    if (n.op_type() == "Constant" && n.output_size() == 1 && n.output(0) == name)
      if (const auto* a = find_attr(n, "value")) return decode(a->t());
  return std::nullopt;
}

bool near_value(std::optional<double> v, double want) {
  return v && std::fabs(*v - want) <= 1e-4 * std::fabs(want);
}

// Nodes with who produces and who uses each tensor (-1: a graph output), and which to drop.
struct NodeGraph {
  std::vector<onnx::NodeProto> nodes;
  std::map<std::string, int> producer;
  std::map<std::string, std::vector<int>> users;
  std::vector<bool> drop;

  explicit NodeGraph(const onnx::GraphProto& g) : nodes(g.node().begin(), g.node().end()) {
    for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
      for (const auto& o : nodes[i].output()) producer[o] = i;
      for (const auto& in : nodes[i].input()) users[in].push_back(i);
    }
    for (const auto& o : g.output()) users[o.name()].push_back(-1);
    drop.assign(nodes.size(), false);
  }

  // The only node reading `t`, or -1.
  int sole_user(const std::string& t) const {
    auto it = users.find(t);
    return it != users.end() && it->second.size() == 1 ? it->second[0] : -1;
  }
  // The node producing `t` with op type `op` and `inputs` inputs, or -1.
  int made_by(const std::string& t, const char* op, int inputs) const {
    auto it = producer.find(t);
    if (it == producer.end()) return -1;
    const auto& n = nodes[it->second];
    return n.op_type() == op && n.input_size() == inputs && n.output_size() == 1 ? it->second : -1;
  }
  // Which input of binary node `i` is the scalar `want`, or -1 (also for malformed nodes).
  int scalar_side(const onnx::GraphProto& g, int i, double want) const {
    if (nodes[i].input_size() != 2 || nodes[i].output_size() != 1) return -1;
    for (int k = 0; k < 2; ++k)
      if (near_value(scalar_of(g, nodes[i].input(k)), want)) return k;
    return -1;
  }
};

// x * 0.5 * (1 + erf(x / sqrt(2))) in either association -> Gelu(x).
void fuse_erf_gelu(const onnx::GraphProto& g, NodeGraph& ng) {
  auto& nodes = ng.nodes;
  auto& producer = ng.producer;
  auto& drop = ng.drop;
  auto sole_user = [&](const std::string& t) { return ng.sole_user(t); };
  auto scalar_side = [&](int i, double want) { return ng.scalar_side(g, i, want); };
  auto near = [](std::optional<double> v, double want) { return near_value(v, want); };
  for (int e = 0; e < static_cast<int>(nodes.size()); ++e) {
    if (nodes[e].op_type() != "Erf" || nodes[e].input_size() != 1 || nodes[e].output_size() != 1 ||
        !producer.count(nodes[e].input(0)))
      continue;
    int d = producer[nodes[e].input(0)];
    std::string x;
    if (nodes[d].input_size() != 2 || nodes[d].output_size() != 1) continue;
    if (nodes[d].op_type() == "Div" && near(scalar_of(g, nodes[d].input(1)), std::sqrt(2.0)))
      x = nodes[d].input(0);
    else if (nodes[d].op_type() == "Mul" && scalar_side(d, std::sqrt(0.5)) >= 0)
      x = nodes[d].input(1 - scalar_side(d, std::sqrt(0.5)));
    else
      continue;
    if (sole_user(nodes[d].output(0)) != e) continue;
    int a = sole_user(nodes[e].output(0));
    if (a < 0 || nodes[a].op_type() != "Add" || scalar_side(a, 1.0) < 0) continue;
    int m1 = sole_user(nodes[a].output(0));
    if (m1 < 0 || nodes[m1].op_type() != "Mul" || nodes[m1].input_size() != 2 ||
        nodes[m1].output_size() != 1)
      continue;
    const std::string& other =
        nodes[m1].input(0) == nodes[a].output(0) ? nodes[m1].input(1) : nodes[m1].input(0);
    std::vector<int> pattern = {d, e, a, m1};
    int last = m1;
    if (other == x) {  // (x * (1 + erf)) * 0.5
      int m2 = sole_user(nodes[m1].output(0));
      if (m2 < 0 || nodes[m2].op_type() != "Mul" || scalar_side(m2, 0.5) < 0) continue;
      pattern.push_back(m2);
      last = m2;
    } else {  // (x * 0.5) * (1 + erf)
      if (!producer.count(other)) continue;
      int h = producer[other];
      if (nodes[h].op_type() != "Mul" || scalar_side(h, 0.5) < 0 ||
          nodes[h].input(1 - scalar_side(h, 0.5)) != x || sole_user(other) != m1)
        continue;
      pattern.push_back(h);
    }
    onnx::NodeProto gelu;
    gelu.set_op_type("Gelu");
    gelu.set_name(nodes[e].name().empty() ? "gelu" : nodes[e].name() + "_gelu");
    gelu.add_input(x);
    gelu.add_output(nodes[last].output(0));
    for (int p : pattern) drop[p] = true;
    drop[last] = false;
    nodes[last] = gelu;
  }
}

// A 1-D initializer, as LayerNormalization's scale and bias must be.
bool is_vector_initializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer())
    if (t.name() == name) return t.dims_size() == 1;
  return false;
}

// ReduceMean(axes=[-1]) with keepdims.
bool is_last_axis_mean(const onnx::NodeProto& n) {
  auto axes = attr_ints(n, "axes");
  return axes.size() == 1 && axes[0] == -1 && attr_int(n, "keepdims", 1) == 1;
}

// mean/sub/pow/mean/add eps/sqrt/div/mul gamma/add beta over the last axis -> LayerNormalization.
void fuse_layernorm(const onnx::GraphProto& g, NodeGraph& ng) {
  auto& nodes = ng.nodes;
  for (int r1 = 0; r1 < static_cast<int>(nodes.size()); ++r1) {
    const auto& mean = nodes[r1];
    if (ng.drop[r1] || mean.op_type() != "ReduceMean" || mean.input_size() != 1 ||
        mean.output_size() != 1 || !is_last_axis_mean(mean))
      continue;
    const std::string& x = mean.input(0);
    int sub = ng.sole_user(mean.output(0));
    if (sub < 0 || nodes[sub].op_type() != "Sub" || nodes[sub].input_size() != 2 ||
        nodes[sub].output_size() != 1 || nodes[sub].input(0) != x ||
        nodes[sub].input(1) != mean.output(0))
      continue;
    const std::string& centered = nodes[sub].output(0);
    auto cu = ng.users.find(centered);
    if (cu == ng.users.end() || cu->second.size() != 2) continue;
    int pow = -1, div = -1;
    for (int u : cu->second) {
      if (u < 0) continue;
      if (nodes[u].op_type() == "Pow" && ng.scalar_side(g, u, 2.0) == 1) pow = u;
      if (nodes[u].op_type() == "Div" && nodes[u].input_size() == 2 &&
          nodes[u].input(0) == centered && nodes[u].output_size() == 1)
        div = u;
    }
    if (pow < 0 || div < 0) continue;
    int r2 = ng.sole_user(nodes[pow].output(0));
    if (r2 < 0 || nodes[r2].op_type() != "ReduceMean" || nodes[r2].output_size() != 1 ||
        !is_last_axis_mean(nodes[r2]))
      continue;
    int add_eps = ng.sole_user(nodes[r2].output(0));
    if (add_eps < 0 || nodes[add_eps].op_type() != "Add") continue;
    int eps_side = -1;
    std::optional<double> eps;
    for (int k = 0; k < 2 && nodes[add_eps].input_size() == 2; ++k)
      if (nodes[add_eps].input(k) != nodes[r2].output(0))
        eps = scalar_of(g, nodes[add_eps].input(k)), eps_side = k;
    if (eps_side < 0 || !eps || !(*eps > 0) || nodes[add_eps].output_size() != 1) continue;
    int sqrt = ng.sole_user(nodes[add_eps].output(0));
    if (sqrt < 0 || nodes[sqrt].op_type() != "Sqrt" || nodes[sqrt].output_size() != 1 ||
        nodes[div].input(1) != nodes[sqrt].output(0) || ng.sole_user(nodes[sqrt].output(0)) != div)
      continue;
    int mul = ng.sole_user(nodes[div].output(0));
    if (mul < 0 || nodes[mul].op_type() != "Mul" || nodes[mul].input_size() != 2 ||
        nodes[mul].output_size() != 1)
      continue;
    const std::string& gamma =
        nodes[mul].input(0) == nodes[div].output(0) ? nodes[mul].input(1) : nodes[mul].input(0);
    int add = ng.sole_user(nodes[mul].output(0));
    if (add < 0 || nodes[add].op_type() != "Add" || nodes[add].input_size() != 2 ||
        nodes[add].output_size() != 1)
      continue;
    const std::string& beta =
        nodes[add].input(0) == nodes[mul].output(0) ? nodes[add].input(1) : nodes[add].input(0);
    if (!is_vector_initializer(g, gamma) || !is_vector_initializer(g, beta)) continue;
    onnx::NodeProto ln;
    ln.set_op_type("LayerNormalization");
    ln.set_name(mean.name().empty() ? "layernorm" : mean.name() + "_layernorm");
    ln.add_input(x);
    ln.add_input(gamma);
    ln.add_input(beta);
    ln.add_output(nodes[add].output(0));
    auto* a = ln.add_attribute();
    a->set_name("epsilon");
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(saturating_float(*eps));
    for (int k : {r1, sub, pow, r2, add_eps, sqrt, div, mul}) ng.drop[k] = true;
    nodes[add] = ln;
  }
}

}  // namespace

std::vector<onnx::NodeProto> fuse_patterns(const onnx::GraphProto& g) {
  NodeGraph ng(g);
  fuse_erf_gelu(g, ng);
  fuse_layernorm(g, ng);
  std::vector<onnx::NodeProto> kept;
  for (size_t i = 0; i < ng.nodes.size(); ++i)
    if (!ng.drop[i]) kept.push_back(std::move(ng.nodes[i]));
  return kept;
}

}  // namespace heddle::onnx_detail
