#include "Command.h"

namespace heddle::cli {

Command add_show_command(CLI::App& root) {
  auto* app = root.add_subcommand("show", "Summarize a model: ops, tensors, parameters, FLOPs.");
  return {app, [] { return 0; }};
}

}  // namespace heddle::cli
