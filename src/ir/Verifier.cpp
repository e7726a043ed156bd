#include "heddle/ir/Verifier.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

#include "VerifyForms.h"
#include "heddle/ir/TextPrinter.h"
#include "heddle/support/Strings.h"

namespace heddle {

namespace {

constexpr __int128 kLimit = std::numeric_limits<int64_t>::max() / 4;

// Product of `v` without overflow: false when it exceeds kLimit.
bool checked_product(const IVec& v, int64_t* out) {
  __int128 p = 1;
  for (int64_t x : v) {
    p *= x;
    if (p > kLimit || p < -kLimit) return false;
  }
  *out = static_cast<int64_t>(p);
  return true;
}

// True when computing proj.image(box of extents) stays far from int64 overflow.
bool image_fits(const IndexProjection& proj, const IVec& extents) {
  const AffineMap& m = proj.map();
  for (int64_t r = 0; r < m.out_rank(); ++r) {
    __int128 acc = m.offset()[r];
    if (acc < 0) acc = -acc;
    for (int64_t c = 0; c < m.in_rank(); ++c) {
      __int128 a = m.at(r, c);
      acc += (a < 0 ? -a : a) * static_cast<__int128>(extents[c]);
      if (acc > kLimit) return false;
    }
    acc += proj.window()[r];
    if (acc > kLimit) return false;
  }
  return true;
}

std::string dtype_list(const std::vector<DType>& ts) {
  std::vector<std::string> s;
  for (DType t : ts) s.emplace_back(dtype_name(t));
  return join(s, ", ");
}

class OpChecker {
 public:
  OpChecker(const Graph& g, OpId id, std::vector<Diagnostic>& out)
      : g_(g), id_(id), op_(g.op(id)), out_(out), reported_before_(out.size()) {
    std::string first = op_.results.empty() || op_.results[0].value < 0
                            ? std::string("(no result)")
                            : value_ref(g.value(op_.results[0].value).name);
    prefix_ = "op '" + std::string(op_kind_name(op_.kind)) + "' defining " + first + ": ";
  }

  void run() {
    const OpKindInfo& info = op_kind_info(op_.kind);
    auto n_in = static_cast<int>(op_.inputs.size());
    if (n_in < info.min_inputs || (info.max_inputs >= 0 && n_in > info.max_inputs)) {
      std::string want =
          info.max_inputs < 0 ? "at least " + std::to_string(info.min_inputs)
          : info.min_inputs == info.max_inputs
              ? std::to_string(info.min_inputs)
              : std::to_string(info.min_inputs) + " to " + std::to_string(info.max_inputs);
      report("takes " + want + " input(s), got " + std::to_string(n_in));
    }
    if (static_cast<int>(op_.results.size()) != info.num_results)
      report("defines " + std::to_string(info.num_results) + " result(s), got " +
             std::to_string(op_.results.size()));
    check_attrs(info);
    if (!check_space()) return;
    for (size_t i = 0; i < op_.inputs.size(); ++i) check_input(i);
    for (size_t i = 0; i < op_.results.size(); ++i) check_result(i);
    check_dtypes();
    check_float_results();
    // Attributes against projections, once the projections themselves are sound.
    if (out_.size() == reported_before_)
      for (auto& m : verify_detail::check_form(g_, id_)) report(m);
  }

 private:
  void report(const std::string& msg) { out_.emplace_back(g_.loc(id_), prefix_ + msg); }

  void check_attrs(const OpKindInfo& info) {
    for (const auto& [name, v] : op_.attrs) {
      const AttrSpec* spec = info.find_attr(name);
      if (!spec)
        report("unknown attribute '" + name + "'");
      else if (attr_type(v) != spec->type)
        report("attribute '" + name + "' must be " + attr_type_name(spec->type) + ", got " +
               attr_to_string(v));
    }
    for (const auto& spec : info.attrs)
      if (spec.required && !op_.attrs.count(spec.name))
        report("missing required attribute '" + spec.name + "'");
  }

