// .npy reading and writing (format: numpy.lib.format, versions 1.0 to 3.0, little-endian hosts).
#include "heddle/frontend/Npy.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "heddle/support/AtomicFile.h"
#include "heddle/support/BoundedRead.h"
#include "heddle/support/Limits.h"
#include "heddle/support/Numeric.h"

namespace heddle {

namespace {

Diagnostic npy_error(const std::string& path, const std::string& msg) {
  return Diagnostic(SourceLoc{path, 0, 0}, "not a usable .npy file: " + msg);
}

// The value text of `'key': value` in the header dict, up to the next top-level comma or brace.
std::optional<std::string> header_field(const std::string& h, const std::string& key) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) return std::nullopt;
  size_t c = h.find(':', k);
  if (c == std::string::npos) return std::nullopt;
  size_t i = c + 1, depth = 0;
  std::string v;
  for (; i < h.size(); ++i) {
    char ch = h[i];
    if (ch == '(') ++depth;
    if (ch == ')' && depth > 0) --depth;
    if (depth == 0 && (ch == ',' || ch == '}')) break;
    v += ch;
  }
  size_t a = v.find_first_not_of(" "), b = v.find_last_not_of(" ");
  if (a == std::string::npos) return std::string();
  return v.substr(a, b - a + 1);
}

}  // namespace

Result<Tensor> parse_npy(const std::string& bytes, const std::string& path) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    return npy_error(path, "field 'magic' is missing (expected \\x93NUMPY)");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t hlen = 0, hstart = 0;
  if (major == 1) {
    hlen = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    hstart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return npy_error(path, "field 'header_len' is truncated");
    for (int i = 0; i < 4; ++i) hlen |= size_t(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    hstart = 12;
  } else {
    return npy_error(path, "field 'version' is " + std::to_string(major) + ".x; 1.0-3.0 supported");
  }
  if (bytes.size() < hstart + hlen) return npy_error(path, "field 'header' is truncated");
  std::string h = bytes.substr(hstart, hlen);
  auto descr = header_field(h, "descr");
  auto fortran = header_field(h, "fortran_order");
  auto shape_text = header_field(h, "shape");
  if (!descr) return npy_error(path, "field 'descr' is missing");
  if (!fortran) return npy_error(path, "field 'fortran_order' is missing");
  if (!shape_text) return npy_error(path, "field 'shape' is missing");
  if (*fortran != "False")
    return npy_error(path,
                     "field 'fortran_order' is True; save a C-order array "
                     "(numpy.ascontiguousarray)");
  std::string d = *descr;
  if (d.size() >= 2 && (d.front() == '\'' || d.front() == '"')) d = d.substr(1, d.size() - 2);
  DType dtype;
  size_t width;
  if (d == "<f4")
    dtype = DType::kF32, width = 4;
  else if (d == "<f8")
    dtype = DType::kF32, width = 8;
  else if (d == "<i8")
    dtype = DType::kI64, width = 8;
  else if (d == "<i4")
    dtype = DType::kI32, width = 4;
  else if (d == "|b1")
    dtype = DType::kBool, width = 1;
  else
    return npy_error(path, "field 'descr' is '" + d +
                               "'; supported: <f4 (float32), <f8, <i8 (int64), <i4, |b1 (bool)");
  std::string s = *shape_text;
  if (s.size() < 2 || s.front() != '(' || s.back() != ')')
    return npy_error(path, "field 'shape' is '" + s + "', expected a tuple");
  std::vector<int64_t> dims;
  std::stringstream ss(s.substr(1, s.size() - 2));
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t a = item.find_first_not_of(" ");
    if (a == std::string::npos) continue;
    try {
      size_t used = 0;
      long long v = std::stoll(item.substr(a), &used);
      if (v < 0 || item.find_first_not_of(" ", a + used) != std::string::npos)
        throw std::invalid_argument("negative or trailing text");
      dims.push_back(v);
    } catch (const std::exception&) {
      return npy_error(path, "field 'shape' has a bad entry '" + item + "'");
    }
  }
  IVec shape(dims);
  // Check the size before allocating: a corrupt shape must not ask for exabytes (or overflow).
  size_t at = hstart + hlen, have = bytes.size() - at, nonzero = 1;
  bool zero = false;
  for (int64_t d : dims) {
    if (d == 0) {
      zero = true;
    } else if (nonzero > (size_t{1} << 60) / static_cast<size_t>(d)) {
      return npy_error(path, "field 'shape' " + shape.to_string() + " has more than 2^60 elements");
    } else {
      nonzero *= static_cast<size_t>(d);
    }
  }
  size_t numel = zero ? 0 : nonzero;  // <= 2^60, so numel * width (width <= 8) cannot overflow
  if (numel * width != have)
    return npy_error(path, "the data holds " + std::to_string(have) + " bytes, but field 'shape' " +
                               shape.to_string() + " needs " + std::to_string(numel * width));
  Tensor t(dtype, shape);
  const char* p = bytes.data() + at;
  for (int64_t i = 0; i < t.numel(); ++i, p += width) {
    if (d == "<f4")
      std::memcpy(&t.f32()[i], p, 4);
    else if (d == "<f8") {
      double v;
      std::memcpy(&v, p, 8);
      t.f32()[i] = saturating_float(v);
    } else if (d == "<i8")
      std::memcpy(&t.i64()[i], p, 8);
    else if (d == "<i4") {
      int32_t v;
      std::memcpy(&v, p, 4);
      t.i64()[i] = v;
    } else
      t.i64()[i] = *p != 0;
  }
  return t;
}

Result<Tensor> read_npy(const std::string& path, int64_t max_bytes) {
  auto bytes = read_file_bounded(path, {.max_bytes = std::min(max_bytes, limits::kMaxNpyBytes),
                                        .what = ".npy file",
                                        .raise_with = ""});
  HEDDLE_TRY(bytes);
  return parse_npy(*bytes, path);
}

Status write_npy(const std::string& path, const Tensor& t) {
  for (int64_t o : t.origin()) HEDDLE_ASSERT(o == 0) << "write_npy of a tile " << t.to_string();
  std::string descr = !t.is_int() ? "<f4" : t.dtype() == DType::kBool ? "|b1" : "<i8";
  std::string shape = "(";
  for (int64_t i = 0; i < t.rank(); ++i)
    shape += std::to_string(t.shape()[i]) + (t.rank() == 1 ? "," : i + 1 < t.rank() ? ", " : "");
  shape += ")";
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  out += h;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (!t.is_int())
      out.append(reinterpret_cast<const char*>(&t.f32()[i]), 4);
    else if (t.dtype() == DType::kBool)
      out += static_cast<char>(t.i64()[i] != 0);
    else
      out.append(reinterpret_cast<const char*>(&t.i64()[i]), 8);
  }
  return write_file_atomic(path, out);  // whole or not at all
}

}  // namespace heddle
