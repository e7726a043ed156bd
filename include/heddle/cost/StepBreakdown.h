// StepBreakdown: where the time of one simulated step goes, by category (compute, recompute,
// tensor/sequence-parallel collectives, context/expert-parallel traffic, pipeline sends, bubble,
// gradient reduction, optimizer), exposed time summing to the step time and what overlap hid.
#pragma once

#include <string>
#include <vector>

namespace heddle::cost {

/// Seconds per category of one step on one device (or a device-weighted mean over stages). The
/// exposed categories sum to the step time; `overlapped_*` were hidden behind compute by
/// `overlap` and are not part of it.
struct StepBreakdown {
  double compute_s = 0;          ///< forward, backward and weight-gradient ops (roofline)
  double recompute_s = 0;        ///< forward ops run again in backward (recompute=)
  double tp_sp_s = 0;            ///< reshards on the tp axis: tensor/sequence-parallel collectives
  double cp_ep_s = 0;            ///< reshards on the ep or cp axis: expert/context traffic
  double pipeline_send_s = 0;    ///< stage-to-stage activation and gradient sends
  double bubble_s = 0;           ///< idle: pipeline fill and drain, waiting for other stages
  double grad_reduction_s = 0;   ///< gradient all-reduce over dp and ZeRO-3 parameter gathers
  double optimizer_s = 0;        ///< the optimizer's update pass (on the host with offload)
  double offload_s = 0;          ///< PCIe transfers to and from host memory (offload=)
  double overlapped_tp_s = 0;    ///< tp/sp collectives hidden behind GEMMs (not in the total)
  double overlapped_cp_s = 0;    ///< ring attention's key/value traffic hidden behind block
                                 ///< attention (not in the total)
  double overlapped_send_s = 0;  ///< pipeline sends hidden behind compute (not in the total)
  double overlapped_grad_s = 0;  ///< gradient reduction hidden behind backward (not in total)
  double overlapped_offload_s = 0;  ///< host transfers hidden behind compute (not in the total)

  /// The exposed seconds: every category but the overlapped ones.
  double total() const;
  /// Field-wise sum.
  StepBreakdown operator+(const StepBreakdown& o) const;
  /// Every field times `k`.
  StepBreakdown scaled(double k) const;
  bool operator==(const StepBreakdown&) const = default;

  /// One category: its JSON key, its name for people, and its seconds.
  struct Entry {
    std::string key, name;
    double seconds = 0;
    bool overlapped = false;  ///< hidden behind compute, not part of the step time
  };
  /// Every category in a fixed order (exposed first, then the overlapped ones). JSON keys:
  /// compute, recompute, tp_sp_collectives, cp_ep_traffic, pipeline_sends, bubble,
  /// gradient_reduction, optimizer, host_offload, overlapped_tp_sp_collectives,
  /// overlapped_cp_ep_traffic, overlapped_pipeline_sends, overlapped_gradient_reduction,
  /// overlapped_host_offload.
  std::vector<Entry> entries() const;
  /// `compute 1.2 s (80%), bubble 0.3 s (20%)`: the exposed categories over 0.5% of the total,
  /// largest first.
  std::string to_string() const;
};

/// Why step `a` takes longer or shorter than step `b`: the categories whose seconds differ by
/// more than 0.5% of the larger total, largest difference first, as
/// `bubble +0.41 s, tp/sp collectives +0.12 s, compute -0.05 s`; "no category differs" when none.
std::string explain_difference(const StepBreakdown& a, const StepBreakdown& b);

}  // namespace heddle::cost
