#include "heddle/ir/TextParser.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "heddle/support/BoundedRead.h"
#include "heddle/support/Limits.h"
#include "heddle/support/Strings.h"

namespace heddle {

namespace {

// Literals beyond this magnitude are rejected so that shape and projection arithmetic cannot
// overflow 64 bits (the verifier still checks products).
constexpr int64_t kMaxLiteral = (int64_t{1} << 40);
constexpr int64_t kMaxRank = 16;

enum class Tok { kEnd, kIdent, kInt, kFloat, kString, kPercent, kPunct, kArrow };

struct Token {
  Tok kind = Tok::kEnd;
  std::string text;  // identifier, literal text, string contents, or punctuation
  int line = 1, col = 1;
};

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::kEnd:
      return "end of file";
    case Tok::kString:
      return "string \"" + t.text + "\"";
    default:
      return "'" + t.text + "'";
  }
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  // Produces the next token, or an error diagnostic message (position in `err_tok`).
  bool next(Token& t, std::string& err) {
    skip_space();
    t = Token{};
    t.line = line_;
    t.col = col_;
    if (pos_ >= src_.size()) return true;
    char c = src_[pos_];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t b = pos_;
      while (pos_ < src_.size() && is_ident_char(src_[pos_])) advance();
      t.kind = Tok::kIdent;
      t.text = std::string(src_.substr(b, pos_ - b));
      return true;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) return number(t, err);
    if (c == '"') return string(t, err);
    if (c == '%') {
      advance();
      t.kind = Tok::kPercent;
      t.text = "%";
      return true;
    }
    if (c == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] == '>') {
      advance();
      advance();
      t.kind = Tok::kArrow;
      t.text = "->";
      return true;
    }
    if (std::string_view("{}[](),:=+-*").find(c) != std::string_view::npos) {
      advance();
      t.kind = Tok::kPunct;
      t.text = std::string(1, c);
      return true;
    }
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isprint(u))
      err = std::string("unexpected character '") + c + "'";
    else
      err = "unexpected byte 0x" + std::string(1, "0123456789abcdef"[u >> 4]) +
            std::string(1, "0123456789abcdef"[u & 15]);
    return false;
  }

 private:
  static bool is_ident_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  }
  void advance() {
    if (src_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  void skip_space() {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == '#') {
        while (pos_ < src_.size() && src_[pos_] != '\n') advance();
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else {
        break;
      }
    }
  }
  bool number(Token& t, std::string& err) {
    size_t b = pos_;
    bool is_float = false;
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        advance();
      } else if (c == '.' || c == 'e' || c == 'E') {
        is_float = true;
        advance();
        if ((c == 'e' || c == 'E') && pos_ < src_.size() &&
            (src_[pos_] == '-' || src_[pos_] == '+'))
          advance();
      } else {
        break;
      }
    }
    t.kind = is_float ? Tok::kFloat : Tok::kInt;
    t.text = std::string(src_.substr(b, pos_ - b));
    if (pos_ < src_.size() && std::isalpha(static_cast<unsigned char>(src_[pos_]))) {
      err = "malformed number '" + t.text + src_[pos_] + "'";
      return false;
    }
    return true;
  }
  bool string(Token& t, std::string& err) {
    advance();  // opening quote
    std::string s;
    while (pos_ < src_.size() && src_[pos_] != '"') {
      if (src_[pos_] == '\n') {
        err = "unterminated string";
        return false;
      }
      if (src_[pos_] == '\\') {  // \n \t \r \xHH; any other escaped byte stands for itself
        advance();
        if (pos_ >= src_.size()) break;
        char e = src_[pos_];
        auto hex = [&](size_t at) {
          char h = at < src_.size() ? src_[at] : 0;
          return h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : -1;
        };
        if (e == 'n' || e == 't' || e == 'r') {
          s += e == 'n' ? '\n' : e == 't' ? '\t' : '\r';
          advance();
          continue;
        }
        if (e == 'x' && hex(pos_ + 1) >= 0 && hex(pos_ + 2) >= 0) {
          s += static_cast<char>(hex(pos_ + 1) * 16 + hex(pos_ + 2));
          for (int k = 0; k < 3; ++k) advance();
          continue;
        }
      }
      s += src_[pos_];
      advance();
    }
    if (pos_ >= src_.size()) {
      err = "unterminated string";
      return false;
    }
    advance();  // closing quote
    t.kind = Tok::kString;
    t.text = std::move(s);
    return true;
  }

  std::string_view src_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

