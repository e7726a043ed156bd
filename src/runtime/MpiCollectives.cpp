// MpiCommunicator's collectives: regions exchanged (or predicted from the step before), tiles
// moved with MPI's non-blocking collectives or point to point, assembled in group order.
#include <cstring>
#include <optional>
#include <utility>

#include "MpiCommunicatorImpl.h"
#include "heddle/ops/Kernel.h"

namespace heddle {

namespace {

// Where each tile starts in `region`'s row-major layout, when every tile is one run of it and the
// runs cover it exactly once (so an all-gather can land straight in the result); else nullopt.
std::optional<std::vector<int64_t>> runs_of(const std::vector<Box>& tiles, const Box& region) {
  const int64_t r = region.rank();
  const IVec shape = region.shape();
  std::vector<int64_t> starts;
  std::vector<std::pair<int64_t, int64_t>> spans;  // (start, length), sorted below
  for (const Box& t : tiles) {
    if (t.empty() || !region.contains(t)) return std::nullopt;
    // The dims after the last cut one are whole; the ones before it must be 1 wide.
    int64_t cut = r - 1;
    while (cut >= 0 && t.end()[cut] - t.start()[cut] == shape[cut]) --cut;
    for (int64_t e = 0; e < cut; ++e)
      if (t.end()[e] - t.start()[e] != 1) return std::nullopt;
    int64_t start = 0;
    for (int64_t e = 0; e < r; ++e) start = start * shape[e] + (t.start()[e] - region.start()[e]);
    starts.push_back(start);
    spans.emplace_back(start, t.volume());
  }
  std::sort(spans.begin(), spans.end());
  int64_t at = 0;
  for (const auto& [start, len] : spans) {
    if (start != at) return std::nullopt;
    at += len;
  }
  if (at != region.volume()) return std::nullopt;
  return starts;
}

// An all-gather point to point, posted onto `reqs`: this member's `count` elements at `send` go
// to every other of the `n` members of `comm` (this one is `me`), and member q's arrive where
// `into(q)` says ({address, element count}). Unlike MPI's allgatherv, this member's own block is
// not copied.
template <class Into>
void post_allgather(std::vector<MPI_Request>& reqs, const char* send, int count, MPI_Datatype type,
                    int64_t n, int64_t me, MPI_Comm comm, Into into) {
  for (int64_t q = 0; q < n; ++q) {
    if (q == me) continue;
    const auto [at, len] = into(q);
    reqs.emplace_back();
    MPI_Irecv(at, len, type, static_cast<int>(q), 0, comm, &reqs.back());
    reqs.emplace_back();
    MPI_Isend(send, count, type, static_cast<int>(q), 0, comm, &reqs.back());
  }
}

}  // namespace

Status MpiCommunicator::collective(Collective c, const std::vector<int64_t>& group,
                                   const Tensor& mine, Tensor& out, Monoid monoid) {
  if (failure_) return *failure_;
  HEDDLE_ASSERT(std::find(group.begin(), group.end(), rank_) != group.end())
      << "rank " << rank_ << " not in " << group_text(group);
  HEDDLE_ASSERT(mine.dtype() == out.dtype() && mine.rank() == out.rank())
      << mine.to_string() << " vs " << out.to_string();
  // A slice of a replicated tile needs nothing from the peers: their tiles over out's region
  // hold the same values (ThreadedWorld copies them in group order, the last one winning).
  if (c == Collective::kSlice && mine.region().contains(out.region())) {
    out.copy_from(mine);
    return {};
  }
  if (group.size() == 2 && c == Collective::kAllReduce && monoid == Monoid::kSum &&
      !mine.is_int() && mine.region() == out.region()) {
    bool differ = false;
    std::vector<CollectiveCall> one{CollectiveCall{c, &group, &mine, &out, monoid}};
    Status st = sum_pairs(one, differ);
    if (!differ) return st;
  }
  return exchange_tiles(c, group, mine, out, monoid);
}

Status MpiCommunicator::exchange_tiles(Collective c, const std::vector<int64_t>& group,
                                       const Tensor& mine, Tensor& out, Monoid monoid) {
  const auto n = static_cast<int64_t>(group.size());
  const int64_t me = std::find(group.begin(), group.end(), rank_) - group.begin();
  const bool reduce = c == Collective::kAllReduce || c == Collective::kReduceScatter;
  const std::string op = std::string(collective_name(c)) + " over devices " + group_text(group);
  const std::string what = n > 1 ? impl_->progress->begin(op, group) : op;

  std::vector<Box> tiles(n), outs(n);  // every member's tile and target region
  std::vector<Tensor> got(n);          // views of what arrived from each peer
  std::vector<char> have(n, 0);        // whether anything of peer q's tile lies in our region
  if (n > 1) {
    auto comm = impl_->comm_for(group);
    if (!comm.ok()) return *(failure_ = comm.error());
    // 1. Regions: each member's tile and target, a few integers.
    const int64_t r = mine.rank();
    const int64_t m = 4 * r + 1;
    std::vector<int64_t> meta{r}, all(static_cast<size_t>(m * n));
    put_box(mine.region(), meta);
    put_box(out.region(), meta);
    // From the second step on, the regions are those of the last step, checked when the data
    // has arrived (wait_checked); before, the data waits for them.
    size_t pos = 0;
    const std::vector<int64_t>* guess = nullptr;
    MPI_Request meta_req = MPI_REQUEST_NULL;
    if (auto st = impl_->regions(*comm, group, meta, all, what, pos, guess, meta_req); !st.ok())
      return st;
    if (!guess) impl_->remember(group, pos, meta, all);
    std::vector<MPI_Request> reqs;
    const std::vector<int64_t>& layout = guess ? *guess : all;
    auto wait_data = [&](std::vector<MPI_Request>& rq) {
      return impl_->wait_checked(rq, meta_req, guess, all, what, group);
    };
    for (int64_t q = 0; q < n; ++q) {
      const int64_t* p = layout.data() + q * m;
      HEDDLE_ASSERT(p[0] == r) << what << ": member " << q << " has rank-" << p[0] << " tiles";
      tiles[q] = get_box(p + 1, r);
      outs[q] = get_box(p + 1 + 2 * r, r);
    }
    const MPI_Datatype type = mpi_type(mine);
    const size_t eb = elem_bytes(mine);
    // Buffers abandoned by a failure stay alive: MPI may still touch them.
    auto abandon = [&] {
      impl_->graveyard.push_back(std::exchange(impl_->sbuf, {}));
      impl_->graveyard.push_back(std::exchange(impl_->rbuf, {}));
    };
    // 2a. All-reduce of identical regions: each member combines one slice of the flat buffer
    //     from every member's tile in group order (MPI's alltoallv), then the slices are
    //     all-gathered (allgatherv). Same element-wise order as combining whole tiles, at a
    //     ring's traffic, 2(n-1)/n of the tensor per member.
    bool same = c == Collective::kAllReduce && !mine.is_int();
    for (int64_t q = 0; q < n && same; ++q) same = tiles[q] == out.region() && outs[q] == tiles[q];
    if (same) {
      const int64_t total = mine.numel();
      auto lo = [&](int64_t p) { return p * total / n; };
      const int64_t len = lo(me + 1) - lo(me);
      std::vector<int> scounts(n), sdispls(n), rcounts(n), rdispls(n);
      for (int64_t p = 0; p < n; ++p) {
        scounts[p] = count_of(lo(p + 1) - lo(p));
        sdispls[p] = count_of(lo(p));
        rcounts[p] = count_of(len);
        rdispls[p] = count_of(p * len);
      }
      // This member's slice of every tile, then (after the first n * len floats) their sum.
      auto* rbuf = reinterpret_cast<float*>(impl_->scratch(impl_->rbuf, (n + 1) * len * eb));
      float* acc = rbuf + n * len;
      reqs.assign(1, MPI_REQUEST_NULL);
      MPI_Ialltoallv(mine.f32(), scounts.data(), sdispls.data(), MPI_FLOAT, rbuf, rcounts.data(),
                     rdispls.data(), MPI_FLOAT, *comm, &reqs[0]);
      if (auto st = wait_data(reqs); !st.ok()) {
        abandon();
        return st;
      }
      if (len > 0) {  // a member whose share is empty (fewer elements than members) has none
        Tensor sum = Tensor::view(DType::kF32, Box(IVec{0}, IVec{len}), acc);
        Tensor piece = Tensor::view(DType::kF32, Box(IVec{0}, IVec{len}), rbuf);
        std::memcpy(acc, rbuf, static_cast<size_t>(len) * eb);
        for (int64_t q = 1; q < n; ++q) {
          piece.rebind(rbuf + q * len);
          kernels::combine(monoid, sum, piece);
        }
      }
      reqs.assign(1, MPI_REQUEST_NULL);
      MPI_Iallgatherv(acc, count_of(len), MPI_FLOAT, out.f32(), scounts.data(), sdispls.data(),
                      MPI_FLOAT, *comm, &reqs[0]);
      if (auto st = impl_->wait(reqs, what, group); !st.ok()) {
        abandon();
        impl_->dead_tensors.push_back(std::exchange(out, Tensor::tile(mine.dtype(), out.region())));
        return st;
      }
      impl_->progress->end(group);
      return {};
    }
    // 2b. Data. Every member needs every whole tile: MPI's allgatherv, straight into out when
    //    the tiles are disjoint row-major runs of it. Halos and ring steps: point-to-point
    //    between overlapping members. Otherwise exactly the overlaps: alltoallv.
    bool whole = c == Collective::kAllGather || c == Collective::kAllReduce;
    for (int64_t p = 0; p < n && whole; ++p)
      for (int64_t q = 0; q < n && whole; ++q) whole = outs[p].contains(tiles[q]);
    auto receive_box = [&](int64_t q) {
      return whole ? tiles[q] : tiles[q].intersect(out.region());
    };
    std::vector<int> rcounts(n, 0), rdispls(n, 0);
    // An all-gather sends this tile to every peer and receives theirs point to point (MPI's
    // allgatherv would also copy this rank's tile into the receive buffer): straight into out
    // when the tiles are disjoint row-major runs of it. Every layout of an all-gather moves the
    // same messages, so members that disagree on the layout (out of step) still complete it and
    // the check of the predicted regions reports them.
    if (whole && c == Collective::kAllGather) {
      if (auto runs = runs_of(tiles, out.region()); runs) {
        char* to = bytes(out);
        reqs.clear();
        post_allgather(reqs, bytes(mine), count_of(mine.numel()), type, n, me, *comm,
                       [&](int64_t q) {
                         return std::pair{to + static_cast<size_t>((*runs)[q]) * eb,
                                          count_of(tiles[q].volume())};
                       });
        std::memcpy(to + static_cast<size_t>((*runs)[me]) * eb, bytes(mine),
                    static_cast<size_t>(mine.numel()) * eb);
        if (auto st = wait_data(reqs); !st.ok()) {
          impl_->dead_tensors.push_back(
              std::exchange(out, Tensor::tile(mine.dtype(), out.region())));
          return st;
        }
        impl_->progress->end(group);
        return {};
      }
    }
    const bool gather = whole && c == Collective::kAllGather;
    int64_t rtotal = 0;
    for (int64_t q = 0; q < n; ++q) {
      rdispls[q] = count_of(rtotal);
      // allgatherv needs this rank's block too; it is copied into its own slot.
      if (q != me || (whole && !gather)) rcounts[q] = count_of(receive_box(q).volume());
      rtotal += rcounts[q];
    }
    char* rbuf = impl_->scratch(impl_->rbuf, rtotal * static_cast<int64_t>(eb));
    reqs.clear();
    if (gather) {
      post_allgather(reqs, bytes(mine), count_of(mine.numel()), type, n, me, *comm, [&](int64_t q) {
        return std::pair{rbuf + static_cast<size_t>(rdispls[q]) * eb, rcounts[q]};
      });
    } else if (whole) {
      reqs.emplace_back();
      MPI_Iallgatherv(bytes(mine), count_of(mine.numel()), type, rbuf, rcounts.data(),
                      rdispls.data(), type, *comm, &reqs.back());
    } else {
      // What each peer needs of this tile, copied into the send buffer (or sent straight from
      // the tile when one peer needs all of it).
      std::vector<Box> pieces(n);
      std::vector<int> scounts(n, 0), sdispls(n, 0);
      int64_t stotal = 0, senders = 0;
      for (int64_t p = 0; p < n; ++p) {
        sdispls[p] = count_of(stotal);
        Box b = mine.region().intersect(outs[p]);
        if (p == me || b.empty()) continue;
        pieces[p] = b;
        scounts[p] = count_of(b.volume());
        stotal += scounts[p];
        ++senders;
      }
      const char* sbuf = bytes(mine);
      if (senders != 1 || stotal != mine.numel()) {
        char* s = impl_->scratch(impl_->sbuf, stotal * static_cast<int64_t>(eb));
        for (int64_t p = 0; p < n; ++p)
          if (scounts[p] > 0)
            Tensor::view(mine.dtype(), pieces[p], s + static_cast<size_t>(sdispls[p]) * eb)
                .copy_from(mine);
        sbuf = s;
      } else {
        std::fill(sdispls.begin(), sdispls.end(), 0);
      }
      if (c == Collective::kHaloExchange || c == Collective::kSendRecv) {
        for (int64_t p = 0; p < n; ++p)
          if (scounts[p] > 0) {
            reqs.emplace_back();
            MPI_Isend(sbuf + static_cast<size_t>(sdispls[p]) * eb, scounts[p], type,
                      static_cast<int>(p), 0, *comm, &reqs.back());
          }
        for (int64_t q = 0; q < n; ++q)
          if (rcounts[q] > 0) {
            reqs.emplace_back();
            MPI_Irecv(rbuf + static_cast<size_t>(rdispls[q]) * eb, rcounts[q], type,
                      static_cast<int>(q), 0, *comm, &reqs.back());
          }
      } else {
        reqs.emplace_back();
        MPI_Ialltoallv(sbuf, scounts.data(), sdispls.data(), type, rbuf, rcounts.data(),
                       rdispls.data(), type, *comm, &reqs.back());
      }
    }
    if (auto st = wait_data(reqs); !st.ok()) {
      abandon();
      return st;
    }
    for (int64_t q = 0; q < n; ++q) {
      Box b = receive_box(q);
      if (q == me || b.empty()) continue;
      have[q] = 1;
      got[q] = Tensor::view(mine.dtype(), b, rbuf + static_cast<size_t>(rdispls[q]) * eb);
    }
    impl_->progress->end(group);
  }
  // 3. Assemble in group order, exactly as ThreadedWorld does.
  bool first = true;
  for (int64_t q = 0; q < n; ++q) {
    const Tensor& t = q == me ? mine : got[q];
    if (q != me && !have[q]) {
      first = false;  // as copying a tile outside our region: a no-op that still counts first
      continue;
    }
    if (!reduce || first)
      out.copy_from(t);
    else
      kernels::combine(monoid, out, t);
    first = false;
  }
  return {};
}

Status MpiCommunicator::collectives(const std::vector<CollectiveCall>& calls) {
  if (failure_) return *failure_;
  if (calls.empty()) return {};
  const std::vector<int64_t>& group = *calls[0].group;
  bool fast = group.size() == 2;
  for (const CollectiveCall& k : calls)
    fast = fast && k.c == Collective::kAllReduce && k.monoid == Monoid::kSum && *k.group == group &&
           !k.mine->is_int() && k.mine->region() == k.out->region();
  bool differ = !fast;
  if (fast)
    if (Status st = sum_pairs(calls, differ); !differ) return st;
  bool gathers = calls.size() > 1;
  for (const CollectiveCall& k : calls)
    gathers = gathers && k.c == Collective::kAllGather && *k.group == group &&
              k.mine->is_int() == calls[0].mine->is_int() && k.mine->rank() == k.out->rank();
  if (gathers)
    if (Status st = gather_batch(calls, differ); !differ) return st;
  for (const CollectiveCall& k : calls)  // every member sees the same regions, so all go here
    if (Status st = collective(k.c, *k.group, *k.mine, *k.out, k.monoid); !st.ok()) return st;
  return {};
}

Status MpiCommunicator::sum_pairs(const std::vector<CollectiveCall>& calls, bool& differ) {
  differ = false;
  const std::vector<int64_t>& group = *calls[0].group;
  auto comm = impl_->comm_for(group);
  if (!comm.ok()) return *(failure_ = comm.error());
  const std::string op = calls.size() == 1 ? "all-reduce over devices " + group_text(group)
                                           : std::to_string(calls.size()) +
                                                 " all-reduces over devices " + group_text(group);
  const std::string what = impl_->progress->begin(op, group);
  // 1. Every call's tile region from each member (a few integers per call, one message).
  std::vector<int64_t> meta;
  for (const CollectiveCall& k : calls) {
    meta.push_back(k.mine->rank());
    put_box(k.mine->region(), meta);
  }
  const auto m = static_cast<int64_t>(meta.size());
  std::vector<int64_t> all(static_cast<size_t>(2 * m));
  // From the second step on, the regions are those of the last step (equal on both members),
  // checked when the data has arrived.
  size_t pos = 0;
  const std::vector<int64_t>* guess = nullptr;
  MPI_Request meta_req = MPI_REQUEST_NULL;
  if (auto st = impl_->regions(*comm, group, meta, all, what, pos, guess, meta_req); !st.ok())
    return st;
  std::vector<MPI_Request> reqs;
  if (!guess) {
    differ = !std::equal(meta.begin(), meta.end(), all.begin()) ||
             !std::equal(meta.begin(), meta.end(), all.begin() + m);
    if (differ) {  // every member sees the same regions, so all of them go call by call
      impl_->progress->end(group);
      return {};
    }
    impl_->remember(group, pos, meta, all);
  }
  // 2. The data, every call in flight at once, in two rounds. Member 0 sums the first half of
  //    every call, member 1 the second: each sends the peer its tile's half of the peer (straight
  //    from the tile) and receives the peer's of its own; sums it into its half of the result
  //    (member 0's element first: the group order); then each sends its summed half to the peer,
  //    which receives it straight into its result. A reduce-scatter and an all-gather, as
  //    ThreadedWorld splits large sums: each member sums half, the transfers are halves.
  const int64_t me = group[0] == rank_ ? 0 : 1;
  const int peer = static_cast<int>(1 - me);
  auto lo = [&](const CollectiveCall& k, int64_t q) { return q * (k.out->numel() / 2); };
  auto hi = [&](const CollectiveCall& k, int64_t q) {
    return q == 0 ? k.out->numel() / 2 : k.out->numel();
  };
  std::vector<int64_t> at(calls.size() + 1, 0);  // where each call's received half starts
  for (size_t i = 0; i < calls.size(); ++i) at[i + 1] = at[i] + hi(calls[i], me) - lo(calls[i], me);
  auto* recv = reinterpret_cast<float*>(
      impl_->scratch(impl_->rbuf, at.back() * static_cast<int64_t>(sizeof(float))));
  auto lost = [&] {  // MPI may still read or write these
    impl_->graveyard.push_back(std::exchange(impl_->rbuf, {}));
    for (const CollectiveCall& k : calls)
      impl_->dead_tensors.push_back(
          std::exchange(*k.out, Tensor::tile(k.out->dtype(), k.out->region())));
  };
  reqs.clear();
  for (size_t i = 0; i < calls.size(); ++i) {
    const CollectiveCall& k = calls[i];
    reqs.emplace_back();
    MPI_Irecv(recv + at[i], count_of(at[i + 1] - at[i]), MPI_FLOAT, peer, 0, *comm, &reqs.back());
    reqs.emplace_back();
    MPI_Isend(k.mine->f32() + lo(k, peer), count_of(hi(k, peer) - lo(k, peer)), MPI_FLOAT, peer, 0,
              *comm, &reqs.back());
  }
  if (auto st = impl_->wait_checked(reqs, meta_req, guess, all, what, group); !st.ok()) {
    lost();
    return st;
  }
  reqs.clear();
  for (size_t i = 0; i < calls.size(); ++i) {
    const CollectiveCall& k = calls[i];
    const float* a = me == 0 ? k.mine->f32() + lo(k, me) : recv + at[i];
    const float* b = me == 0 ? recv + at[i] : k.mine->f32() + lo(k, me);
    float* o = k.out->f32() + lo(k, me);
    for (int64_t e = 0, n = hi(k, me) - lo(k, me); e < n; ++e) o[e] = a[e] + b[e];
    reqs.emplace_back();
    MPI_Irecv(k.out->f32() + lo(k, peer), count_of(hi(k, peer) - lo(k, peer)), MPI_FLOAT, peer, 0,
              *comm, &reqs.back());
    reqs.emplace_back();
    MPI_Isend(o, count_of(hi(k, me) - lo(k, me)), MPI_FLOAT, peer, 0, *comm, &reqs.back());
  }
  if (auto st = impl_->wait(reqs, what, group); !st.ok()) {
    lost();
    return st;
  }
  impl_->progress->end(group);
  return {};
}

Status MpiCommunicator::gather_batch(const std::vector<CollectiveCall>& calls, bool& differ) {
  differ = false;
  const std::vector<int64_t>& group = *calls[0].group;
  const auto n = static_cast<int64_t>(group.size());
  const int64_t me = std::find(group.begin(), group.end(), rank_) - group.begin();
  auto comm = impl_->comm_for(group);
  if (!comm.ok()) return *(failure_ = comm.error());
  const std::string what = impl_->progress->begin(
      std::to_string(calls.size()) + " all-gathers over devices " + group_text(group), group);
  // 1. Every call's tile and target region from each member, in one message (predicted from the
  //    second step on, as for a lone call).
  std::vector<int64_t> meta;
  for (const CollectiveCall& k : calls) {
    meta.push_back(k.mine->rank());
    put_box(k.mine->region(), meta);
    put_box(k.out->region(), meta);
  }
  const auto m = static_cast<int64_t>(meta.size());
  std::vector<int64_t> all(static_cast<size_t>(n * m));
  size_t pos = 0;
  const std::vector<int64_t>* guess = nullptr;
  MPI_Request meta_req = MPI_REQUEST_NULL;
  if (auto st = impl_->regions(*comm, group, meta, all, what, pos, guess, meta_req); !st.ok())
    return st;
  const std::vector<int64_t>& layout = guess ? *guess : all;
  // tiles[q * calls + i]: member q's tile of call i. Every member must need every whole tile.
  const auto c = static_cast<int64_t>(calls.size());
  std::vector<Box> tiles(static_cast<size_t>(n * c));
  bool whole = true;
  for (int64_t q = 0; q < n; ++q) {
    const int64_t* p = layout.data() + q * m;
    for (int64_t i = 0; i < c; ++i) {
      const int64_t r = calls[i].mine->rank();
      whole = whole && p[0] == r;
      if (!whole) break;
      tiles[q * c + i] = get_box(p + 1, r);
      p += 1 + 4 * r;
    }
  }
  for (int64_t q = 0; q < n && whole; ++q)
    for (int64_t i = 0; i < c && whole; ++i) {
      const int64_t* p = layout.data() + q * m;
      for (int64_t j = 0; j < i; ++j) p += 1 + 4 * calls[j].mine->rank();
      const Box out_q = get_box(p + 1 + 2 * calls[i].mine->rank(), calls[i].mine->rank());
      for (int64_t t = 0; t < n && whole; ++t) whole = out_q.contains(tiles[t * c + i]);
    }
  if (!whole) {  // the same layout on every member, so all of them go call by call
    std::vector<MPI_Request> none;
    if (auto st = impl_->wait_checked(none, meta_req, guess, all, what, group); !st.ok()) return st;
    impl_->progress->end(group);
    differ = true;
    return {};
  }
  if (!guess) impl_->remember(group, pos, meta, all);
  // 2. Every member's tiles, packed in call order, in one all-gather.
  const Tensor& first = *calls[0].mine;
  const MPI_Datatype type = mpi_type(first);
  const size_t eb = elem_bytes(first);
  std::vector<int> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
  int64_t total = 0;
  for (int64_t q = 0; q < n; ++q) {
    int64_t len = 0;
    for (int64_t i = 0; i < c; ++i) len += tiles[q * c + i].volume();
    displs[q] = count_of(total);
    counts[q] = count_of(len);
    total += len;
  }
  char* sbuf = impl_->scratch(impl_->sbuf, counts[me] * static_cast<int64_t>(eb));
  char* rbuf = impl_->scratch(impl_->rbuf, total * static_cast<int64_t>(eb));
  for (int64_t i = 0, at = 0; i < c; ++i) {
    const Tensor& t = *calls[i].mine;
    std::memcpy(sbuf + static_cast<size_t>(at) * eb, bytes(t), static_cast<size_t>(t.numel()) * eb);
    at += t.numel();
  }
  // Point to point: MPI's allgatherv would also copy this rank's pack into rbuf, for nothing.
  std::vector<MPI_Request> reqs;
  post_allgather(reqs, sbuf, counts[me], type, n, me, *comm, [&](int64_t q) {
    return std::pair{rbuf + static_cast<size_t>(displs[q]) * eb, counts[q]};
  });
  // While the peers read this rank's pack, its own tiles go into the results: first instead of
  // in group order, which is the same when no other member's tile overlaps them.
  bool ahead = true;
  for (int64_t i = 0; i < c && ahead; ++i)
    for (int64_t q = 0; q < n && ahead; ++q)
      ahead = q == me || tiles[q * c + i].intersect(tiles[me * c + i]).empty();
  if (ahead)
    for (int64_t i = 0; i < c; ++i) calls[i].out->copy_from(*calls[i].mine);
  if (auto st = impl_->wait_checked(reqs, meta_req, guess, all, what, group); !st.ok()) {
    impl_->graveyard.push_back(std::exchange(impl_->sbuf, {}));
    impl_->graveyard.push_back(std::exchange(impl_->rbuf, {}));
    return st;
  }
  impl_->progress->end(group);
  // 3. Assemble each call in group order, exactly as ThreadedWorld does.
  for (int64_t q = 0; q < n; ++q)
    for (int64_t i = 0, at = displs[q]; i < c; ++i) {
      const Box& b = tiles[q * c + i];
      if (q == me) {
        if (!ahead) calls[i].out->copy_from(*calls[i].mine);
      } else
        calls[i].out->copy_from(
            Tensor::view(calls[i].mine->dtype(), b, rbuf + static_cast<size_t>(at) * eb));
      at += b.volume();
    }
  return {};
}

}  // namespace heddle
