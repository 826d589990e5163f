// Element and row values of a reduction group; see ir/reduce_group.h.
#include "ir/reduce_group.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "ir/reduce.h"

namespace fusejit::ir {

bool same_sizes(const Shape& a, const Shape& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const Dim& p, const Dim& q) { return p.size == q.size; });
}

namespace {

// A pass member's lane: its operand's compute type, or for argmax/argmin fj_red_arg {value; long
// long index} (16 bytes aligned to 8: every compute type is at most 8 bytes). {size, alignment}.
std::pair<int64_t, int64_t> lane_member(const Graph& g, NodeId r) {
  if (is_arg_reduction(g.node(r).op)) return {16, 8};
  const DType t = g.node(g.node(r).arg(0)).dtype;
  const int64_t s = dtype_size(is_half(t) ? DType::F32 : t);
  return {s, s};
}

// `s` broadcasts to `x` (NumPy right alignment, sizes).
bool broadcasts(const Shape& s, const Shape& x) {
  if (s.size() > x.size()) return false;
  const size_t off = x.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d)
    if (s[d].size != 1 && s[d].size != x[d + off].size) return false;
  return true;
}

struct Analyzer {
  const Graph& g;
  const FusionGroup& grp;
  ReduceGroupInfo info;
  std::set<NodeId> in_group;
  std::map<NodeId, int> depth;  // per node: the highest level of the reductions it reads (0: none)

  void fail(NodeId id, const std::string& why) {
    if (!info.problem.empty()) return;
    info.problem = fmt::format("v{}: {}", id, why);
    info.problem_node = id;
  }

  bool leaf_constant(NodeId a) const {
    const Op op = g.node(a).op;
    return op == Op::Const || op == Op::Param;
  }

  void reduction(NodeId id) {
    const Node& nd = g.node(id);
    if (nd.red.axes != grp.reduce_mask || !same_sizes(g.node(nd.arg(0)).shape, grp.iter_shape))
      fail(id, "a reduction over other axes or another shape than the group's");
    if (info.row.count(nd.arg(0))) fail(id, "reduces a row value");
    depth[id] = info.level[id] = depth[nd.arg(0)] + 1;
    info.levels = std::max(info.levels, info.level[id]);
    info.row.insert(id);
    for (NodeId r : info.reductions) {
      const Node& e = g.node(r);
      if (r >= id || info.same_as.count(r)) continue;
      if (e.op == nd.op && e.arg(0) == nd.arg(0) && e.red.axes == nd.red.axes && e.red.correction == nd.red.correction) {
        info.same_as[id] = r;
        break;
      }
    }
  }

  // Whether a value of shape `s` is per row by its structure: a literal 1 (or no dim) on every
  // reduced axis, whatever the dims are (at C = 1 the row [N, 1] also has the sizes of the iteration
  // space [N, C]); not where the iteration space's own reduced axes are literal 1s (rows of one
  // element, at any dims: such values are per element).
  bool per_row_by_structure(const Shape& s) const {
    if (!is_keepdim_row_shape(s, grp.iter_shape, grp.reduce_mask)) return false;
    for (size_t d = 0; d < grp.iter_shape.size(); ++d)
      if ((grp.reduce_mask >> d & 1) && (grp.iter_shape[d].size != 1 || grp.iter_shape[d].sym >= 0)) return true;
    return false;
  }

  // A node reading at least one row value: a row value itself when its shape is per row, else an
  // element value reading its row's values (the epilogue), which must then be in keepdim form.
  void reads_row(NodeId id) {
    const Node& nd = g.node(id);
    const Shape& x = grp.iter_shape;
    const Shape r = reduced_shape(x, grp.reduce_mask, false);
    auto keepdim_rows_only = [&] {
      for (int k = 0; k < nd.nargs; ++k)
        if (info.row.count(nd.arg(k)) && !is_keepdim_row_shape(g.node(nd.arg(k)).shape, x, grp.reduce_mask))
          fail(id, "reads a row value of the reduced shape (no keepdim), which broadcasts by NumPy's right alignment, "
                   "not per row");
    };
    // By the shape's structure first, then by sizes.
    if (per_row_by_structure(nd.shape) ||
        (!same_sizes(nd.shape, x) && is_keepdim_row_shape(nd.shape, x, grp.reduce_mask))) {
      keepdim_rows_only();
      info.row.insert(id);
    } else if (same_sizes(nd.shape, x)) {  // an element value
      keepdim_rows_only();
    } else if (same_sizes(nd.shape, r)) {
      for (int k = 0; k < nd.nargs; ++k) {
        const NodeId a = nd.arg(k);
        if (info.row.count(a) ? !same_sizes(g.node(a).shape, r) : !leaf_constant(a))
          fail(id, "a value of the reduced shape (no keepdim) reads an element value or an input");
      }
      info.row.insert(id);
    } else if (broadcasts(nd.shape, x)) {
      keepdim_rows_only();
    } else {
      fail(id, "a value that is neither per element nor per row");
    }
  }