// Thrown inside the parser only, caught at its entry points and turned into a Diagnostic; it never
// escapes this file.
struct ParseError {
  Diagnostic diag;
};

class Parser {
 public:
  Parser(std::string_view src, std::string file) : lex_(src), file_(std::move(file)) { bump(); }

  Graph graph() {
    expect_keyword("graph");
    Graph g(name_token("graph name"));
    g.set_source_file(file_);
    expect("{");
    while (!is("}")) {
      if (tok_.kind == Tok::kEnd) fail(tok_, "expected '}' to close the graph, found end of file");
      statement(g);
    }
    bump();
    if (tok_.kind != Tok::kEnd) fail(tok_, "unexpected " + describe(tok_) + " after the graph");
    return g;
  }

  IndexSpace space_only() {
    IndexSpace sp = index_space();
    if (tok_.kind != Tok::kEnd) fail(tok_, "unexpected " + describe(tok_) + " after index space");
    return sp;
  }

  IndexProjection projection_only(const std::vector<std::string>& names) {
    bool padded = false;
    IndexProjection p = projection(names, &padded);
    if (tok_.kind != Tok::kEnd) fail(tok_, "unexpected " + describe(tok_) + " after projection");
    return p;
  }

 private:
  [[noreturn]] void fail(const Token& at, const std::string& msg) {
    throw ParseError{Diagnostic(SourceLoc{file_, at.line, at.col}, msg)};
  }
  void bump() {
    std::string err;
    Token t;
    if (!lex_.next(t, err)) fail(t, err);
    tok_ = std::move(t);
  }
  bool is(std::string_view punct) const {
    return (tok_.kind == Tok::kPunct || tok_.kind == Tok::kArrow) && tok_.text == punct;
  }
  void expect(std::string_view punct) {
    if (!is(punct)) fail(tok_, "expected '" + std::string(punct) + "' but found " + describe(tok_));
    bump();
  }
  void expect_keyword(std::string_view kw) {
    if (tok_.kind != Tok::kIdent || tok_.text != kw)
      fail(tok_, "expected '" + std::string(kw) + "' but found " + describe(tok_));
    bump();
  }
  std::string name_token(const std::string& what) {
    if (tok_.kind != Tok::kIdent && tok_.kind != Tok::kString)
      fail(tok_, "expected " + what + " but found " + describe(tok_));
    if (tok_.text.empty()) fail(tok_, what + " must not be empty");
    std::string s = tok_.text;
    bump();
    return s;
  }
  std::string value_name() {
    if (tok_.kind != Tok::kPercent)
      fail(tok_, "expected a value name like %x but found " + describe(tok_));
    bump();
    return name_token("a value name after '%'");
  }
  int64_t integer(const std::string& what) {
    bool neg = false;
    Token at = tok_;
    if (is("-")) {
      neg = true;
      bump();
    }
    if (tok_.kind != Tok::kInt) fail(at, "expected " + what + " but found " + describe(tok_));
    auto v = parse_int(tok_.text);
    if (!v || *v > kMaxLiteral)
      fail(tok_,
           what + " " + tok_.text + " is too large (limit " + std::to_string(kMaxLiteral) + ")");
    bump();
    return neg ? -*v : *v;
  }
  std::vector<int64_t> int_list(const std::string& what, bool nonnegative) {
    std::vector<int64_t> xs;
    expect("[");
    while (!is("]")) {
      if (!xs.empty()) expect(",");
      Token at = tok_;
      int64_t v = integer(what);
      if (nonnegative && v < 0) fail(at, what + " must not be negative, got " + std::to_string(v));
      xs.push_back(v);
      if (static_cast<int64_t>(xs.size()) > kMaxRank)
        fail(at, "more than " + std::to_string(kMaxRank) + " dims");
    }
    bump();
    return xs;
  }
  TensorType tensor_type() {
    Token at = tok_;
    if (tok_.kind != Tok::kIdent)
      fail(tok_, "expected a tensor type like f32[2, 3] but found " + describe(tok_));
    auto dt = parse_dtype(tok_.text);
    if (!dt)
      fail(tok_, "unknown element type '" + tok_.text + "'; known: f32, f16, bf16, i32, i64, bool");
    bump();
    if (!is("["))
      fail(tok_, "expected '[' and the shape after the element type, found " + describe(tok_));
    return TensorType(*dt, IVec(int_list("tensor dim", true)));
  }

