// A run's arguments checked and turned into the driver's request (heddle/driver/RunArguments.h).
#include "heddle/driver/RunArguments.h"

#include <fmt/format.h>

#include <filesystem>

#include "heddle/runtime/HostMemory.h"
#include "heddle/runtime/RunInputs.h"
#include "heddle/support/AtomicFile.h"
#include "heddle/support/ByteSize.h"
#include "heddle/support/Limits.h"

namespace heddle::driver {

namespace {

// --checkpoint, --checkpoint-every and --resume before any work.
Status check_checkpoint_arguments(const RunArguments& a) {
  if (!a.train && (!a.checkpoint_dir.empty() || !a.resume_dir.empty()))
    return Diagnostic(
        "--checkpoint and --resume save and restore training state: add --train (a forward run "
        "has none)");
  if (a.checkpoint_every != -1 && a.checkpoint_dir.empty())
    return Diagnostic("--checkpoint-every needs --checkpoint DIR (where to write)");
  if (a.checkpoint_every != -1 && a.checkpoint_every < 1)
    return Diagnostic("--checkpoint-every must be >= 1, got " + std::to_string(a.checkpoint_every));
  if (!a.checkpoint_dir.empty()) HEDDLE_TRY(check_writable_dir(a.checkpoint_dir, "--checkpoint"));
  return {};
}

// The host memory a run may use: --host-memory, else the physical memory (0: unknown).
Result<int64_t> host_memory_limit(const RunArguments& a) {
  if (a.host_memory.empty()) return physical_memory_bytes();
  auto b = parse_bytes(a.host_memory, "--host-memory");
  HEDDLE_TRY(b);
  return static_cast<int64_t>(*b);
}

}  // namespace

Status check_run_arguments(const RunArguments& a) {
  if (a.steps != -1 && a.steps < 1) return Diagnostic("--steps must be >= 1");
  if (a.optimizer != "adamw" && a.optimizer != "sgd")
    return Diagnostic("--optimizer must be adamw or sgd, got '" + a.optimizer + "'");
  if (!(a.rtol >= 0) || !(a.atol >= 0)) return Diagnostic("--rtol and --atol must be >= 0");
  if (a.train && !a.output_file.empty())
    return Diagnostic(
        "--output writes the single output of a forward run; a --train run's outputs are the loss "
        "and every updated parameter. Drop --output, or --train");
  // Device bounds before planning: a thread or a process per device.
  if (auto mesh = Mesh::parse(a.mesh); mesh.ok()) {
    const bool mpi = a.backend == "mpi";
    const int64_t cap = mpi ? limits::kMaxMpiRanks : limits::kMaxThreadDevices;
    if (mesh->num_devices() > cap)
      return Diagnostic(
          fmt::format("--mesh {} has {} devices, more than the {} the {} backend runs ({})", a.mesh,
                      mesh->num_devices(), cap, mpi ? "mpi" : "threads",
                      mpi ? "one process each" : "one thread and one arena each on this machine"));
  }
  // Output locations before any work: a long run must not end in "cannot write".
  if (!a.output_file.empty()) HEDDLE_TRY(check_writable_file(a.output_file, "--output"));
  if (!a.emit_dir.empty()) HEDDLE_TRY(check_writable_dir(a.emit_dir, "--emit"));
  HEDDLE_TRY(check_checkpoint_arguments(a));
  if (a.backend == "mpi" && !(a.timeout_s > 0))
    return Diagnostic("--timeout must be a positive number of seconds");
  return {};
}

model::ModelRequest model_request(const RunArguments& a) {
  model::ModelRequest r;
  r.source = a.model;
  r.overrides = a.overrides;
  r.options.with_loss = a.train;
  r.dims = a.dims;
  r.loss = a.loss;
  return r;
}

RunRequest run_request(const RunArguments& a) {
  return {.model = model_request(a),
          .mesh = a.mesh,
          .strategy = a.strategy,
          .backend = a.backend,
          .train = a.train,
          .check = a.check,
          .steps = a.steps,
          .optimizer = optimizer_options(a.optimizer, a.lr),
          .seed = a.seed,
          .rtol = a.rtol,
          .atol = a.atol,
          .emit_dir = a.emit_dir,
          .checkpoint_dir = a.checkpoint_dir,
          .checkpoint_every = a.checkpoint_every == -1 ? 1 : a.checkpoint_every,
          .resume_dir = a.resume_dir,
          .tactics = a.tactics,
          .overlap_ring = !a.no_ring_overlap,
          .profile = a.profile};
}

Result<model::LoadedModel> load_runnable(const RunArguments& a) {
  return model::load_model_to_run(model_request(a));
}

std::vector<std::string> input_paths(const RunArguments& a) {
  std::vector<std::string> paths = a.input_files;
  if (!a.labels_file.empty()) paths.push_back(a.labels_file);
  return paths;
}

Status check_run_fits(const RunArguments& a, const Graph& g, const Session& session) {
  if (!a.output_file.empty() && g.outputs().size() != 1)
    return Diagnostic("--output takes one file, but the model has " +
                      std::to_string(g.outputs().size()) + " outputs");
  HostMemoryNeed need{.feeds = model_feed_bytes(g), .reference = a.check ? reference_bytes(g) : 0};
  for (int64_t p : session.peak_bytes_per_device()) need.devices += p;
  auto limit = host_memory_limit(a);
  HEDDLE_TRY(limit);
  return check_host_memory(need, *limit, !a.host_memory.empty());
}

std::string launch_arguments(const RunArguments& a) {
  std::error_code ec;
  const bool model_is_file = std::filesystem::is_regular_file(a.model, ec);
  std::string s = fmt::format(
      "model={} mesh={} strategy={} train={} steps={} lr={} optimizer={} seed={} check={} rtol={} "
      "atol={} inputs={} output={} emit={}",
      model_is_file ? "<file>" : a.model, a.mesh, a.strategy, a.train, steps_of(run_request(a)),
      a.lr, a.optimizer, a.seed, a.check, a.rtol, a.atol, a.input_files.size(),
      !a.output_file.empty(), !a.emit_dir.empty());
  s += fmt::format(" layers={} hidden={} heads={} seq={} vocab={} batch={}",
                   a.overrides.layers.value_or(-1), a.overrides.hidden.value_or(-1),
                   a.overrides.heads.value_or(-1), a.overrides.seq.value_or(-1),
                   a.overrides.vocab.value_or(-1), a.overrides.batch.value_or(-1));
  for (const auto& [k, v] : a.dims) s += fmt::format(" dim.{}={}", k, v);
  return s;
}

}  // namespace heddle::driver