  void outputs() {
    for (NodeId o : grp.outputs) {
      if (!in_group.count(o)) continue;
      const Shape& s = g.node(o).shape;
      if (!info.row.count(o) && !same_sizes(s, grp.iter_shape) &&
          !is_keepdim_row_shape(s, grp.iter_shape, grp.reduce_mask))
        fail(o, "an output that is neither per element nor per row");
    }
    for (NodeId i : grp.inputs)
      if (!broadcasts(g.node(i).shape, grp.iter_shape)) fail(i, "an input that does not broadcast to the iteration shape");
  }

  // A value computed from its operands: an element value, or a row value when it reads one.
  void non_reduction(NodeId id) {
    const Node& nd = g.node(id);
    bool any_row = false;
    for (int k = 0; k < nd.nargs; ++k) {
      any_row = any_row || info.row.count(nd.arg(k)) > 0;
      depth[id] = std::max(depth[id], depth[nd.arg(k)]);
    }
    if (any_row) {
      reads_row(id);
    } else if (per_row_by_structure(nd.shape)) {
      // Constant along the reduced axes (a bias of a column sum, a constant): a row value, computed
      // and written once per row, also where the rows have no elements.
      info.row.insert(id);
    } else if (!broadcasts(nd.shape, grp.iter_shape)) {
      fail(id, "an element value that does not broadcast to the iteration shape");
    }
  }

  void run() {
    in_group.insert(grp.nodes.begin(), grp.nodes.end());
    for (NodeId id : grp.nodes)
      if (is_reduction(g.node(id).op)) info.reductions.push_back(id);
    if (info.reductions.empty()) {  // elementwise: every output has the iteration shape (named dims too)
      for (NodeId o : grp.outputs)
        if (!(g.node(o).shape == grp.iter_shape)) fail(o, "an output without the group's iteration shape");
      return;
    }
    for (NodeId id : grp.nodes) {
      if (is_reduction(g.node(id).op)) reduction(id);
      else non_reduction(id);
    }
    outputs();
    for (NodeId o : grp.outputs) info.element_outputs = info.element_outputs || !info.row.count(o);
    passes();
  }

  // The group inputs loaded per element to compute `id` (codegen's element scope: it stops at row
  // values, which are computed once per row).
  void element_loads(NodeId id, std::set<NodeId>& seen, std::set<NodeId>& loads) const {
    if (!seen.insert(id).second) return;
    if (std::find(grp.inputs.begin(), grp.inputs.end(), id) != grp.inputs.end()) loads.insert(id);
    if (!in_group.count(id) || info.row.count(id)) return;
    for (int k = 0; k < g.node(id).nargs; ++k) element_loads(g.node(id).arg(k), seen, loads);
  }

  // Whether input `i` has a dim other than a literal 1 on a reduced axis (right-aligned to X).
  bool varies_along_row(NodeId i) const {
    const Shape& s = g.node(i).shape;
    const size_t off = grp.iter_shape.size() - s.size();
    for (size_t d = 0; d < s.size(); ++d)
      if ((grp.reduce_mask >> (d + off) & 1) && (s[d].size != 1 || s[d].sym >= 0)) return true;
    return false;
  }

  // Whether input `i` is the same in every row: a literal 1 (or no dim) on every kept axis that has
  // more than one row (right-aligned to X). Decided on the graph's dims, not the call's: a named dim
  // that a call sets to 1 still counts as rows.
  bool same_in_every_row(NodeId i) const {
    const Shape& s = g.node(i).shape;
    const size_t off = grp.iter_shape.size() - s.size();
    for (size_t d = 0; d < s.size(); ++d)
      if (!(grp.reduce_mask >> (d + off) & 1) && (s[d].size != 1 || s[d].sym >= 0)) return false;
    return true;
  }

