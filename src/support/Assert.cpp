#include "heddle/support/Assert.h"

#include <cstdio>
#include <cstdlib>

namespace heddle::detail {

void internal_error(const char* file, int line, const char* cond, const std::string& message) {
  std::fprintf(stderr, "internal error: %s:%d: %s failed%s%s\n", file, line, cond,
               message.empty() ? "" : ": ", message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace heddle::detail