  void statement(Graph& g) {
    Token at = tok_;
    if (tok_.kind == Tok::kIdent && (tok_.text == "input" || tok_.text == "param")) {
      bool input = tok_.text == "input";
      bump();
      Token name_at = tok_;
      std::string name = value_name();
      expect(":");
      TensorType t = tensor_type();
      ShardAnnotation a = tactic(false, t.rank(), {});
      define(name, name_at);
      ValueId id = input ? g.add_input(name, t) : g.add_param(name, t);
      if (!a.empty()) g.set_tactic(id, std::move(a));
      return;
    }
    if (tok_.kind == Tok::kIdent && tok_.text == "output") {
      bump();
      do {
        if (is(",")) bump();
        Token name_at = tok_;
        g.add_output(use(g, value_name(), name_at));
      } while (is(","));
      return;
    }
    if (tok_.kind != Tok::kPercent)
      fail(at,
           "expected 'input', 'param', 'output' or an op definition '%name: type = ...' but "
           "found " +
               describe(tok_));
    op_statement(g);
  }

  void op_statement(Graph& g) {
    std::vector<std::string> names;
    std::vector<TensorType> types;
    std::vector<Token> name_tokens;
    std::vector<ShardAnnotation> tactics;
    do {
      if (is(",")) bump();
      name_tokens.push_back(tok_);
      names.push_back(value_name());
      expect(":");
      types.push_back(tensor_type());
      tactics.push_back(tactic(false, types.back().rank(), {}));
    } while (is(","));
    expect("=");
    Token kind_at = tok_;
    if (tok_.kind != Tok::kIdent) fail(tok_, "expected an op name but found " + describe(tok_));
    auto kind = parse_op_kind(tok_.text);
    if (!kind) {
      std::vector<std::string> known;
      for (const auto& k : all_op_kinds()) known.emplace_back(k.name);
      fail(tok_, "unknown op '" + tok_.text + "'; known ops: " + join(known, ", "));
    }
    bump();
    Op op;
    op.kind = *kind;
    op.line = kind_at.line;
    op.col = kind_at.col;
    if (is("{")) op.attrs = attributes(*kind);
    op.space = index_space();
    std::vector<std::string> dims = op.space.names();
    if (tok_.kind == Tok::kPercent) {
      do {
        if (is(",")) bump();
        Token vat = tok_;
        Operand in;
        in.value = use(g, value_name(), vat);
        in.proj = projection(dims, &in.padded);
        op.inputs.push_back(std::move(in));
      } while (is(","));
    }
    expect("->");
    do {
      if (is(",")) bump();
      Operand out;
      Token pat = tok_;
      out.proj = projection(dims, &out.padded);
      if (out.padded) fail(pat, "'padded' applies to inputs only, not results");
      op.results.push_back(std::move(out));
    } while (is(","));
    op.tactic = tactic(true, op.space.rank(), dims);
    if (op.results.size() != names.size())
      fail(kind_at, "op '" + std::string(op_kind_name(*kind)) + "' defines " +
                        std::to_string(names.size()) + " result(s) but gives " +
                        std::to_string(op.results.size()) + " result projection(s)");
    for (size_t i = 0; i < names.size(); ++i) define(names[i], name_tokens[i]);
    std::vector<ValueId> ids = g.add_op(std::move(op), names, types);
    for (size_t i = 0; i < ids.size(); ++i)
      if (!tactics[i].empty()) g.set_tactic(ids[i], std::move(tactics[i]));
  }

