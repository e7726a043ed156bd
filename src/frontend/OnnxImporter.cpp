// The importer's shared state and helpers: entries, parameters from constants, attributes,
// TensorProto decoding, and the Erf-GELU rewrite.
#include "OnnxImporter.h"

#include <cmath>
#include <cstring>
#include <fstream>

#include "heddle/support/Numeric.h"

namespace heddle::onnx_detail {

namespace {
constexpr int64_t kKeepConstantElements = 4096;
constexpr int64_t kMaxElements = int64_t{1} << 40;  // a guard against corrupt dims
}  // namespace

void Importer::set_constant(const std::string& name, Tensor t) {
  entries_[name].constant = std::move(t);
}

void Importer::set_transposed(const std::string& name, ValueId x, std::vector<int64_t> perm) {
  Entry& e = entries_[name];
  e.transposed_of = x;
  e.perm = std::move(perm);
}

const Entry* Importer::transposed(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end() || it->second.value != kNoValue) return nullptr;
  return it->second.transposed_of != kNoValue ? &it->second : nullptr;
}

const Tensor* Importer::constant(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end() || !it->second.constant) return nullptr;
  return &*it->second.constant;
}

TensorType Importer::type(const std::string& name) const {
  const Entry& e = entries_.at(name);
  if (e.value != kNoValue) return out_.graph.type(e.value);
  if (e.transposed_of != kNoValue) {
    const TensorType& x = out_.graph.type(e.transposed_of);
    std::vector<int64_t> shape;
    for (int64_t d : e.perm) shape.push_back(x.shape()[d]);
    return TensorType(x.dtype(), IVec(shape));
  }
  if (e.constant) return TensorType(e.constant->dtype(), e.constant->shape());
  HEDDLE_ASSERT(e.data_free) << "entry '" << name << "' has no type";
  return *e.data_free;
}

std::string Importer::unique_name(const std::string& stem) const {
  std::string s;
  for (char c : stem) s += std::isalnum(static_cast<unsigned char>(c)) || c == '.' ? c : '_';
  while (!s.empty() && (s.front() == '_' || s.front() == '.')) s.erase(0, 1);
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s.front()))) s = "w" + s;
  std::string name = s;
  for (int k = 1; out_.graph.find_value(name); ++k) name = s + "_" + std::to_string(k);
  return name;
}

void Importer::mark_initializer(const std::string& name) {
  Entry& e = entries_.at(name);
  TensorType t = type(name);
  e.weight = dtype_is_float(t.dtype());
}

void Importer::inherit_weight(const onnx::NodeProto& n) {
  bool any = false;
  for (const auto& in : n.input()) {
    auto it = entries_.find(in);
    any = any || (it != entries_.end() && it->second.weight);
  }
  for (const auto& o : n.output())
    if (auto it = entries_.find(o); it != entries_.end()) it->second.weight = any;
}

ValueId Importer::add_param(const std::string& stem, const TensorType& type, const Tensor* data,
                            bool trainable) {
  std::string name = unique_name(stem);
  ValueId v = ops_.param(name, type);
  if (!trainable) out_.constants.push_back(name);
  if (data)
    out_.weights.emplace(v, *data);  // copies; value() drops the entry's copy of large ones
  else
    out_.missing_weights.push_back(name);
  return v;
}

Result<ValueId> Importer::value(const std::string& name) {
  auto it = entries_.find(name);
  if (it == entries_.end())
    return Diagnostic(SourceLoc{file_, 0, 0}, "tensor '" + name + "' is used before it is defined");
  Entry& e = it->second;
  if (e.value != kNoValue) return e.value;
  if (e.transposed_of != kNoValue) {
    e.value = ops_.transpose(e.transposed_of, e.perm);
    return e.value;
  }
  if (e.constant) {
    TensorType t(e.constant->dtype(), e.constant->shape());
    e.value = add_param(name, t, &*e.constant, e.weight);
    // Large constants are weights: keep one copy (in the model's weights), not two. Small ones
    // stay foldable.
    if (t.numel() > kKeepConstantElements) e.constant.reset();
  } else {
    HEDDLE_ASSERT(e.data_free) << "entry '" << name << "' is empty";
    e.value = add_param(name, *e.data_free, nullptr, e.weight);
  }
  return e.value;
}

