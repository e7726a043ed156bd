// The text format's string quoting.
#include "heddle/ir/TextQuote.h"

namespace heddle {

std::string quote_string(const std::string& s) {
  std::string out = "\"";
  // Escapes keep one line per statement: names from other formats (ONNX) may hold any byte.
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace heddle