  // An optional tactic: ` replicate`, a value's ` shard{1=tp, 0=dp}` (tensor dims below `rank`)
  // or an op's ` split{n=tp}` (index dims `dims`). None: an empty annotation.
  ShardAnnotation tactic(bool op, int64_t rank, const std::vector<std::string>& dims) {
    ShardAnnotation a;
    if (tok_.kind != Tok::kIdent) return a;
    const std::string kw = op ? "split" : "shard", other = op ? "shard" : "split";
    if (tok_.text == other)
      fail(tok_, op ? "an op's tactic is 'split{index_dim=axis}'; 'shard{dim=axis}' annotates a "
                      "value (after its type)"
                    : "a value's tactic is 'shard{tensor_dim=axis}'; 'split{index_dim=axis}' "
                      "annotates an op (after its result projections)");
    if (tok_.text != "replicate" && tok_.text != kw) return a;
    a.line = tok_.line;
    if (tok_.text == "replicate") {
      a.replicate = true;
      bump();
      return a;
    }
    bump();
    if (!is("{")) fail(tok_, "expected '{' after '" + kw + "' but found " + describe(tok_));
    bump();
    while (!is("}")) {
      if (!a.pins.empty()) expect(",");
      Token at = tok_;
      AxisPin p;
      if (op) {
        if (tok_.kind != Tok::kIdent)
          fail(tok_, "expected an index dim name in split{...} but found " + describe(tok_));
        size_t i = 0;
        while (i < dims.size() && dims[i] != tok_.text) ++i;
        if (i == dims.size())
          fail(tok_,
               "'" + tok_.text + "' is not a dim of the index space [" + join(dims, ", ") + "]");
        p.dim = static_cast<int64_t>(i);
        bump();
      } else {
        p.dim = integer("tensor dim");
        if (p.dim < 0 || p.dim >= rank)
          fail(at, "tensor dim " + std::to_string(p.dim) + " in shard{...} is outside the " +
                       std::to_string(rank) + " dims of the value");
      }
      expect("=");
      Token axis_at = tok_;
      p.axis = name_token("a mesh axis name");
      for (const AxisPin& q : a.pins)
        if (q.axis == p.axis)
          fail(axis_at, "mesh axis '" + p.axis + "' is pinned twice in one " + kw + "{...}");
      a.pins.push_back(std::move(p));
      if (static_cast<int64_t>(a.pins.size()) > kMaxRank)
        fail(at, "more than " + std::to_string(kMaxRank) + " pinned axes");
    }
    if (a.pins.empty())
      fail(tok_, "empty " + kw + "{}: name at least one dim=axis, or write 'replicate'");
    bump();
    return a;
  }

  Attrs attributes(OpKind kind) {
    const OpKindInfo& info = op_kind_info(kind);
    Attrs attrs;
    bump();  // '{'
    while (!is("}")) {
      if (!attrs.empty()) expect(",");
      if (tok_.kind != Tok::kIdent)
        fail(tok_, "expected an attribute name but found " + describe(tok_));
      std::string name = tok_.text;
      const AttrSpec* spec = info.find_attr(name);
      if (!spec) {
        std::vector<std::string> ok;
        for (const auto& a : info.attrs) ok.push_back(a.name);
        fail(tok_,
             "op '" + std::string(info.name) + "' has no attribute '" + name + "'" +
                 (ok.empty() ? "; it takes no attributes" : "; it accepts: " + join(ok, ", ")));
      }
      if (attrs.count(name)) fail(tok_, "attribute '" + name + "' is given twice");
      bump();
      expect("=");
      Token vat = tok_;
      AttrValue v = attr_value();
      if (spec->type == AttrType::kFloat && attr_type(v) == AttrType::kInt)
        v = static_cast<double>(std::get<int64_t>(v));
      if (attr_type(v) != spec->type)
        fail(vat, "attribute '" + name + "' of '" + std::string(info.name) + "' must be " +
                      (spec->type == AttrType::kInt ? "an " : "a ") + attr_type_name(spec->type) +
                      ", got " + attr_to_string(v));
      attrs.emplace(name, std::move(v));
    }
    bump();
    return attrs;
  }

