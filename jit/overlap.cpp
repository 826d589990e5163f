#include "jit/overlap.h"

#include <algorithm>
#include <array>
#include <utility>

#include "ir/graph.h"

namespace fusejit::jit {
namespace {

using Wide = __int128;  // sums of two views' byte spans (each < 2^63) and addresses (< 2^64)

struct Term {
  Wide c = 0;  // bytes per step (> 0)
  Wide u = 0;  // steps: 0..u
};

// sum_k t[k].c * x_k = r, 0 <= x_k <= t[k].u: the equation of header's comment.
struct Equation {
  std::array<Term, 2 * ir::kMaxRank + 2> t{};
  size_t n = 0;
  Wide r = 0;

  // A term +c*x (or -c*x, written c*(u - x') - c*u so every coefficient is positive). Terms
  // with one coefficient merge: x + y over [0, u1] x [0, u2] takes each value of [0, u1 + u2].
  void add(Wide c, Wide u, bool minus) {
    if (c == 0 || u == 0) return;
    if (minus) r += c * u;
    for (size_t k = 0; k < n; ++k)
      if (t[k].c == c) {
        t[k].u += u;
        return;
      }
    t[n++] = {c, u};
  }

  // Terms whose coefficients divide: c*x + (m*c)*y over [0, u] x [0, v] takes every value
  // c*z, 0 <= z <= u + m*v, when u >= m - 1 (x fills the gaps between y's steps), so the two are
  // one term, exactly. Two slicings of one buffer with other steps (strides 2s and s, 72 and 36
  // bytes) then leave one term per level of the nesting, not a product of candidates (a [82, 198,
  // 2] pair of them took over 4,096 steps). To a fixed point; add() merged equal coefficients.
  void merge_multiples() {
    for (bool merged = true; merged;) {
      merged = false;
      for (size_t i = 0; i < n && !merged; ++i)
        for (size_t j = 0; j < n && !merged; ++j) {
          if (i == j || t[j].c % t[i].c != 0 || t[i].u < t[j].c / t[i].c - 1) continue;
          t[i].u += t[j].c / t[i].c * t[j].u;
          t[j] = t[--n];  // t[i] itself when i was last
          merged = true;
        }
    }
  }

  // One view's dims and element bytes, on the left side (`minus` false) or the right.
  void add_view(const ByteView& v, bool minus) {
    int64_t contiguous = 1;
    for (size_t d = v.shape.size(); d-- > 0;) {
      const int64_t stride = v.strides.empty() ? contiguous : v.strides[d];
      add(static_cast<Wide>(stride) * v.elem_size, v.shape[d] - 1, minus);
      if (v.strides.empty()) contiguous *= v.shape[d];
    }
    add(1, v.elem_size - 1, minus);
  }
};

// Depth-first search, term k onwards, for the remaining right-hand side r (0 <= r <= rest[k]).
struct Search {
  const Equation& e;
  std::array<Wide, 2 * ir::kMaxRank + 3> rest{};  // rest[k]: the largest sum terms k.. can make
  std::array<Wide, 2 * ir::kMaxRank + 3> gcd{};   // gcd[k]: of coefficients k.. before a last unit term
  Wide unit = -1;                                 // the bound of a last term of coefficient 1 (-1: none)
  int64_t work;

  // Every sum of terms k.. is a multiple of gcd[k], plus 0..unit when a unit term ends the list
  // (the element bytes: views of 2-byte or wider elements always have one).
  bool reachable(size_t k, Wide r) const {
    if (unit < 0) return r % gcd[k] == 0;
    return k + 1 == e.n || r % gcd[k] <= unit;
  }

  Sharing from(size_t k, Wide r) {
    if (k == e.n) return r == 0 ? Sharing::Some : Sharing::None;
    if (!reachable(k, r)) return Sharing::None;
    const Term& t = e.t[k];
    // c*x <= r, and the later terms must make up r - c*x <= rest[k + 1].
    const Wide need = r - rest[k + 1];
    const Wide lo = need <= 0 ? 0 : (need + t.c - 1) / t.c;
    for (Wide x = std::min(t.u, r / t.c); x >= lo; --x) {
      if (--work < 0) return Sharing::Unknown;
      if (const Sharing s = from(k + 1, r - t.c * x); s != Sharing::None) return s;
    }
    return Sharing::None;
  }
};

Wide gcd_of(Wide a, Wide b) {
  while (b != 0) a = std::exchange(b, a % b);
  return a;
}

bool empty(const ByteView& v) {
  return std::any_of(v.shape.begin(), v.shape.end(), [](int64_t n) { return n == 0; });
}

// Whether the equation has a solution, within max_work candidates.
Sharing solve(Equation& e, int64_t max_work) {
  e.merge_multiples();
  // Largest coefficient first: each then has the fewest values left to try.
  std::sort(e.t.begin(), e.t.begin() + static_cast<std::ptrdiff_t>(e.n),
            [](const Term& x, const Term& y) { return x.c > y.c; });
  Search s{e, {}, {}, -1, max_work};
  if (e.n > 0 && e.t[e.n - 1].c == 1) s.unit = e.t[e.n - 1].u;
  for (size_t k = e.n; k-- > 0;) {
    s.rest[k] = s.rest[k + 1] + e.t[k].c * e.t[k].u;
    const bool last_unit = s.unit >= 0 && k + 1 == e.n;
    s.gcd[k] = last_unit ? 0 : gcd_of(e.t[k].c, s.gcd[k + 1]);
  }
  if (e.r < 0 || e.r > s.rest[0]) return Sharing::None;
  return s.from(0, e.r);
}

// The stride of dim d in elements.
int64_t stride_of(const ByteView& v, size_t d) {
  int64_t contiguous = 1;
  for (size_t k = d + 1; k < v.shape.size(); ++k) contiguous *= v.shape[k];
  return v.strides.empty() ? contiguous : v.strides[d];
}

}  // namespace

Sharing views_share_bytes(const ByteView& a, const ByteView& b, int64_t max_work) {
  if (empty(a) || empty(b)) return Sharing::None;
  // a.addr + (a's terms) = b.addr + (b's terms)
  Equation e;
  e.r = static_cast<Wide>(b.addr) - static_cast<Wide>(a.addr);
  e.add_view(a, false);
  e.add_view(b, true);
  return solve(e, max_work);
}

Sharing view_overlaps_itself(const ByteView& v, int64_t max_work) {
  if (empty(v)) return Sharing::None;
  bool undecided = false;
  for (size_t k = 0; k < v.shape.size(); ++k) {
    if (v.shape[k] < 2) continue;
    // x_k = 1 + w (0 <= w <= n_k - 2), x_j = y_j - (n_j - 1) (0 <= y_j <= 2 (n_j - 1)) for j > k:
    //   s_k w + sum_j s_j y_j = sum_j s_j (n_j - 1) - s_k
    const Wide sk = stride_of(v, k);
    if (sk == 0) return Sharing::Some;  // x_k = 1, the rest 0
    Equation e;
    e.r = -sk;
    e.add(sk, v.shape[k] - 2, false);
    for (size_t j = k + 1; j < v.shape.size(); ++j) {
      const Wide sj = stride_of(v, j), nj = v.shape[j];
      e.r += sj * (nj - 1);
      e.add(sj, 2 * (nj - 1), false);
    }
    const Sharing s = solve(e, max_work);
    if (s == Sharing::Some) return s;
    undecided = undecided || s == Sharing::Unknown;
  }
  return undecided ? Sharing::Unknown : Sharing::None;
}

}  // namespace fusejit::jit
