// Contraction builders: einsum with its signature derived from the spec string (output letters
// are parallel dims, the rest reduce(sum)), linear layers, embedding as a one-hot contraction.
#include <map>

#include "OpsUtil.h"
#include "heddle/ops/Ops.h"

namespace heddle {

using namespace ops_detail;

ValueId Ops::einsum(std::string_view spec, ValueId a, ValueId b) {
  if (bad({a})) return kNoValue;
  if (b == kNoValue && failed_) return kNoValue;
  std::string where = "einsum '" + std::string(spec) + "'";
  std::vector<ValueId> vals = {a};
  if (b != kNoValue) vals.push_back(b);
  size_t arrow = spec.find("->");
  if (arrow == std::string_view::npos)
    return error(where, "field 'spec' needs an explicit '->' output");
  std::string_view lhs = spec.substr(0, arrow), rhs = spec.substr(arrow + 2);
  std::vector<std::string> terms;
  size_t start = 0;
  while (true) {
    size_t c = lhs.find(',', start);
    terms.emplace_back(lhs.substr(start, c == std::string_view::npos ? c : c - start));
    if (c == std::string_view::npos) break;
    start = c + 1;
  }
  if (terms.size() != vals.size())
    return error(where, "field 'spec' names " + std::to_string(terms.size()) + " operand(s) but " +
                            std::to_string(vals.size()) + " were given");
  auto check_letters = [&](const std::string& t) -> bool {
    for (size_t i = 0; i < t.size(); ++i) {
      if (!std::isalpha(static_cast<unsigned char>(t[i]))) return false;
      if (t.find(t[i], i + 1) != std::string::npos) return false;
    }
    return true;
  };
  std::string out(rhs);
  for (const auto& t : terms)
    if (!check_letters(t))
      return error(where, "term '" + t + "' must be distinct letters (no repeats, no '...')");
  if (!check_letters(out)) return error(where, "output '" + out + "' must be distinct letters");
  std::map<char, int64_t> extent;
  for (size_t i = 0; i < terms.size(); ++i) {
    const IVec& s = shape(vals[i]);
    if (static_cast<int64_t>(terms[i].size()) != s.size())
      return error(where, "term '" + terms[i] + "' has " + std::to_string(terms[i].size()) +
                              " letters but operand " + std::to_string(i) + " is " +
                              type(vals[i]).to_string());
    for (size_t j = 0; j < terms[i].size(); ++j) {
      char c = terms[i][j];
      auto [it, fresh] = extent.emplace(c, s[j]);
      if (!fresh && it->second != s[j])
        return error(where, "dim '" + std::string(1, c) + "' is " + std::to_string(it->second) +
                                " in one operand but " + std::to_string(s[j]) + " in operand " +
                                std::to_string(i));
    }
  }
  std::string order = out;
  for (char c : out)
    if (!extent.count(c))
      return error(where, "output dim '" + std::string(1, c) + "' appears in no operand");
  for (const auto& t : terms)
    for (char c : t)
      if (order.find(c) == std::string::npos) order += c;
  std::vector<std::string> names;
  std::vector<int64_t> ext;
  std::vector<std::optional<Monoid>> red;
  for (char c : order) {
    names.emplace_back(1, c);
    ext.push_back(extent[c]);
    red.push_back(out.find(c) == std::string::npos ? std::optional<Monoid>(Monoid::kSum)
                                                   : std::nullopt);
  }
  auto proj_of = [&](const std::string& t) {
    std::vector<int64_t> dims;
    for (char c : t) dims.push_back(static_cast<int64_t>(order.find(c)));
    return select_proj(static_cast<int64_t>(order.size()), dims);
  };
  Op op;
  op.kind = OpKind::kEinsum;
  op.attrs = {{"spec", std::string(spec)}};
  op.space = make_space(names, ext, red);
  for (size_t i = 0; i < vals.size(); ++i) op.inputs.push_back({vals[i], proj_of(terms[i]), false});
  op.results = {{-1, proj_of(out), false}};
  std::vector<int64_t> oshape;
  for (char c : out) oshape.push_back(extent[c]);
  return emit1(std::move(op), TensorType(type(a).dtype(), IVec(oshape)));
}

ValueId Ops::linear(ValueId x, ValueId w) {
  if (bad({x, w})) return kNoValue;
  int64_t r = shape(x).size();
  if (r < 1 || r > 20 || shape(w).size() != 2)
    return error("linear", "needs x [..., k] and w [k, n], got " + type(x).to_string() + " and " +
                               type(w).to_string());
  static const std::string kLetters = "abcdefghijlmopqrstuvwxy";  // not k or n
  std::string xs = kLetters.substr(0, static_cast<size_t>(r - 1));
  return einsum(xs + "k,kn->" + xs + "n", x, w);
}

ValueId Ops::embedding(ValueId ids, ValueId table) {
  if (bad({ids, table})) return kNoValue;
  if (dtype_is_float(type(ids).dtype())) return error("embedding", "field 'ids' must be integer");
  if (shape(table).size() != 2)
    return error("embedding",
                 "field 'table' must be [vocab, hidden], got " + type(table).to_string());
  int64_t r = shape(ids).size();
  std::vector<std::string> names = dim_names(r, "i");
  std::vector<int64_t> ext(shape(ids).values());
  std::vector<std::optional<Monoid>> red(static_cast<size_t>(r), std::nullopt);
  names.push_back("v");
  ext.push_back(shape(table)[0]);
  red.push_back(Monoid::kSum);
  names.push_back("h");
  ext.push_back(shape(table)[1]);
  red.push_back(std::nullopt);
  std::vector<int64_t> id_dims, out_dims;
  for (int64_t i = 0; i < r; ++i) id_dims.push_back(i);
  out_dims = id_dims;
  out_dims.push_back(r + 1);
  Op op;
  op.kind = OpKind::kEmbedding;
  op.space = make_space(names, ext, red);
  op.inputs = {{ids, select_proj(r + 2, id_dims), false},
               {table, select_proj(r + 2, {r, r + 1}), false}};
  op.results = {{-1, select_proj(r + 2, out_dims), false}};
  std::vector<int64_t> oshape(shape(ids).values());
  oshape.push_back(shape(table)[1]);
  return emit1(std::move(op), TensorType(type(table).dtype(), IVec(oshape)));
}

}  // namespace heddle
