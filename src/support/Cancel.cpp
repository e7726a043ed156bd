// The process-wide cancellation flag behind support/Cancel.h.
#include "heddle/support/Cancel.h"

#include <atomic>

namespace heddle {

namespace {

std::atomic<int> g_reason{0};
static_assert(std::atomic<int>::is_always_lock_free, "signal handlers need a lock-free flag");

}  // namespace

void request_cancel(CancelReason reason) noexcept {
  int expected = 0;
  g_reason.compare_exchange_strong(expected, static_cast<int>(reason), std::memory_order_relaxed);
}

bool cancel_requested() noexcept { return g_reason.load(std::memory_order_relaxed) != 0; }

CancelReason cancel_reason() noexcept {
  return static_cast<CancelReason>(g_reason.load(std::memory_order_relaxed));
}

void clear_cancel() noexcept { g_reason.store(0, std::memory_order_relaxed); }

}  // namespace heddle
