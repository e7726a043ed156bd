// The flags that say which MODEL to load: zoo size overrides and ONNX dynamic dims.
#include "Command.h"

namespace heddle::cli {

void add_dim_option(CLI::App* app, std::map<std::string, int64_t>& dims) {
  app->add_option_function<std::vector<std::string>>(
         "--dim",
         [&dims](const std::vector<std::string>& items) {
           for (const auto& item : items) {
             size_t eq = item.find('=');
             if (eq == std::string::npos || eq == 0)
               throw CLI::ValidationError("--dim", "expected NAME=VALUE, got '" + item + "'");
             try {
               dims[item.substr(0, eq)] = std::stoll(item.substr(eq + 1));
             } catch (const std::exception&) {
               throw CLI::ValidationError("--dim", "VALUE of '" + item + "' is not an integer");
             }
           }
         },
         "ONNX models: bind dynamic dim NAME to VALUE (repeatable)")
      ->take_all();
}

void add_tactic_option(CLI::App* app, std::vector<Tactic>& tactics) {
  app->add_option_function<std::vector<std::string>>(
         "--tactic",
         [&tactics](const std::vector<std::string>& items) {
           for (const auto& item : items) {
             auto t = Tactic::parse(item);
             if (!t.ok()) throw CLI::ValidationError(t.error().message);
             tactics.push_back(std::move(*t));
           }
         },
         "Pin one value or op (repeatable; docs/sharding.md): %w:1=tp shards tensor dim 1 of %w "
         "on mesh axis tp, %h:n=tp splits index dim n of the op defining %h, %x=replicate")
      ->take_all();
}

void add_zoo_overrides(CLI::App* app, zoo::ZooOverrides& o) {
  auto opt = [&](const char* flag, std::optional<int64_t>& dst, const char* what) {
    app->add_option_function<int64_t>(
        flag, [&dst](const int64_t& v) { dst = v; }, what);
  };
  opt("--layers", o.layers, "Zoo models: number of layers");
  opt("--hidden", o.hidden, "Zoo models: hidden size");
  opt("--heads", o.heads, "Zoo models: attention heads");
  opt("--seq", o.seq, "Zoo models: sequence length");
  opt("--vocab", o.vocab, "Zoo models: vocabulary size");
  opt("--batch", o.batch, "Zoo models: batch size; ONNX models: re-batch (the leading dim)");
  opt("--ffn", o.ffn, "Zoo models (llama, mixtral, moe): MLP inner width");
  opt("--kv-heads", o.kv_heads, "Zoo models (llama, mixtral): key/value heads");
  opt("--experts", o.experts, "Zoo models (mixtral, moe): experts per MoE layer");
  opt("--top-k", o.top_k, "Zoo models (mixtral, moe): experts per token, 1..experts (2)");
}

void add_loss_option(CLI::App* app, std::string& loss) {
  app->add_option("--loss", loss,
                  "ONNX models with --train: the loss on the output, cross_entropy or mse "
                  "(default: cross_entropy for outputs of rank >= 2, else mse)")
      ->check(CLI::IsMember({"cross_entropy", "mse"}));
}

}  // namespace heddle::cli
