// The ONNX import driver: parse the protobuf, declare inputs and initializers, fold shape
// arithmetic, and hand each node to its family's handler.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "OnnxImporter.h"
#include "heddle/ir/Verifier.h"
#include "heddle/support/BoundedRead.h"
#include "heddle/support/Limits.h"

namespace heddle {

using namespace onnx_detail;

namespace {

std::map<std::string, NodeHandler>& handler_table() {
  static std::map<std::string, NodeHandler> table = [] {
    std::map<std::string, NodeHandler> t;
    register_math_ops(t);
    register_layout_ops(t);
    register_vision_ops(t);
    return t;
  }();
  return table;
}

// Ops that only ever appear folded (shape arithmetic) are supported too.
const std::vector<std::string> kFoldOnly = {"Shape", "ConstantOfShape", "Range", "Equal",
                                            "Not",   "Constant"};

// Inputs each op needs at least (optional inputs may be empty names); the handlers and folding
// index inputs below these counts without further checks.
Status check_arity(const Importer& im, const onnx::NodeProto& n) {
  static const std::map<std::string, int> kMinInputs = {{"Constant", 0},
                                                        {"Conv", 2},
                                                        {"Gemm", 2},
                                                        {"MatMul", 2},
                                                        {"Add", 2},
                                                        {"Sub", 2},
                                                        {"Mul", 2},
                                                        {"Div", 2},
                                                        {"Pow", 2},
                                                        {"Max", 2},
                                                        {"Min", 2},
                                                        {"Equal", 2},
                                                        {"Less", 2},
                                                        {"Greater", 2},
                                                        {"Where", 3},
                                                        {"BatchNormalization", 5},
                                                        {"LayerNormalization", 2},
                                                        {"Reshape", 2},
                                                        {"Expand", 2},
                                                        {"Slice", 3},
                                                        {"Gather", 2},
                                                        {"Pad", 2},
                                                        {"Range", 3}};
  auto it = kMinInputs.find(n.op_type());
  int need = it == kMinInputs.end() ? 1 : it->second;
  if (n.input_size() < need)
    return im.error(n, "has " + std::to_string(n.input_size()) + " input(s); " + n.op_type() +
                           " needs at least " + std::to_string(need));
  for (int k = 0; k < std::min(need, n.input_size()); ++k)
    if (n.input(k).empty() && !(n.op_type() == "Clip" && k > 0))
      return im.error(n, "required input " + std::to_string(k) + " is empty");
  if (n.output_size() < 1 || n.output(0).empty()) return im.error(n, "has no output");
  return {};
}

std::string join(const std::vector<std::string>& xs) {
  std::string s;
  for (const auto& x : xs) s += (s.empty() ? "" : ", ") + x;
  return s;
}

Result<ImportedModel> import_model(onnx::ModelProto& model, const std::string& file,
                                   const OnnxImportOptions& options) {
  auto err = [&](const std::string& m) { return Diagnostic(SourceLoc{file, 0, 0}, m); };
  if (!model.has_graph() || model.opset_import_size() == 0)
    return err("not an ONNX model: the protobuf has no graph or no opset_import");
  int64_t opset = 0;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  if (opset < 13 || opset > 17)
    return err("the model declares ONNX opset " + std::to_string(opset) +
               "; heddle imports opsets 13 to 17 (re-export with torch.onnx.export(..., "
               "opset_version=17))");
  const onnx::GraphProto& g = model.graph();
  ImportedModel out;
  out.graph = Graph(g.name().empty() ? "onnx" : g.name());
  out.graph.set_source_file(file);
  out.opset = opset;
  Importer im(out, file, opset);

  std::string base = options.base_dir;
  if (base.empty()) {
    size_t slash = file.find_last_of('/');
    base = slash == std::string::npos ? "." : file.substr(0, slash);
  }
  for (auto& init : *model.mutable_graph()->mutable_initializer()) {
    auto data = tensor_from_proto(init, base, file);
    HEDDLE_TRY(data);
    if (*data) {
      im.set_constant(init.name(), std::move(**data));
    } else {
      auto dt = dtype_from_onnx(init.data_type());
      if (!dt) return err("initializer '" + init.name() + "' has an unsupported element type");
      im.set_data_free(
          init.name(),
          TensorType(*dt, IVec(std::vector<int64_t>(init.dims().begin(), init.dims().end()))));
    }
    // The data now lives in a Tensor: free the protobuf's copy (clear() would keep capacity).
    std::string().swap(*init.mutable_raw_data());
    init.clear_float_data();
  }
  for (const auto& in : g.input()) {
    if (im.has(in.name())) continue;  // initializers may be listed as inputs (IR < 4)
    const auto& tt = in.type().tensor_type();
    auto dt = dtype_from_onnx(tt.elem_type());
    if (!dt)
      return err("graph input '" + in.name() + "' has element type " +
                 std::to_string(tt.elem_type()) + ", which heddle cannot hold");
    std::vector<int64_t> shape;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (d.has_dim_value() && d.dim_value() > 0) {
        shape.push_back(d.dim_value());
        continue;
      }
      std::string sym = d.dim_param();
      if (!sym.empty()) out.dynamic_dims.push_back(sym);
      auto it = options.dims.find(sym);
      if (sym.empty() || it == options.dims.end())
        return err("graph input '" + in.name() + "' dim " + std::to_string(i) + " is dynamic" +
                   (sym.empty() ? " and unnamed; re-export with a fixed shape"
                                : " ('" + sym + "'); bind it with --dim " + sym + "=VALUE"));
      if (it->second <= 0) return err("--dim " + sym + " must be positive");
      shape.push_back(it->second);
    }
    im.set_value(in.name(), im.ops().input(in.name(), TensorType(*dt, IVec(shape))));
  }

