// global_avgpool over whole planes: one sum per (image, channel) plane of contiguous rows, on the
// call's threads, instead of the pointwise loop's walk over every point of the index space.
#include "KernelConvForm.h"

namespace heddle::kdetail {

bool run_global_avgpool_fast(const Op& op, const Box& box, const convform::Ins& ins,
                             const convform::Outs& outs, const KernelOptions& o) {
  if (o.reference || o.accumulate || op.kind != OpKind::kGlobalAvgPool || ins.size() != 1 ||
      outs.size() != 1 || ins[0]->is_int() || ins[0]->rank() != 4 || box.rank() != 4 ||
      op.inputs[0].padded || !shifted_identity(op.inputs[0], 4) ||
      op.inputs[0].proj.map().offset() != IVec::zeros(4))
    return false;
  const Box whole = op.space.box();
  for (int64_t d : {2, 3})
    if (box.start()[d] != whole.start()[d] || box.end()[d] != whole.end()[d]) return false;
  if (!ins[0]->region().contains(box)) return false;
  Access r(*outs[0], op.results[0]);
  if (r.window_size() != 1 || r.coef[2] != 0 || r.coef[3] != 0) return false;
  const convform::Tile4 x(*ins[0]);
  const int64_t n0 = box.start()[0], c0 = box.start()[1], N = box.end()[0] - n0,
                C = box.end()[1] - c0, H = whole.end()[2], W = whole.end()[3];
  const float inv = static_cast<float>(1.0 / static_cast<double>(H * W));
  const bool rows = x.st[2] == W && x.st[3] == 1;  // a plane is one run of H * W
  float* y = outs[0]->f32();
  const int threads = std::max(1, o.threads);
  const int64_t planes = N * C;
#pragma omp parallel for num_threads(threads) if (threads > 1 && planes * H * W >= 8192)
  for (int64_t q = 0; q < planes; ++q) {
    int64_t p[4] = {n0 + q / C, c0 + q % C, 0, 0};
    float s = 0.0f;
    if (rows) {
      const float* a = x.data + x.off(p[0], p[1], 0, 0);
      for (int64_t j = 0; j < H * W; ++j) s += a[j];
    } else {
      for (int64_t h = 0; h < H; ++h) {
        const float* a = x.data + x.off(p[0], p[1], h, 0);
        for (int64_t j = 0; j < W; ++j) s += a[j * x.st[3]];
      }
    }
    y[r.offset(p)] = s * inv;
  }
  return true;
}

}  // namespace heddle::kdetail