Result<std::vector<int64_t>> Importer::ints(const onnx::NodeProto& n, int input,
                                            const char* what) const {
  if (input >= n.input_size() || n.input(input).empty())
    return error(n, std::string("input '") + what + "' is missing");
  const Tensor* t = constant(n.input(input));
  if (!t)
    return error(n, std::string("input '") + what +
                        "' must be a constant (or computed from static shapes); re-export with "
                        "static shapes or bind dynamic dims with --dim");
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t->numel(); ++i)
    v.push_back(t->is_int() ? t->i64()[i] : saturating_int64(t->f32()[i]));
  return v;
}

Status Importer::check(const onnx::NodeProto& n) {
  if (ops_.ok()) return {};
  return error(n, ops_.status().error().message);
}

Diagnostic Importer::error(const onnx::NodeProto& n, const std::string& message) const {
  return Diagnostic(SourceLoc{file_, 0, 0},
                    "node '" + n.name() + "' (" + n.op_type() + "): " + message);
}

std::optional<std::vector<int64_t>> Importer::rebatch_reshape(const onnx::NodeProto& n,
                                                              const IVec& in,
                                                              const std::vector<int64_t>& target) {
  if (!exported_) return std::nullopt;
  const int64_t b0 = exported_->batch, b = batch_;
  const bool allowzero = attr_int(n, "allowzero", 0) != 0;
  auto lit = exported_->targets.find(n.input(1));
  if (lit == exported_->targets.end() || lit->second != target) return std::nullopt;
  auto it = exported_->shapes.find(n.input(0));
  if (it == exported_->shapes.end() || it->second.size() != in.size()) return std::nullopt;
  const IVec& in0 = it->second;
  int64_t axis = -1;
  for (int64_t d = 0; d < in.size(); ++d) {
    if (in0[d] == in[d]) continue;
    if (axis >= 0 || in0[d] % b0 != 0 || in[d] != in0[d] / b0 * b) return std::nullopt;
    axis = d;
  }
  if (axis < 0) return std::nullopt;
  // The target at the exported batch, 0 and -1 resolved against the input's exported shape.
  std::vector<int64_t> t = target;
  int64_t known = 1, infer = -1;
  for (size_t j = 0; j < t.size(); ++j) {
    if (t[j] == 0 && !allowzero) {
      if (static_cast<int64_t>(j) >= in0.size()) return std::nullopt;
      t[j] = in0[j];
    }
    if (t[j] == -1 && infer < 0)
      infer = static_cast<int64_t>(j);
    else if (t[j] < 0)
      return std::nullopt;
    else
      known *= t[j];
  }
  if (infer >= 0) {
    if (known == 0 || in0.product() % known != 0) return std::nullopt;
    t[infer] = in0.product() / known;
  }
  // The batch is a factor b0 of the changed dim, at row-major position outer * q for some
  // divisor q of the rest of that dim (q = 1: the outermost factor, as when torch merges the
  // batch and the heads; q > 1: sequence-first layouts). Where the batch sits in the input is
  // known when it was tracked (BatchPlace: q = rest / inner); else every q is tried, outermost
  // first. The first position some target dim j holds whole (its prefix p_j divides the
  // position, p_{j+1} is a multiple of position * b0) is taken, and that dim scaled.
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= in0[d];
  const int64_t rest = in0[axis] / b0;
  int64_t q_first = 1, q_last = rest;
  if (auto known = batch_place_.find(n.input(0));
      known != batch_place_.end() && known->second.axis == axis && rest % known->second.inner == 0)
    q_first = q_last = rest / known->second.inner;
  for (int64_t q = q_first; q <= q_last; ++q) {
    if (rest % q != 0) continue;
    const int64_t pos = outer * q;
    int64_t p = 1;
    for (size_t j = 0; j < t.size(); ++j) {
      int64_t next = p * t[j];
      if (p > 0 && pos % p == 0 && next % (pos * b0) == 0) {
        batch_place_[n.output(0)] = {static_cast<int64_t>(j), next / (pos * b0)};
        t[j] = t[j] / b0 * b;
        return t;
      }
      p = next;
    }
  }
  return std::nullopt;
}

