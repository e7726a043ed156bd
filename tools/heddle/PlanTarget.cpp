#include "PlanTarget.h"

namespace heddle::cli {

void add_target_flags(CLI::App* app, exporting::TargetFlags& flags) {
  app->add_option("--target", flags.target,
                  "Only plans this stack can run: megatron, torchtitan, deepspeed, heddle or any "
                  "(default: the --export format, else any)");
  app->add_option("--export", flags.export_format,
                  "Print the plan as megatron arguments, a torchtitan TOML or a deepspeed JSON "
                  "(also written to --out DIR)");
  app->add_option("--memory-reserve", flags.memory_reserve,
                  "Memory per device left free for the CUDA context, NCCL buffers and "
                  "fragmentation (default: 5% of it, at least 2GiB, at most a quarter; 0: none)");
}

}  // namespace heddle::cli