  // The reductions' passes, level by level: the reductions of a level linked (transitively) by a
  // common per-element load, in passes of at most kMaxPassReductions members and kMaxLaneBytes;
  // and the inputs each pass loads.
  void group_passes(std::vector<std::set<NodeId>>& per_pass) {
    for (int level = 1; level <= info.levels; ++level) {
      std::vector<NodeId> rs;
      std::vector<std::set<NodeId>> loads;
      for (NodeId r : info.reductions) {
        if (info.same_as.count(r) || info.level.at(r) != level) continue;
        rs.push_back(r);
        std::set<NodeId> seen;
        element_loads(g.node(r).arg(0), seen, loads.emplace_back());
      }
      const std::vector<size_t> root = linked(loads);
      for (size_t c = 0; c < rs.size(); ++c) {
        if (root[c] != c) continue;
        bool room = false;  // the last pass is this component's and not full
        for (size_t i = c; i < rs.size(); ++i) {
          if (root[i] != c) continue;
          if (!room || !room_in_pass(info.passes.back(), rs[i])) {
            info.passes.emplace_back();
            per_pass.emplace_back();
            room = true;
          }
          info.passes.back().push_back(rs[i]);
          per_pass.back().insert(loads[i].begin(), loads[i].end());
        }
      }
    }
    for (std::vector<NodeId>& p : info.passes) widest_first(p);
  }

  // A pass's members widest first (the least padding in the lane), then by id.
  void widest_first(std::vector<NodeId>& p) const {
    std::sort(p.begin(), p.end(), [&](NodeId a, NodeId b) {
      return compute_size(a) != compute_size(b) ? compute_size(a) > compute_size(b) : a < b;
    });
  }

  // Whether reduction r joins pass p: at most kMaxPassReductions members in a lane of at most
  // kMaxLaneBytes (two argmax lanes of 16 bytes fill one).
  bool room_in_pass(const std::vector<NodeId>& p, NodeId r) const {
    if (p.size() >= kMaxPassReductions) return false;
    std::vector<NodeId> with = p;
    with.push_back(r);
    widest_first(with);
    return pass_lane_bytes(g, with) <= kMaxLaneBytes;
  }

  // For each set, the first set linked to it through common members (a chain of them).
  static std::vector<size_t> linked(const std::vector<std::set<NodeId>>& loads) {
    std::vector<size_t> root(loads.size());
    for (size_t i = 0; i < loads.size(); ++i) {
      root[i] = i;
      for (size_t j = 0; j < i; ++j) {
        if (std::none_of(loads[i].begin(), loads[i].end(), [&](NodeId x) { return loads[j].count(x) > 0; })) continue;
        const size_t lo = std::min(root[i], root[j]), hi = std::max(root[i], root[j]);
        for (size_t k = 0; k <= i; ++k)
          if (root[k] == hi) root[k] = lo;
      }
    }
    return root;
  }

  int64_t compute_size(NodeId r) const { return lane_member(g, r).first; }

  // Whether group value `id` is, or is computed from, one of the group's reductions.
  bool from_reduction(NodeId id, std::set<NodeId>& seen) const {
    if (!in_group.count(id) || !seen.insert(id).second) return false;
    if (is_reduction(g.node(id).op)) return true;
    for (int k = 0; k < g.node(id).nargs; ++k)
      if (from_reduction(g.node(id).arg(k), seen)) return true;
    return false;
  }

  // Whether element value `id` reads, in its element scope, a row value that is known only once a
  // reduction is: a row value of inputs alone (`w * 2` of a bias w beside a column sum) is
  // computed before the first pass, so the element outputs that read it can still be written in it.
  bool reads_row(NodeId id, std::set<NodeId>& seen) const {
    if (info.row.count(id)) return from_reduction(id, seen);
    if (!in_group.count(id) || !seen.insert(id).second) return false;
    for (int k = 0; k < g.node(id).nargs; ++k)
      if (reads_row(g.node(id).arg(k), seen)) return true;
    return false;
  }