  std::sort(out.dynamic_dims.begin(), out.dynamic_dims.end());
  out.dynamic_dims.erase(std::unique(out.dynamic_dims.begin(), out.dynamic_dims.end()),
                         out.dynamic_dims.end());
  auto& table = handler_table();
  for (const onnx::NodeProto& n : fuse_patterns(g)) {
    if (!n.domain().empty() && n.domain() != "ai.onnx" && n.op_type() != "Gelu")
      return im.error(n, "op '" + n.op_type() + "' of domain '" + n.domain() +
                             "' is not supported; heddle imports the default ONNX domain");
    if (auto arity = check_arity(im, n); !arity.ok()) return arity.error();
    auto folded = try_fold(im, n);
    HEDDLE_TRY(folded);
    if (*folded) continue;
    auto h = table.find(n.op_type());
    if (h == table.end())
      return im.error(n, "unsupported ONNX op '" + n.op_type() + "' (node '" + n.name() +
                             "', opset " + std::to_string(opset) +
                             "). Supported ops: " + join(onnx_supported_ops()) + ".");
    HEDDLE_TRY(h->second(im, n));
    HEDDLE_TRY(im.check(n));
  }
  for (const auto& o : g.output()) {
    if (!im.has(o.name())) return err("graph output '" + o.name() + "' is never defined");
    auto v = im.value(o.name());
    HEDDLE_TRY(v);
    im.ops().output(*v);
  }
  HEDDLE_TRY(im.ops().status());
  // The builders check shapes; element types an ONNX op accepts but heddle's op does not (a
  // MatMul of bools) surface here, as an error rather than a graph that fails verification later.
  if (auto diags = verify(out.graph); !diags.empty())
    return err("the model uses an op on operands heddle does not support: " +
               diags.front().message);
  return out;
}

}  // namespace

const std::vector<std::string>& onnx_supported_ops() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v;
    for (const auto& [k, h] : handler_table())
      if (k != "Gelu" && k != "Erf") v.push_back(k);
    for (const auto& k : kFoldOnly) v.push_back(k + " (folded)");
    v.push_back("Erf (in GELU)");
    std::sort(v.begin(), v.end());
    return v;
  }();
  return ops;
}

Result<ImportedModel> import_onnx_bytes(const std::string& bytes, const std::string& name,
                                        const OnnxImportOptions& options) {
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    return Diagnostic(SourceLoc{name, 0, 0},
                      "not a valid ONNX file: the protobuf does not parse (truncated or not an "
                      "ONNX model)");
  OnnxImportOptions o = options;
  if (o.base_dir.empty()) o.base_dir = ".";
  return import_model(model, name, o);
}

Result<ImportedModel> import_onnx_file(const std::string& path, const OnnxImportOptions& options) {
  auto bytes = read_file_bounded(
      path, {.max_bytes = limits::kMaxOnnxBytes, .what = "ONNX file", .raise_with = ""});
  HEDDLE_TRY(bytes);
  onnx::ModelProto model;
  if (!model.ParseFromString(*bytes))
    return Diagnostic(SourceLoc{path, 0, 0},
                      "not a valid ONNX file: the protobuf does not parse (truncated or not an "
                      "ONNX model)");
  return import_model(model, path, options);
}

}  // namespace heddle