  bool check_space() {
    bool ok = true;
    const auto& dims = op_.space.dims();
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i].name.empty()) {
        report("index dim " + std::to_string(i) + " has no name");
        ok = false;
      }
      for (size_t j = 0; j < i; ++j)
        if (dims[j].name == dims[i].name) {
          report("index dim '" + dims[i].name + "' is declared twice");
          ok = false;
        }
      if (dims[i].extent <= 0) {
        report("index dim '" + dims[i].name + "' has extent " + std::to_string(dims[i].extent) +
               "; extents must be positive");
        ok = false;
      }
    }
    int64_t vol = 0;
    if (ok && !checked_product(op_.space.extents(), &vol)) {
      report("index space " + op_.space.to_string() + " has too many points");
      ok = false;
    }
    return ok;
  }

  // Common operand checks; false when the projection cannot be examined further.
  bool check_operand(const Operand& o, const std::string& what) {
    if (o.value < 0 || o.value >= g_.num_values()) {
      report(what + " refers to no value");
      return false;
    }
    const Value& v = g_.value(o.value);
    if (v.role == ValueRole::kResult && v.producer >= id_ && v.producer != id_) {
      report(what + " (" + value_ref(v.name) + ") is used before the op that defines it");
      return false;
    }
    if (o.proj.index_rank() != op_.space.rank()) {
      report(what + " (" + value_ref(v.name) + "): projection has " +
             std::to_string(o.proj.index_rank()) + " index dims but the index space has " +
             std::to_string(op_.space.rank()));
      return false;
    }
    if (o.proj.tensor_rank() != v.type.rank()) {
      report(what + " (" + value_ref(v.name) + "): projection " +
             o.proj.to_string(op_.space.names()) + " has " + std::to_string(o.proj.tensor_rank()) +
             " dims but the tensor " + v.type.to_string() + " has " +
             std::to_string(v.type.rank()));
      return false;
    }
    for (int64_t r = 0; r < o.proj.tensor_rank(); ++r)
      if (o.proj.window()[r] == 0) {  // an empty window: nothing a kernel or gradient can read
        report(what + " (" + value_ref(v.name) + "): projection " +
               o.proj.to_string(op_.space.names()) + " has a window of 0 in tensor dim " +
               std::to_string(r) + ", so it touches no element; windows are at least 1");
        return false;
      }
    if (!image_fits(o.proj, op_.space.extents())) {
      report(what + " (" + value_ref(v.name) + "): projection coefficients are too large");
      return false;
    }
    return true;
  }

  void check_input(size_t i) {
    const Operand& o = op_.inputs[i];
    std::string what = "input " + std::to_string(i);
    if (!check_operand(o, what)) return;
    const Value& v = g_.value(o.value);
    Box img = o.proj.image(op_.space.box());
    Box tensor = Box::of_shape(v.type.shape());
    if (o.padded) {
      if (img.intersect(tensor).empty() && !tensor.empty())
        report(what + " (" + value_ref(v.name) + "): padded projection " +
               o.proj.to_string(op_.space.names()) + " never touches the tensor");
      return;
    }
    if (!tensor.contains(img))
      report(what + " (" + value_ref(v.name) + "): projection " +
             o.proj.to_string(op_.space.names()) + " reads " + img.to_string() +
             ", outside the tensor " + v.type.to_string() +
             " (mark the operand 'padded' if out-of-bounds reads are zero)");
  }

  void check_result(size_t i) {
    const Operand& o = op_.results[i];
    std::string what = "result " + std::to_string(i);
    if (!check_operand(o, what)) return;
    const Value& v = g_.value(o.value);
    if (o.padded) report(what + " (" + value_ref(v.name) + ") cannot be 'padded'");
    std::vector<bool> reduce;
    for (const auto& d : op_.space.dims()) reduce.push_back(d.is_reduce());
    Status s = check_exact_cover(o.proj, op_.space.extents(), reduce, v.type.shape());
    if (!s.ok())
      report(what + " (" + value_ref(v.name) + "): projection " +
             o.proj.to_string(op_.space.names()) + " " + s.error().message);
  }

  void check_dtypes() {
    std::vector<DType> uniform;
    auto want_int = [&](size_t i, const char* role) {
      if (i >= op_.inputs.size() || op_.inputs[i].value < 0) return;
      DType t = g_.type(op_.inputs[i].value).dtype();
      if (t != DType::kI32 && t != DType::kI64)
        report(std::string(role) + " (input " + std::to_string(i) + ") must be i32 or i64, got " +
               std::string(dtype_name(t)));
    };
    std::vector<size_t> skip;
    switch (op_.kind) {
      case OpKind::kCast:
        return;
      case OpKind::kWhere:
        if (!op_.inputs.empty() && op_.inputs[0].value >= 0 &&
            g_.type(op_.inputs[0].value).dtype() != DType::kBool)
          report("condition (input 0) must be bool, got " +
                 std::string(dtype_name(g_.type(op_.inputs[0].value).dtype())));
        skip.push_back(0);
        break;
      case OpKind::kEmbedding:
        want_int(0, "ids");
        skip.push_back(0);
        break;
      case OpKind::kCrossEntropy:
        want_int(1, "labels");
        skip.push_back(1);
        break;
      case OpKind::kEmbeddingGrad:
        want_int(0, "ids");
        skip.push_back(0);
        break;
      case OpKind::kNormGrad:         // the cross-entropy gradient reads integer labels
      case OpKind::kElementwiseGrad:  // the where gradient reads the bool condition
        for (size_t i = 0; i < op_.inputs.size(); ++i)
          if (op_.inputs[i].value >= 0 && !dtype_is_float(g_.type(op_.inputs[i].value).dtype()))
            skip.push_back(i);
        break;
      default:
        break;
    }
    std::vector<DType> seen;
    auto add = [&](const Operand& o) {
      if (o.value < 0 || o.value >= g_.num_values()) return;
      DType t = g_.type(o.value).dtype();
      if (std::find(seen.begin(), seen.end(), t) == seen.end()) seen.push_back(t);
    };
    for (size_t i = 0; i < op_.inputs.size(); ++i)
      if (std::find(skip.begin(), skip.end(), i) == skip.end()) add(op_.inputs[i]);
    for (const auto& r : op_.results) add(r);
    if (seen.size() > 1)
      report("operands and results must share one element type, got " + dtype_list(seen));
  }

  // The kernels compute in floating point: integer and bool tensors enter as graph inputs (ids,
  // labels, conditions) and are only read.
  void check_float_results() {
    for (size_t i = 0; i < op_.results.size(); ++i) {
      const Operand& r = op_.results[i];
      if (r.value < 0 || r.value >= g_.num_values() || dtype_is_float(g_.type(r.value).dtype()))
        continue;
      report("result " + std::to_string(i) + " (" + value_ref(g_.value(r.value).name) + ") is " +
             std::string(dtype_name(g_.type(r.value).dtype())) +
             "; ops compute floating-point results (f32, f16, bf16): integer and bool tensors "
             "are graph inputs, read as ids, labels or conditions");
    }
  }

  const Graph& g_;
  OpId id_;
  const Op& op_;
  std::vector<Diagnostic>& out_;
  size_t reported_before_;
  std::string prefix_;
};

}  // namespace