  // passes, input_passes and reread_inputs: the reductions' passes, one for the element outputs
  // unless they are written in the one pass (early_outputs).
  void passes() {
    std::vector<std::set<NodeId>> per_pass;
    group_passes(per_pass);
    std::set<NodeId> seen, loads, scope;
    bool row_free = true;
    for (NodeId o : grp.outputs)
      if (in_group.count(o) && !info.row.count(o)) {
        element_loads(o, seen, loads);
        row_free = row_free && !reads_row(o, scope);
      }
    info.early_outputs = info.element_outputs && row_free && per_pass.size() == 1 && info.levels == 1;
    if (info.early_outputs) per_pass[0].insert(loads.begin(), loads.end());
    else per_pass.push_back(loads);
    for (const std::set<NodeId>& p : per_pass)
      for (NodeId i : p) ++info.input_passes[i];
    for (NodeId i : grp.inputs)
      if (info.input_passes.count(i) && info.input_passes[i] >= 2 && varies_along_row(i)) info.reread_inputs.push_back(i);
    auto shared = std::stable_partition(info.reread_inputs.begin(), info.reread_inputs.end(),
                                        [&](NodeId i) { return !same_in_every_row(i); });
    info.per_row_inputs = static_cast<size_t>(shared - info.reread_inputs.begin());
    keep_values();
    count_pass_ops();
  }

  // pass_ops: the element values each pass computes (pass_values of its reductions' operands), and
  // the epilogue's (of the element outputs); early outputs are computed in the one pass, each value
  // once with the reductions' operands.
  void count_pass_ops() {
    std::set<NodeId> epilogue;
    for (NodeId o : grp.outputs)
      if (in_group.count(o) && !info.row.count(o)) pass_values(o, epilogue);
    for (size_t k = 0; k < info.passes.size(); ++k) {
      std::set<NodeId> values;
      if (k == 0 && info.early_outputs) values.swap(epilogue);
      for (NodeId r : info.passes[k]) pass_values(g.node(r).arg(0), values);
      info.pass_ops += static_cast<int64_t>(values.size());
    }
    info.pass_ops += static_cast<int64_t>(epilogue.size());  // none left with early outputs
  }

  // An op whose GPU code is long (~10 instructions or more a value): a CUDA Math API call, an IEEE
  // division or square root (a Newton-Raphson sequence with a slow path), an integer division.
  static bool costly_op(Op op) {
    const OpAccuracy a = op_info(op).gpu;
    return a == OpAccuracy::Math || a == OpAccuracy::Composite || op == Op::Div || op == Op::Sqrt ||
           op == Op::Rsqrt || op == Op::Reciprocal || op == Op::FloorDiv || op == Op::Mod || op == Op::Fmod;
  }

  // Whether element value `id` has a costly op in its element scope (memo: per node).
  bool costly(NodeId id, std::map<NodeId, bool>& memo) const {
    if (!in_group.count(id) || info.row.count(id)) return false;
    if (auto it = memo.find(id); it != memo.end()) return it->second;
    bool c = costly_op(g.node(id).op);
    for (int k = 0; k < g.node(id).nargs && !c; ++k) c = costly(g.node(id).arg(k), memo);
    return memo[id] = c;
  }

  // The element values of the passes' element scopes.
  void pass_values(NodeId id, std::set<NodeId>& out) const {
    if (!in_group.count(id) || info.row.count(id) || !out.insert(id).second) return;
    for (int k = 0; k < g.node(id).nargs; ++k) pass_values(g.node(id).arg(k), out);
  }

  // The epilogue's walk from `id` down to the first costly values a pass computes (kept_values).
  void epilogue_walk(NodeId id, const std::set<NodeId>& in_passes, std::map<NodeId, bool>& memo, std::set<NodeId>& seen,
                     std::set<NodeId>& kept) const {
    if (!in_group.count(id) || info.row.count(id) || !seen.insert(id).second) return;
    if (in_passes.count(id) && costly(id, memo) && !is_half(g.node(id).dtype)) {
      kept.insert(id);
      return;
    }
    for (int k = 0; k < g.node(id).nargs; ++k) epilogue_walk(g.node(id).arg(k), in_passes, memo, seen, kept);
  }

  // kept_values: only where an epilogue follows the passes and the rows may be on chip.
  void keep_values() {
    if (!info.epilogue() || info.reread_inputs.empty() || !reduces_innermost(grp)) return;
    std::set<NodeId> in_passes, seen, kept;
    for (const std::vector<NodeId>& p : info.passes)
      for (NodeId r : p) pass_values(g.node(r).arg(0), in_passes);
    std::map<NodeId, bool> memo;
    for (NodeId o : grp.outputs)
      if (in_group.count(o) && !info.row.count(o)) epilogue_walk(o, in_passes, memo, seen, kept);
    info.kept_values.assign(kept.begin(), kept.end());
  }
};

}  // namespace

