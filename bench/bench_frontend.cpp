// ONNX import benchmark: import time and peak memory for a ResNet-50-sized model (25.6M
// parameters, ~102 MB), generated here with the protobuf API and random weights (torchvision's
// topology: 7x7 stem, max pool, bottleneck stages 3-4-6-3, global pool, classifier; Conv +
// BatchNormalization + Relu as torch exports it with training=PRESERVE). Baseline: parsing the
// same file into an onnx::ModelProto alone, which any ONNX consumer must do.
//
// Each measurement runs in a fresh child process (this binary re-executed) so that peak RSS
// (getrusage ru_maxrss) covers exactly one import. Prints a markdown table.
//
// Usage: bench_frontend [--runs N] [--keep FILE]   (defaults: 3 runs, model in /tmp)
#include <fmt/format.h>
#include <onnx/onnx_pb.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "heddle/frontend/OnnxImport.h"

namespace {

using Clock = std::chrono::steady_clock;

class ResNetWriter {
 public:
  explicit ResNetWriter(onnx::GraphProto& g) : g_(g) {}

  std::string conv_bn(const std::string& x, int64_t cin, int64_t cout, int64_t k, int64_t stride,
                      bool relu) {
    std::string id = std::to_string(n_++);
    std::string w = weight("conv" + id + ".weight", {cout, cin, k, k});
    auto* c = node("Conv", {x, w}, "conv" + id);
    ints(c, "kernel_shape", {k, k});
    ints(c, "strides", {stride, stride});
    int64_t p = k / 2;
    ints(c, "pads", {p, p, p, p});
    std::vector<std::string> bn_in = {c->output(0)};
    for (const char* s : {"weight", "bias", "running_mean", "running_var"})
      bn_in.push_back(weight("bn" + id + "." + s, {cout}, std::string(s) == "running_var"));
    std::string y = node("BatchNormalization", bn_in, "bn" + id)->output(0);
    return relu ? node("Relu", {y}, "relu" + id)->output(0) : y;
  }

  std::string bottleneck(const std::string& x, int64_t cin, int64_t width, int64_t stride) {
    int64_t cout = width * 4;
    std::string y = conv_bn(x, cin, width, 1, 1, true);
    y = conv_bn(y, width, width, 3, stride, true);
    y = conv_bn(y, width, cout, 1, 1, false);
    std::string skip = cin != cout || stride != 1 ? conv_bn(x, cin, cout, 1, stride, false) : x;
    std::string id = std::to_string(n_++);
    return node("Relu", {node("Add", {y, skip}, "add" + id)->output(0)}, "out" + id)->output(0);
  }

  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in,
                        const std::string& name) {
    auto* n = g_.add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : in) n->add_input(i);
    n->add_output(name + "_out");
    return n;
  }

  static void ints(onnx::NodeProto* n, const char* name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }

  std::string weight(const std::string& name, std::vector<int64_t> dims, bool positive = false) {
    auto* t = g_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    std::vector<float> v(static_cast<size_t>(n));
    std::uniform_real_distribution<float> u(positive ? 0.5f : -0.05f, positive ? 1.5f : 0.05f);
    for (float& x : v) x = u(rng_);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
    params_ += n;
    return name;
  }

  int64_t params() const { return params_; }

 private:
  onnx::GraphProto& g_;
  std::mt19937 rng_{42};
  int64_t n_ = 0, params_ = 0;
};

int64_t write_resnet50(const std::string& path) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto& g = *m.mutable_graph();
  g.set_name("resnet50");
  auto* in = g.add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : {1, 3, 224, 224}) tt->mutable_shape()->add_dim()->set_dim_value(d);
  ResNetWriter w(g);
  std::string x = w.conv_bn("x", 3, 64, 7, 2, true);
  auto* pool = w.node("MaxPool", {x}, "maxpool");
  ResNetWriter::ints(pool, "kernel_shape", {3, 3});
  ResNetWriter::ints(pool, "strides", {2, 2});
  ResNetWriter::ints(pool, "pads", {1, 1, 1, 1});
  x = pool->output(0);
  int64_t cin = 64;
  const int64_t blocks[4] = {3, 4, 6, 3}, widths[4] = {64, 128, 256, 512};
  for (int s = 0; s < 4; ++s)
    for (int64_t b = 0; b < blocks[s]; ++b) {
      x = w.bottleneck(x, cin, widths[s], b == 0 && s > 0 ? 2 : 1);
      cin = widths[s] * 4;
    }
  x = w.node("GlobalAveragePool", {x}, "gap")->output(0);
  x = w.node("Flatten", {x}, "flatten")->output(0);
  auto* fc =
      w.node("Gemm", {x, w.weight("fc.weight", {1000, 2048}), w.weight("fc.bias", {1000})}, "fc");
  auto* a = fc->add_attribute();
  a->set_name("transB");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  g.add_output()->set_name(fc->output(0));
  std::ofstream out(path, std::ios::binary);
  m.SerializeToOstream(&out);
  return w.params();
}

struct Sample {
  double seconds = 0;
  double peak_mib = 0;
};

// Runs `self MODE FILE` in a child and reads back its time and peak RSS.
Sample measure(const char* self, const std::string& mode, const std::string& file) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    execl(self, self, mode.c_str(), file.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  char buf[256] = {};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  Sample s;
  if (n > 0) std::sscanf(buf, "%lf %lf", &s.seconds, &s.peak_mib);
  return s;
}

double peak_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // Linux: KiB
}

int child(const std::string& mode, const std::string& file) {
  auto t0 = Clock::now();
  if (mode == "--child-import") {
    auto m = heddle::import_onnx_file(file);
    if (!m.ok()) {
      std::fprintf(stderr, "%s\n", m.error().to_string().c_str());
      return 1;
    }
  } else if (mode == "--child-parse") {
    onnx::ModelProto m;
    std::ifstream in(file, std::ios::binary);
    if (!m.ParseFromIstream(&in)) return 1;
  }  // --child-idle: the process's own footprint
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("%.6f %.2f\n", s, peak_mib());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strncmp(argv[1], "--child-", 8) == 0) return child(argv[1], argv[2]);
  int runs = 3;
  std::string file = "/tmp/heddle_bench_resnet50.onnx";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--runs") == 0) runs = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--keep") == 0) file = argv[i + 1];
  }
  auto t0 = Clock::now();
  int64_t params = write_resnet50(file);
  double gen = std::chrono::duration<double>(Clock::now() - t0).count();
  std::ifstream f(file, std::ios::binary | std::ios::ate);
  double mb = static_cast<double>(f.tellg()) / 1e6;
  fmt::print(
      "model: ResNet-50 topology, {:.1f}M parameters, {:.1f} MB file ({}), generated in "
      "{:.2f} s; {} runs each, median\n\n",
      params / 1e6, mb, file, gen, runs);
  fmt::print("| step | time (s) | peak RSS (MiB) |\n|---|---|---|\n");
  for (auto [mode, label] : std::vector<std::pair<const char*, const char*>>{
           {"--child-idle", "process start, nothing loaded"},
           {"--child-parse", "baseline: protobuf parse into onnx::ModelProto"},
           {"--child-import", "heddle import_onnx_file (parse + graph + weights)"}}) {
    std::vector<Sample> v;
    for (int r = 0; r < runs; ++r) v.push_back(measure(argv[0], mode, file));
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.seconds < b.seconds; });
    Sample med = v[v.size() / 2];
    double peak = 0;
    for (auto& s : v) peak = std::max(peak, s.peak_mib);
    fmt::print("| {} | {:.3f} | {:.1f} |\n", label, med.seconds, peak);
  }
  return 0;
}