Status check_exact_cover(const IndexProjection& proj, const IVec& extents,
                         const std::vector<bool>& reduce_dims, const IVec& shape) {
  const AffineMap& m = proj.map();
  int64_t in = m.in_rank();
  std::vector<int> rows_of(static_cast<size_t>(in), 0);
  for (int64_t c = 0; c < in; ++c) {
    bool reduce = c < static_cast<int64_t>(reduce_dims.size()) && reduce_dims[c];
    for (int64_t r = 0; r < m.out_rank(); ++r) {
      if (m.at(r, c) == 0) continue;
      if (reduce)
        return Diagnostic("uses reduce dim " + std::to_string(c) +
                          "; results must not depend on reduce dims");
      if (extents[c] > 1) ++rows_of[c];
    }
  }
  for (int64_t c = 0; c < in; ++c) {
    bool reduce = c < static_cast<int64_t>(reduce_dims.size()) && reduce_dims[c];
    if (!reduce && extents[c] > 1 && rows_of[c] == 0)
      return Diagnostic("ignores parallel dim " + std::to_string(c) +
                        ", so its points write the same elements");
    if (rows_of[c] > 1)
      return Diagnostic("uses dim " + std::to_string(c) +
                        " in several tensor dims, which cannot cover the tensor exactly");
  }
  for (int64_t r = 0; r < m.out_rank(); ++r) {
    std::vector<std::pair<int64_t, int64_t>> terms;  // |coefficient|, extent
    int64_t low = m.offset()[r];
    for (int64_t c = 0; c < in; ++c) {
      int64_t a = m.at(r, c);
      if (a == 0 || extents[c] <= 1) continue;
      terms.emplace_back(a < 0 ? -a : a, extents[c]);
      if (a < 0) low += a * (extents[c] - 1);
    }
    std::sort(terms.begin(), terms.end());
    std::string dim = "tensor dim " + std::to_string(r);
    if (low != 0)
      return Diagnostic("starts writing " + dim + " at " + std::to_string(low) + ", not 0");
    int64_t stride = proj.window()[r];
    for (auto [coef, extent] : terms) {
      if (coef != stride)
        return Diagnostic(coef < stride ? "writes elements of " + dim + " more than once"
                                        : "leaves gaps in " + dim);
      stride *= extent;
    }
    if (stride != shape[r])
      return Diagnostic("covers " + std::to_string(stride) + " elements of " + dim + " of size " +
                        std::to_string(shape[r]));
  }
  return {};
}

std::vector<Diagnostic> verify(const Graph& g) {
  std::vector<Diagnostic> out;
  std::unordered_map<std::string, ValueId> names;
  SourceLoc file_loc{g.source_file(), 0, 0};
  for (ValueId v = 0; v < g.num_values(); ++v) {
    const Value& val = g.value(v);
    if (val.name.empty()) out.emplace_back(file_loc, "value " + std::to_string(v) + " has no name");
    auto [it, fresh] = names.emplace(val.name, v);
    if (!fresh) out.emplace_back(file_loc, "value " + value_ref(val.name) + " is defined twice");
    int64_t n = 0;
    if (!checked_product(val.type.shape(), &n))
      out.emplace_back(file_loc, "value " + value_ref(val.name) + " of type " +
                                     val.type.to_string() + " has too many elements");
  }
  for (OpId i = 0; i < g.num_ops(); ++i) OpChecker(g, i, out).run();
  return out;
}

Status verify_ok(const Graph& g) {
  auto diags = verify(g);
  if (diags.empty()) return {};
  return diags.front();
}

}  // namespace heddle
