// The training loss appended to an imported model (`--train --loss`): ONNX exports hold the
// forward pass only.
#include <numeric>

#include "OnnxImporter.h"

namespace heddle::onnx_detail {

Result<ValueId> append_loss(Ops& ops, ValueId output, const std::string& loss,
                            const std::string& file) {
  auto err = [&](const std::string& m) {
    return Diagnostic(SourceLoc{file, 0, 0}, "--loss " + loss + ": " + m);
  };
  const TensorType t = ops.type(output);
  if (!dtype_is_float(t.dtype()))
    return err("the model's output is " + t.to_string() + ", not a float tensor");
  std::string kind = loss;
  if (kind == "auto") kind = t.rank() >= 2 ? "cross_entropy" : "mse";
  std::vector<int64_t> all(static_cast<size_t>(t.rank()));
  std::iota(all.begin(), all.end(), 0);
  ValueId l = kNoValue;
  if (kind == "cross_entropy") {
    if (t.rank() < 2)
      return err("cross-entropy needs logits [batch, ..., classes]; the output is " +
                 t.to_string() + " (use --loss mse)");
    const IVec& s = t.shape();
    ValueId labels = ops.input(
        "labels", TensorType(DType::kI64, IVec(std::vector<int64_t>(s.begin(), s.end() - 1))));
    all.pop_back();
    l = ops.reduce(OpKind::kReduceMean, ops.cross_entropy(output, labels), all);
  } else if (kind == "mse") {
    ValueId target = ops.input("labels", t);
    ValueId d = ops.sub(output, target);
    l = ops.reduce(OpKind::kReduceMean, ops.mul(d, d), all);
  } else {
    return Diagnostic(SourceLoc{file, 0, 0},
                      "--loss '" + loss + "' is not a loss; use cross_entropy or mse");
  }
  if (!ops.ok()) return err(ops.status().error().message);
  return l;
}

}  // namespace heddle::onnx_detail
