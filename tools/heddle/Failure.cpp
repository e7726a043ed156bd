// How the CLI reports a failure: the diagnostic on stderr (a log record with the rank's prefix
// under MPI, a JSON line with --json) and the exit code of its class; the verifier's report.
#include <cstdio>

#include "Command.h"
#include "heddle/ir/Verifier.h"
#include "heddle/support/ExitCode.h"
#include "heddle/support/Log.h"

namespace heddle::cli {

int user_error(const Diagnostic& d) { return report_failure(d, FailureKind::kUser); }

int report_failure(const Diagnostic& d, FailureKind kind) {
  const int code = to_int(exit_code_of(kind));
  const LogConfig c = logging_config();
  if (c.json || c.rank >= 0 || c.timestamps)
    log_failure(d, code);
  else
    std::fprintf(stderr, "%s\n", d.to_string().c_str());
  return code;
}

int report_verify(const Graph& g) {
  auto diags = verify(g);
  const size_t kMax = 20;
  for (size_t i = 0; i < diags.size() && i < kMax; ++i)
    std::fprintf(stderr, "%s\n", diags[i].to_string().c_str());
  if (diags.size() > kMax) std::fprintf(stderr, "... and %zu more errors\n", diags.size() - kMax);
  return diags.empty() ? 0 : 1;
}

void report_note(LogLevel level, std::string_view event, const std::string& text) {
  if (logging_config().json)
    log(level, event, text);
  else
    std::fprintf(stderr, "%s\n", text.c_str());
}

}  // namespace heddle::cli
