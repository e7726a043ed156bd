// Tensor: real data for the reference kernels and the interpreter. fp32 storage for float types,
// int64 storage for integer and bool types. A tensor may hold a tile of a larger tensor: `origin`
// is the global coordinate of its first element, so kernels address tiles in global coordinates.
// A tensor owns its storage, or views memory it does not own (an executor's arena).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "heddle/ir/Box.h"
#include "heddle/ir/DType.h"
#include "heddle/ir/IVec.h"
#include "heddle/ir/TensorType.h"
#include "heddle/support/AlignedAllocator.h"

namespace heddle {

/// A dense row-major tensor (or tile of one). Float dtypes (f32, f16, bf16) are stored and
/// computed as fp32; i32, i64 and bool are stored as int64.
///
/// Owning tensors are values: copies are deep. A view (Tensor::view) has the same API over memory
/// it does not own; copying a view gives an owning tensor with the same contents, moving it moves
/// the view. Assigning to a tensor replaces it (an owning copy or the moved state), never writes
/// through a view; write through one with copy_from, fill, set or the data pointers.
class Tensor {
 public:
  Tensor() = default;
  Tensor(const Tensor& o);
  Tensor(Tensor&& o) noexcept;
  /// Reuses this tensor's owned storage when it is large enough (no allocation).
  Tensor& operator=(const Tensor& o);
  Tensor& operator=(Tensor&& o) noexcept;
  ~Tensor() = default;
  /// A zero-filled tensor of `shape` whose first element sits at global coordinate `origin`
  /// (zeros when empty). Precondition: shape >= 0, origin empty or of the same rank.
  Tensor(DType dtype, IVec shape, IVec origin = {});
  /// A zero-filled full tensor of type `t`.
  explicit Tensor(const TensorType& t) : Tensor(t.dtype(), t.shape()) {}
  /// A zero-filled tile covering `region` (global coordinates) of a tensor of `dtype`.
  static Tensor tile(DType dtype, const Box& region) {
    return Tensor(dtype, region.shape(), region.start());
  }
  /// A view of `region` (global coordinates) of a tensor of `dtype` over `data`: region.volume()
  /// fp32 values for float dtypes, int64 values for integer ones, row-major; nothing is
  /// initialised. `data` may be null until rebind(). Precondition: `data` outlives the view's use.
  static Tensor view(DType dtype, const Box& region, void* data);
  /// True when this tensor views memory it does not own.
  bool is_view() const { return view_; }
  /// Points this view at other memory of the same size and layout. Precondition: is_view().
  void rebind(void* data);

  DType dtype() const { return dtype_; }
  bool is_int() const { return !dtype_is_float(dtype_); }
  const IVec& shape() const { return shape_; }
  const IVec& origin() const { return origin_; }
  int64_t rank() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  /// The global box this tensor holds: [origin, origin + shape).
  Box region() const { return Box(origin_, origin_ + shape_); }
  /// Row-major strides of the local buffer.
  const std::vector<int64_t>& strides() const { return strides_; }

  /// Float storage; an owning tensor's starts on a 64-byte boundary. Precondition: !is_int().
  float* f32();
  const float* f32() const;
  /// Integer storage. Precondition: is_int().
  int64_t* i64();
  const int64_t* i64() const;

  /// Element at global coordinate `p` as a double. Precondition: region() contains p.
  double at(const IVec& p) const;
  /// Sets the element at global coordinate `p`. Precondition: region() contains p.
  void set(const IVec& p, double v);
  /// Fills every element with `v`.
  void fill(double v);

  /// Copies the elements of `src` that lie inside both regions into this tensor (nothing when
  /// `src` is this tensor's own memory and region). Allocates nothing for ranks up to 8.
  void copy_from(const Tensor& src);
  /// A new tensor holding `region` (global coordinates) of this one.
  /// Precondition: region() contains `region`.
  Tensor crop(const Box& region) const;

  /// `f32[2, 3] @ [0, 4]` (the origin only when non-zero).
  std::string to_string() const;
  /// Bitwise equality of dtype, shape, origin and data.
  bool operator==(const Tensor& o) const;

 private:
  int64_t offset(const IVec& p) const;

  DType dtype_ = DType::kF32;
  IVec shape_, origin_;
  std::vector<int64_t> strides_;
  int64_t numel_ = 1;
  // Owned float storage (empty for views), 64-byte aligned: AdamW streams its results to
  // tensors only when they are alike modulo 32 bytes (src/ops/Simd.cpp).
  std::vector<float, AlignedAllocator<float>> f_;
  std::vector<int64_t> i_;  // owned integer storage (empty for views)
  float* fp_ = nullptr;     // the float elements: f_.data() or viewed memory
  int64_t* ip_ = nullptr;   // the integer elements: i_.data() or viewed memory
  bool view_ = false;

  // The elements this tensor holds storage for (0 for a default-constructed tensor).
  size_t stored() const { return fp_ || ip_ ? static_cast<size_t>(numel_) : 0; }
  void point_at_owned();
};

}  // namespace heddle