  AttrValue attr_value() {
    if (tok_.kind == Tok::kString) {
      std::string s = tok_.text;
      bump();
      return s;
    }
    if (is("[")) return int_list("list element", false);
    bool neg = false;
    if (is("-")) {
      neg = true;
      bump();
    }
    if (tok_.kind == Tok::kFloat ||
        (tok_.kind == Tok::kIdent && (tok_.text == "inf" || tok_.text == "nan"))) {
      std::string text = tok_.text;
      size_t used = 0;
      double d = 0;
      try {
        d = std::stod(text, &used);
      } catch (...) {
        used = 0;
      }
      if (used != text.size()) fail(tok_, "malformed number '" + text + "'");
      bump();
      return neg ? -d : d;
    }
    if (tok_.kind == Tok::kInt) {
      auto v = parse_int(tok_.text);
      if (!v) fail(tok_, "integer " + tok_.text + " is too large");
      bump();
      return neg ? -*v : *v;
    }
    fail(tok_,
         "expected an attribute value (number, string or [list]) but found " + describe(tok_));
  }

  IndexSpace index_space() {
    if (!is("["))
      fail(tok_, "expected the index space '[dim=extent, ...]' but found " + describe(tok_));
    bump();
    std::vector<IndexDim> dims;
    while (!is("]")) {
      if (!dims.empty()) expect(",");
      if (tok_.kind != Tok::kIdent)
        fail(tok_, "expected an index dim name but found " + describe(tok_));
      IndexDim d;
      d.name = tok_.text;
      for (const auto& o : dims)
        if (o.name == d.name) fail(tok_, "index dim '" + d.name + "' is declared twice");
      bump();
      expect("=");
      Token at = tok_;
      d.extent = integer("index extent");
      if (d.extent < 0) fail(at, "index extent of '" + d.name + "' must not be negative");
      if (is(":")) {
        bump();
        if (tok_.kind != Tok::kIdent || !parse_monoid(tok_.text))
          fail(tok_, "expected a reduction 'sum', 'max' or 'min' but found " + describe(tok_));
        d.reduce = parse_monoid(tok_.text);
        bump();
      }
      dims.push_back(std::move(d));
      if (static_cast<int64_t>(dims.size()) > kMaxRank)
        fail(at, "index space has more than " + std::to_string(kMaxRank) + " dims");
    }
    bump();
    return IndexSpace(std::move(dims));
  }

  // (expr, expr, ...)[window] padded?
  IndexProjection projection(const std::vector<std::string>& names, bool* padded) {
    expect("(");
    int64_t in = static_cast<int64_t>(names.size());
    std::vector<int64_t> matrix;
    std::vector<int64_t> offset;
    while (!is(")")) {
      if (!offset.empty()) expect(",");
      std::vector<int64_t> row(static_cast<size_t>(in), 0);
      offset.push_back(affine_expr(names, row));
      matrix.insert(matrix.end(), row.begin(), row.end());
      if (static_cast<int64_t>(offset.size()) > kMaxRank)
        fail(tok_, "projection has more than " + std::to_string(kMaxRank) + " dims");
    }
    bump();
    IVec window = IVec::ones(static_cast<int64_t>(offset.size()));
    if (is("[")) {
      Token at = tok_;
      std::vector<int64_t> w = int_list("window extent", true);
      if (w.size() != offset.size())
        fail(at, "window has " + std::to_string(w.size()) + " dims but the projection has " +
                     std::to_string(offset.size()));
      window = IVec(std::move(w));
    }
    *padded = false;
    if (tok_.kind == Tok::kIdent && tok_.text == "padded") {
      *padded = true;
      bump();
    }
    return IndexProjection(AffineMap(in, std::move(matrix), IVec(std::move(offset))), window);
  }