bool is_keepdim_row_shape(const Shape& s, const Shape& x, uint64_t mask) {
  if (s.size() > x.size()) return false;
  const size_t off = x.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d) {
    const Dim& a = s[d];
    const Dim& b = x[d + off];
    if (mask >> (d + off) & 1) {
      if (a.size != 1 || a.sym >= 0) return false;
    } else if (a.size != 1 && a.size != b.size) {
      return false;
    }
  }
  return true;
}

ReduceGroupInfo analyze_reduce_group(const Graph& g, const FusionGroup& grp) {
  Analyzer a{g, grp, {}, {}, {}};
  a.run();
  return std::move(a.info);
}

int64_t choose_row_split(int64_t rows, int64_t row_len) {
  // A further launch costs microseconds; a row of 8 chunks keeps one block busy for longer (on an
  // H200, one row of 128,256 f32: 0.106 ms in one block, 0.030 ms in 8 parts). Beyond 16 rows only
  // rows of 32 chunks split: shorter ones may fit the row cache, which a split row leaves.
  if (rows <= 0 || reduce_chunks(row_len) < (rows <= 16 ? 8 : 32)) return 1;
  const int64_t parts = std::min({reduce_chunks(row_len) / 2, int64_t{512}, 1024 / rows});
  return parts >= 2 ? parts : 1;
}

int64_t pass_lane_bytes(const Graph& g, std::span<const NodeId> pass) {
  // fj_red_two<A, fj_red_two<B, ...>>: the last member alone, then each earlier one in front.
  int64_t size = 0, align = 1;
  for (size_t k = pass.size(); k-- > 0;) {
    const auto [s, sa] = lane_member(g, pass[k]);
    if (size == 0) {
      size = s;
      align = sa;
      continue;
    }
    const int64_t a = std::max(sa, align), offset = (s + align - 1) / align * align;
    size = (offset + size + a - 1) / a * a;
    align = a;
  }
  return size;
}

int64_t lane_bytes(const Graph& g, const ReduceGroupInfo& info) {
  int64_t bytes = 1;
  for (const std::vector<NodeId>& pass : info.passes) bytes = std::max(bytes, pass_lane_bytes(g, pass));
  return bytes;
}

int column_rows_per_block(const Graph& g, const ReduceGroupInfo& info) {
  const int64_t bytes = 256 * lane_bytes(g, info);
  int rows = 32;
  // The lane buffers and the rest of the kernel's static shared memory (the warp tree's result per
  // lane type; ptxas adds about 1 KiB for sm_90) must fit 48 KiB: lanes of 12, 24 or 48 bytes filled
  // it exactly and failed to compile for sm_90.
  while (rows > 1 && rows * bytes > 48 * 1024 - kColumnStaticReserve) rows /= 2;
  return rows;
}

int64_t choose_column_split(int64_t groups, int64_t row_len) {
  const int64_t chunks = reduce_chunks(row_len);
  if (groups <= 0 || groups >= 512 || chunks < 2) return 1;
  const int64_t parts = std::min(chunks, 1024 / groups);
  return parts >= 2 ? parts : 1;
}

int64_t choose_split(bool block_rows, int64_t rows, int64_t rows_per_block, int64_t row_len) {
  if (block_rows) return choose_row_split(rows, row_len);
  const int64_t rpb = std::max<int64_t>(1, rows_per_block);
  return choose_column_split(ceil_div(rows, rpb), row_len);
}

int64_t blocks_per_row(const SplitRules& rules, bool block_rows, int64_t rows, int64_t rows_per_block, int64_t row_len) {
  if (rules.row_split == 0) return choose_split(block_rows, rows, rows_per_block, row_len);
  return std::min(rules.row_split, std::max<int64_t>(reduce_chunks(row_len), 1));
}

bool reduces_innermost(const FusionGroup& grp) {
  for (size_t d = grp.iter_shape.size(); d-- > 0;)
    if (grp.iter_shape[d].size != 1 || grp.iter_shape[d].sym >= 0) return (grp.reduce_mask >> d & 1) != 0;
  return false;
}