void Importer::place_batch(const onnx::NodeProto& n) {
  if (!exported_ || n.op_type() == "Reshape") return;
  auto shape0 = [&](const std::string& name) -> const IVec* {
    auto it = exported_->shapes.find(name);
    return it == exported_->shapes.end() ? nullptr : &it->second;
  };
  if (n.op_type() == "Transpose" && n.input_size() == 1 && n.output_size() == 1) {
    auto in = batch_place_.find(n.input(0));
    const IVec* s = shape0(n.input(0));
    if (in == batch_place_.end() || !s) return;
    std::vector<int64_t> perm = attr_ints(n, "perm");
    if (perm.empty())
      for (int64_t d = s->size() - 1; d >= 0; --d) perm.push_back(d);
    for (size_t j = 0; j < perm.size(); ++j)
      if (perm[j] == in->second.axis)
        batch_place_[n.output(0)] = {static_cast<int64_t>(j), in->second.inner};
    return;
  }
  for (const auto& o : n.output()) {
    const IVec* so = shape0(o);
    if (!so) continue;
    for (const auto& i : n.input()) {
      auto in = batch_place_.find(i);
      const IVec* si = shape0(i);
      if (in == batch_place_.end() || !si) continue;
      const int64_t a = in->second.axis + (so->size() - si->size());
      if (a >= 0 && a < so->size() && (*so)[a] == (*si)[in->second.axis]) {
        batch_place_[o] = {a, in->second.inner};
        break;
      }
    }
  }
}

void Importer::rebatch_expand(const onnx::NodeProto& n, const IVec& in,
                              std::vector<int64_t>& want) const {
  if (!exported_) return;
  auto it = exported_->targets.find(n.input(1));
  if (it == exported_->targets.end() || it->second != want) return;
  const int64_t lead = static_cast<int64_t>(want.size()) - in.size();
  int64_t hit = -1, hits = 0;
  for (int64_t j = 0; j < static_cast<int64_t>(want.size()); ++j)
    if (want[j] == exported_->batch && (j < lead || in[j - lead] == 1)) {
      hit = j;
      ++hits;
    }
  if (hits == 1) want[hit] = batch_;
}

Result<int64_t> checked_axis(const Importer& im, const onnx::NodeProto& n, int64_t axis,
                             int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank)
    return im.error(n, std::string(what) + " " + std::to_string(axis) +
                           " is out of range for rank " + std::to_string(rank));
  return norm_axis(axis, rank);
}

Status check_perm(const Importer& im, const onnx::NodeProto& n, const std::vector<int64_t>& perm,
                  int64_t rank) {
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  bool ok = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t p : perm) {
    if (!ok || p < 0 || p >= rank || seen[p]) {
      ok = false;
      break;
    }
    seen[p] = true;
  }
  if (!ok)
    return im.error(n, "'perm' is not a permutation of the " + std::to_string(rank) + " dims");
  return {};
}

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

int64_t attr_int(const onnx::NodeProto& n, const std::string& name, int64_t dflt) {
  const auto* a = find_attr(n, name);
  return a ? a->i() : dflt;
}

float attr_float(const onnx::NodeProto& n, const std::string& name, float dflt) {
  const auto* a = find_attr(n, name);
  return a ? a->f() : dflt;
}

std::vector<int64_t> attr_ints(const onnx::NodeProto& n, const std::string& name,
                               std::vector<int64_t> dflt) {
  const auto* a = find_attr(n, name);
  if (!a) return dflt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::string attr_string(const onnx::NodeProto& n, const std::string& name, std::string dflt) {
  const auto* a = find_attr(n, name);
  return a ? a->s() : dflt;
}

std::optional<DType> dtype_from_onnx(int32_t elem_type) {
  switch (elem_type) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::DOUBLE:
      return DType::kF32;
    case onnx::TensorProto::FLOAT16:
      return DType::kF16;
    case onnx::TensorProto::BFLOAT16:
      return DType::kBF16;
    case onnx::TensorProto::INT64:
      return DType::kI64;
    case onnx::TensorProto::INT32:
      return DType::kI32;
    case onnx::TensorProto::BOOL:
      return DType::kBool;
    default:
      return std::nullopt;
  }
}