  // Sum of terms `c`, `d`, `c*d`, `d*c` with + and -; returns the constant, adds to `row`.
  int64_t affine_expr(const std::vector<std::string>& names, std::vector<int64_t>& row) {
    int64_t constant = 0;
    int sign = 1;
    if (is("-")) {
      sign = -1;
      bump();
    }
    while (true) {
      int64_t coef = 1;
      std::string dim;
      Token at = tok_;
      if (tok_.kind == Tok::kInt) {
        coef = integer("coefficient");
        if (is("*")) {
          bump();
          if (tok_.kind != Tok::kIdent)
            fail(tok_, "expected an index dim after '*' but found " + describe(tok_));
          dim = tok_.text;
          bump();
        }
      } else if (tok_.kind == Tok::kIdent) {
        dim = tok_.text;
        bump();
        if (is("*")) {
          bump();
          coef = integer("coefficient");
        }
      } else {
        fail(tok_, "expected an affine expression of index dims but found " + describe(tok_));
      }
      if (dim.empty()) {
        constant += sign * coef;
      } else {
        size_t i = 0;
        while (i < names.size() && names[i] != dim) ++i;
        if (i == names.size())
          fail(at, "'" + dim + "' is not a dim of the index space [" + join(names, ", ") + "]");
        row[i] += sign * coef;
      }
      if (std::abs(constant) > kMaxLiteral || (i_abs(row) > kMaxLiteral))
        fail(at, "affine coefficients are too large");
      if (is("+")) {
        sign = 1;
      } else if (is("-")) {
        sign = -1;
      } else {
        return constant;
      }
      bump();
    }
  }
  static int64_t i_abs(const std::vector<int64_t>& row) {
    int64_t m = 0;
    for (int64_t x : row) m = std::max(m, x < 0 ? -x : x);
    return m;
  }

  void define(const std::string& name, const Token& at) {
    auto [it, inserted] = defined_.emplace(name, at.line);
    if (!inserted)
      fail(at, "value " + value_ref_text(name) + " is already defined at line " +
                   std::to_string(it->second));
  }
  ValueId use(const Graph& g, const std::string& name, const Token& at) {
    auto id = g.find_value(name);
    if (!id) fail(at, "use of undefined value " + value_ref_text(name));
    return *id;
  }
  static std::string value_ref_text(const std::string& name) { return "'%" + name + "'"; }

  Lexer lex_;
  std::string file_;
  Token tok_;
  std::unordered_map<std::string, int> defined_;
};

}  // namespace

Result<Graph> parse_graph(std::string_view text, const std::string& file) {
  try {
    Parser p(text, file);
    return p.graph();
  } catch (const ParseError& e) {
    return e.diag;
  }
}

Result<Graph> parse_graph_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return Diagnostic(SourceLoc{path, 0, 0}, "is a directory, not a graph file");
  auto text = read_file_bounded(
      path, {.max_bytes = limits::kMaxTextIrBytes, .what = "text-IR file", .raise_with = ""});
  HEDDLE_TRY(text);
  return parse_graph(*text, path);
}

Result<IndexProjection> parse_projection(std::string_view text,
                                         const std::vector<std::string>& names) {
  try {
    Parser p(text, "<projection>");
    return p.projection_only(names);
  } catch (const ParseError& e) {
    return e.diag;
  }
}

}  // namespace heddle

namespace heddle {

Result<IndexSpace> parse_index_space(std::string_view text) {
  try {
    Parser p(text, "<index space>");
    return p.space_only();
  } catch (const ParseError& e) {
    return e.diag;
  }
}

}  // namespace heddle
