// How the text format writes a string (names that are not plain identifiers, string attributes),
// so that any bytes, newlines included, survive printing and parsing.
#pragma once

#include <string>

namespace heddle {

/// `s` in double quotes: `"` and `\` escaped, newline, tab and carriage return as \n \t \r, other
/// control bytes as \xHH; the text parser reads each escape back to its byte.
std::string quote_string(const std::string& s);

}  // namespace heddle