Result<std::optional<Tensor>> tensor_from_proto(const onnx::TensorProto& t,
                                                const std::string& base_dir,
                                                const std::string& file) {
  auto err = [&](const std::string& m) {
    return Diagnostic(SourceLoc{file, 0, 0}, "tensor '" + t.name() + "': " + m);
  };
  auto dt = dtype_from_onnx(t.data_type());
  int et = t.data_type();
  if (!dt || et == onnx::TensorProto::FLOAT16 || et == onnx::TensorProto::BFLOAT16)
    return err("element type " + std::to_string(et) +
               " is not supported for data (float, double, int64, int32, bool are)");
  std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return err("has a negative dim");
    if (d > 0 && n > kMaxElements / d)
      return err("has more than " + std::to_string(kMaxElements) + " elements");
    n *= d;
  }
  size_t width = et == onnx::TensorProto::FLOAT || et == onnx::TensorProto::INT32 ? 4
                 : et == onnx::TensorProto::BOOL                                  ? 1
                                                                                  : 8;
  std::string external;
  const std::string* raw = nullptr;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    try {
      for (const auto& kv : t.external_data()) {
        if (kv.key() == "location") location = kv.value();
        if (kv.key() == "offset") offset = std::stoll(kv.value());
        if (kv.key() == "length") length = std::stoll(kv.value());
      }
    } catch (const std::exception&) {
      return err("external data offset or length is not a number");
    }
    // As onnx.checker: the location is a path inside the model's directory.
    if (location.empty() || location[0] == '/' || location == ".." ||
        location.rfind("../", 0) == 0 || location.find("/../") != std::string::npos ||
        (location.size() >= 3 && location.compare(location.size() - 3, 3, "/..") == 0))
      return err("external data location '" + location +
                 "' must be a relative path inside the model's directory");
    std::ifstream f(base_dir + "/" + location, std::ios::binary | std::ios::ate);
    if (!f) return std::optional<Tensor>();  // weights missing: shapes still import
    int64_t file_size = static_cast<int64_t>(f.tellg());
    if (offset < 0 || (length >= 0 && length != static_cast<int64_t>(n * width)) ||
        offset > file_size || static_cast<int64_t>(n * width) > file_size - offset)
      return err("external data in '" + location +
                 "' does not match the shape (offset, length or file size)");
    f.seekg(offset);
    external.resize(n * width);
    f.read(external.data(), static_cast<std::streamsize>(external.size()));
    if (f.gcount() != static_cast<std::streamsize>(external.size()))
      return err("external data file '" + location + "' is shorter than the tensor");
    raw = &external;
  } else if (t.has_raw_data()) {
    raw = &t.raw_data();
  }
  if (raw) {
    if (raw->size() != static_cast<size_t>(n) * width)
      return err("raw data holds " + std::to_string(raw->size()) + " bytes, the shape needs " +
                 std::to_string(n * width));
    Tensor out(*dt, IVec(dims));
    const char* p = raw->data();
    for (int64_t i = 0; i < n; ++i, p += width) {
      switch (et) {
        case onnx::TensorProto::FLOAT:
          std::memcpy(&out.f32()[i], p, 4);
          break;
        case onnx::TensorProto::DOUBLE: {
          double v;
          std::memcpy(&v, p, 8);
          out.f32()[i] = saturating_float(v);
          break;
        }
        case onnx::TensorProto::INT32: {
          int32_t v;
          std::memcpy(&v, p, 4);
          out.i64()[i] = v;
          break;
        }
        case onnx::TensorProto::BOOL:
          out.i64()[i] = *p != 0;
          break;
        default:
          std::memcpy(&out.i64()[i], p, 8);
      }
    }
    return std::optional<Tensor>(std::move(out));
  }
  int64_t have = et == onnx::TensorProto::FLOAT    ? t.float_data_size()
                 : et == onnx::TensorProto::DOUBLE ? t.double_data_size()
                 : et == onnx::TensorProto::INT64  ? t.int64_data_size()
                                                   : t.int32_data_size();
  if (have == 0 && n > 0) return std::optional<Tensor>();  // stripped: no data
  if (have != n)
    return err("holds " + std::to_string(have) + " values, the shape needs " + std::to_string(n));
  Tensor out(*dt, IVec(dims));
  for (int64_t i = 0; i < n; ++i) {
    switch (et) {
      case onnx::TensorProto::FLOAT:
        out.f32()[i] = t.float_data(i);
        break;
      case onnx::TensorProto::DOUBLE:
        out.f32()[i] = saturating_float(t.double_data(i));
        break;
      case onnx::TensorProto::INT64:
        out.i64()[i] = t.int64_data(i);
        break;
      default:
        out.i64()[i] = t.int32_data(i);
    }
  }
  return std::optional<Tensor>(std::move(out));
}

}  // namespace heddle::onnx_detail
