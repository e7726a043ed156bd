// How a step's kernels and transfers run, as a strategy names them: `precision=bf16|fp8|fp32`,
// `attention=flash|eager`, `overlap=none|dp|dp+tp`, `offload=none|optimizer|optimizer+params|
// activations|optimizer+params:nvme`, `cp_comm=allgather|ring`. Parsed once into these enums; the
// cost model prices them, the search pins them.
#pragma once

#include <cstdint>
#include <string_view>

#include "heddle/support/Result.h"

namespace heddle {

/// The number format of the step's GEMMs.
enum class Precision : uint8_t {
  kBf16,  ///< bf16 GEMMs and activations, fp32 master weights (mixed precision)
  kFp8,   ///< fp8 GEMMs of the linear layers (Transformer Engine), bf16 elsewhere
  kFp32,  ///< fp32 everywhere (GEMMs on TF32 tensor cores where the device has them)
};

/// How attention's scores are computed.
enum class Attention : uint8_t {
  kFlash,  ///< one fused kernel (FlashAttention): no s x s scores stored, recomputed in backward
  kEager,  ///< separate GEMM, mask and softmax kernels, the s x s scores kept for backward
};

/// Which communication runs behind compute.
enum class Overlap : uint8_t {
  kNone,  ///< every collective and send blocks
  kDp,    ///< data-parallel gradient reduction and parameter gathers per bucket; pipeline sends
  kDpTp,  ///< kDp, and tensor-parallel collectives with the adjacent GEMMs (async TP)
};

/// What model state or activations live in host memory.
enum class Offload : uint8_t {
  kNone,
  kOptimizer,        ///< fp32 master weights and Adam moments, updated on the host (ZeRO-Offload)
  kOptimizerParams,  ///< kOptimizer and the bf16 weights, fetched per layer (ZeRO-Infinity)
  kActivations,      ///< the activations kept for backward, copied out and back per layer
  /// kOptimizerParams with the optimizer state and the bf16 weights on NVMe, staged through
  /// host memory (ZeRO-Infinity's offload_optimizer and offload_param to nvme; ZeRO-3 only)
  kOptimizerParamsNvme,
};

/// How a context-parallel layer's keys and values reach every query block (`cp_comm=`).
enum class CpComm : uint8_t {
  kAllGather,  ///< one all-gather of K and V over the cp group, then the whole attention
  kRing,       ///< cp-1 ring steps (send to the next member, receive from the previous), each
               ///< arriving block's attention computed before the next step (ring attention)
};

/// How `run` lays a context-parallel sequence out over the cp group (`cp_layout=`).
enum class CpLayout : uint8_t {
  kZigzag,      ///< 2cp chunks, device i holding chunks i and 2cp-1-i (causal load balancing)
  kContiguous,  ///< cp contiguous blocks, device i holding block i
};

/// Parses `bf16`, `fp8` or `fp32`; anything else is a diagnostic listing them.
Result<Precision> parse_precision(std::string_view text);
/// Parses `flash` or `eager`.
Result<Attention> parse_attention(std::string_view text);
/// Parses `none`, `dp` or `dp+tp`.
Result<Overlap> parse_overlap(std::string_view text);
/// Parses `none`, `optimizer`, `optimizer+params`, `activations` or `optimizer+params:nvme`.
Result<Offload> parse_offload(std::string_view text);
/// Parses `allgather` or `ring`.
Result<CpComm> parse_cp_comm(std::string_view text);
/// Parses `zigzag` or `contiguous`.
Result<CpLayout> parse_cp_layout(std::string_view text);

/// The names the parsers read back.
std::string_view to_string(Precision p);
std::string_view to_string(Attention a);
std::string_view to_string(Overlap o);
std::string_view to_string(Offload o);
std::string_view to_string(CpComm c);
std::string_view to_string(CpLayout l);

}  // namespace heddle