int64_t row_cache_bytes(std::span<const int> element_sizes, int64_t row_len) {
  int64_t bytes = 0;
  for (int size : element_sizes) {  // saturating: a row of 2^60 elements is a valid (unrunnable) graph
    const int64_t row = mul_bytes(row_len, size);
    bytes = add_bytes(bytes, row > INT64_MAX - 15 ? INT64_MAX : (row + 15) / 16 * 16);
  }
  return bytes;
}

int64_t row_cache_at(std::span<const int> element_sizes, int64_t row_len, int64_t blocks_per_row, int64_t limit) {
  const int64_t bytes = row_cache_bytes(element_sizes, row_len);
  // A saturated size (INT64_MAX) is a row no memory holds: never on chip, whatever the limit.
  return blocks_per_row == 1 && bytes < INT64_MAX && bytes <= limit ? bytes : 0;
}

std::vector<int> row_cache_element_sizes(const Graph& g, const ReduceGroupInfo& info) {
  std::vector<int> sizes;
  for (NodeId i : info.reread_inputs) sizes.push_back(static_cast<int>(dtype_size(g.node(i).dtype)));
  return sizes;
}

std::vector<int> kept_value_sizes(const Graph& g, const ReduceGroupInfo& info) {
  std::vector<int> sizes;
  for (NodeId v : info.kept_values) sizes.push_back(static_cast<int>(dtype_size(g.node(v).dtype)));
  return sizes;
}

bool short_row(int64_t input_bytes, int64_t row_len) {
  return row_len <= kShortRowElements && input_bytes <= kShortRowBytes;
}

RowCacheUse row_cache_use(std::span<const int> input_sizes, std::span<const int> value_sizes, int64_t row_len,
                          int64_t blocks_per_row, int64_t limit, bool short_rows, size_t per_row) {
  const int64_t inputs = row_cache_at(input_sizes, row_len, blocks_per_row, limit);
  if (inputs == 0 && per_row > 0 && per_row < input_sizes.size())
    if (const int64_t some = row_cache_at(input_sizes.first(per_row), row_len, blocks_per_row, limit);
        some > 0 && !(short_rows && short_row(some, row_len)))  // the rows it would keep are short: re-read
      return {3, some};
  if (inputs == 0 || (short_rows && short_row(inputs, row_len))) return {};
  if (!value_sizes.empty()) {
    std::vector<int> all(input_sizes.begin(), input_sizes.end());
    all.insert(all.end(), value_sizes.begin(), value_sizes.end());
    const int64_t both = row_cache_at(all, row_len, blocks_per_row, std::min(limit, kKeptValuesCacheBytes));
    if (both > 0) return {2, both};
  }
  return {1, inputs};
}

RowSplit row_split_at(const Graph& g, const FusionGroup& grp, const ReduceGroupInfo& info, const SplitRules& rules) {
  RowSplit r;
  r.block_rows = reduces_innermost(grp);
  if (info.reductions.empty()) return r;
  const int64_t row_len = reduce_length(grp.iter_shape, grp.reduce_mask);
  const int64_t rows = num_elements(reduced_shape(grp.iter_shape, grp.reduce_mask, false));
  r.blocks_per_row = blocks_per_row(rules, r.block_rows, rows, r.block_rows ? 1 : column_rows_per_block(g, info), row_len);
  if (r.blocks_per_row > 1) r.launches = 2 * info.levels + (info.epilogue() ? 1 : 0);
  if (launches_nothing(g, grp)) r.launches = 0;  // as the launcher (jit/launch.cpp)
  const bool short_rows = rules.short_rows && grp.vector_rows;  // as the launcher: vector rows only
  if (r.block_rows && r.blocks_per_row == 1 && !info.reread_inputs.empty())
    r.short_rows = short_rows && short_row(row_cache_bytes(row_cache_element_sizes(g, info), row_len), row_len);
  if (r.block_rows && rules.row_cache && rows > 0) {  // no rows: nothing launches, nothing on chip
    const std::vector<int> values = rules.kept_values ? kept_value_sizes(g, info) : std::vector<int>{};
    const RowCacheUse use = row_cache_use(row_cache_element_sizes(g, info), values, row_len, r.blocks_per_row,
                                          rules.row_cache_limit, short_rows, info.per_row_inputs);
    r.row_cache_bytes = use.bytes;
    r.values_on_chip = use.mode == 2;
    r.shared_rows_reread = use.mode == 3;
  }
  return r;
}

}  // namespace fusejit::ir
