// DeviceExecutor::Poster: the thread that runs a device's ring steps (cp_comm=ring) while the
// device computes the block they overlap. Private to DeviceExecutor.cpp.
#pragma once

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "heddle/runtime/DeviceExecutor.h"
#include "heddle/support/Assert.h"

namespace heddle {

// One thread that runs the exchanges the device posts (ring steps), one at a time: the device
// thread posts a step, runs the block kernel, then waits. Only this thread makes communicator
// calls while a step is in flight, so the communicator sees one caller at a time (MPI: the
// environment asks for MPI_THREAD_SERIALIZED).
class DeviceExecutor::Poster {
 public:
  explicit Poster(DeviceExecutor& x) : x_(x), thread_([this] { loop(); }) {}
  ~Poster() {
    {
      std::lock_guard<std::mutex> lock(m_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Poster(const Poster&) = delete;
  Poster& operator=(const Poster&) = delete;

  // Starts the exchange of ring step `s` (x.exchange(s, comm)); allocates nothing. Precondition:
  // nothing in flight.
  void post(const Step& s, Communicator& comm) {
    {
      std::lock_guard<std::mutex> lock(m_);
      HEDDLE_ASSERT(!step_ && !done_) << "a ring step posted while another is in flight";
      step_ = &s;
      comm_ = &comm;
    }
    cv_.notify_all();
  }
  // Waits for the posted exchange and returns its status; rethrows what it threw.
  Status wait() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return done_; });
    done_ = false;
    if (std::exception_ptr e = std::exchange(thrown_, nullptr)) std::rethrow_exception(e);
    return std::exchange(result_, Status());
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || step_; });
      if (!step_) return;
      const Step* s = std::exchange(step_, nullptr);
      Communicator* comm = comm_;
      lock.unlock();
      Status st;
      std::exception_ptr thrown;
      try {
        st = x_.exchange(*s, *comm);
      } catch (...) {
        thrown = std::current_exception();
      }
      lock.lock();
      result_ = std::move(st);
      thrown_ = thrown;
      done_ = true;
      cv_.notify_all();
    }
  }

  DeviceExecutor& x_;
  std::mutex m_;
  std::condition_variable cv_;
  const Step* step_ = nullptr;  // the posted step, until the thread takes it
  Communicator* comm_ = nullptr;
  Status result_;
  std::exception_ptr thrown_;
  bool done_ = false, stop_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace heddle
