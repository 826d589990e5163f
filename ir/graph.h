// The graph IR: a flat, topologically ordered array of nodes in SSA form (a node's operands
// always have smaller ids). Passes never mutate a graph in place while matching; they build a
// new one (see ir/builder.h). Every non-leaf node's operands already have the dtype the op
// computes in: implicit conversions from promotion are explicit Cast nodes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/error.h"
#include "ir/op.h"

namespace fusejit::ir {

using NodeId = int32_t;
inline constexpr NodeId kNoNode = -1;

// One dimension of a shape: its current size and, if it was written as a named dim, that dim's
// index in Graph::dims (sym >= 0). Literal dims have sym == -1.
struct Dim {
  int64_t size = 1;
  int32_t sym = -1;
  friend bool operator==(const Dim&, const Dim&) = default;
};
// Row-major (C order) shape; empty for a 0-d tensor (one element).
using Shape = std::vector<Dim>;
// Most dimensions a tensor may have (NumPy's limit, NPY_MAXDIMS = 64, so every tensor can be
// saved as .npy and read back).
inline constexpr size_t kMaxRank = 64;

struct Graph;

// Number of elements of a shape (product of sizes; 1 for 0-d). Shapes in a built graph are
// checked not to overflow int64.
int64_t num_elements(const Shape& s);
// Whether the non-zero sizes of a shape (each >= 0) multiply past 2^63 - 1. A shape with a 0 has
// no elements, but strides, row counts and the other dims' products are computed from the other
// sizes: [2^40, 2^40, 0] is refused as [2^40, 2^40] is, in whatever order its sizes come.
bool element_count_overflows(const Shape& s);
// The message of a shape refused by element_count_overflows: "whose element count overflows 64
// bits", or for a shape with a 0, that the product of its other sizes does.
std::string overflow_reason(const Shape& s);
// "[N=8192, 4096]" style text for messages and reports.
std::string shape_to_string(const Shape& s, const Graph* g = nullptr);

// Most nodes a graph holds (inputs, params, constants and ops), parsed or built by the public
// builders (their ir::GraphBuilder has limit_nodes(): push refuses the next one), so every graph
// prints as text that parses back; passes that rebuild a graph (rewrites) are not limited.
// Parsing needs about 320 bytes per node at its peak (measured, docs/graph-format.md), so a graph
// file never costs more than about 350 MB.
inline constexpr uint64_t kMaxGraphNodes = uint64_t{1} << 20;

// A typed scalar value. Floats (f16, bf16, f32, f64) are held in `f`, already rounded to the
// dtype (so printing `f` with 17 significant digits round-trips); bool and integers in `i`.
struct Scalar {
  DType dtype = DType::F32;
  double f = 0.0;
  int64_t i = 0;
  // Bitwise equality (NaN == NaN with the same bits; -0.0 != 0.0).
  bool same_as(const Scalar& o) const;
};

// What a reduction node reduces (ir/reduce.h): the bit mask of its operand's reduced axes (bit k:
// axis k) and whether they stay as size-1 dims; for mean, the correction: the sum is divided by
// max(0, n - correction) (PyTorch's var/std `correction`; 0 for a plain mean); for a float amax or
// amin, `initial`: it starts from its identity -inf / +inf as NumPy's `initial=` says, so zero
// elements give that value instead of an error (the composites' max: torch.logsumexp of nothing is
// -inf). Zero for every other op.
struct ReduceAttr {
  uint64_t axes = 0;
  bool keepdim = false;
  int64_t correction = 0;
  bool initial = false;
  friend bool operator==(const ReduceAttr&, const ReduceAttr&) = default;
};

// A field code generation reads must also go into jit::structural_key (jit/gpu_build.cpp), which
// finds a compiled kernel by it before generating code.
struct Node {
  Op op = Op::Const;
  DType dtype = DType::F32;
  Shape shape;
  std::array<NodeId, 3> args{kNoNode, kNoNode, kNoNode};
  uint8_t nargs = 0;
  Scalar value;         // Const only: the value (dtype == node dtype)
  int32_t slot = -1;    // Input: index into Graph::inputs; Param: index into Graph::params
  ReduceAttr red;       // reductions only: reduced axes, keepdim
  std::string name;     // user-visible name ("" for unnamed temporaries)
  Loc loc;              // where the node was written; {} if built through the API
  NodeId arg(int k) const { return args[k]; }
};

struct DimDecl {
  std::string name;
  int64_t value = 1;  // current value (default from the text, or overridden with --dim)
  Loc loc;
};

struct ParamDecl {
  NodeId node = kNoNode;  // the Param node (0-d, dtype of the param)
  Scalar default_value;   // value used when the run gives none
};

// The range [lo, hi) that generated (random) values of an input are drawn from when a run gives
// none (`input x : f32[N] range 0:1` in the graph text; `--range` overrides it). Unset (lo >= hi):
// the run's default. A property of the test data, never of the kernels.
struct ValueRange {
  double lo = 0.0;
  double hi = 0.0;
  bool set() const { return lo < hi; }
  friend bool operator==(const ValueRange&, const ValueRange&) = default;
};

struct OutputDecl {
  std::string name;
  NodeId node = kNoNode;
  Loc loc;
};

struct Graph {
  std::string name;                 // from `graph NAME`; "" if none
  std::string file;                 // source file name for diagnostics; "" if built in code
  // True where a tracer gave the locations (fusejit::GraphBuilder::set_location: Python's lines):
  // `file` is the user's source, no graph file, so an ahead-of-time folder names none. Kernels'
  // comments show the lines as a graph file's ("[model.py:12]"); kernel names and disk cache keys
  // leave every location comment out (jit/source_key.h), so code moved in its file keeps its kernels.
  bool traced_file = false;
  std::vector<DimDecl> dims;
  std::vector<Node> nodes;          // topological order
  std::vector<NodeId> inputs;       // Input nodes, in declaration order (slot == index)
  std::vector<ValueRange> input_ranges;  // per input slot (same length as inputs)
  std::vector<ParamDecl> params;    // in declaration order (slot == index)
  std::vector<OutputDecl> outputs;  // in declaration order

  const Node& node(NodeId id) const { return nodes[static_cast<size_t>(id)]; }
  Node& node(NodeId id) { return nodes[static_cast<size_t>(id)]; }
  int size() const { return static_cast<int>(nodes.size()); }
  // A graph with this one's header (name, file, traced_file, dims) and no nodes: what a
  // pass that rebuilds a graph (dce, rewrite) starts from, so a header field added above is kept
  // by every pass (a reviewer's find: each copied the fields itself).
  Graph header() const;
  // Number of non-leaf nodes (the "op count" reported to users).
  int op_count() const;
};

// Structural equality: same dims, inputs (and their ranges), params, outputs and nodes (op, dtype, shape, operands,
// constant bits, slots, names). Locations and the file name are ignored.
bool structurally_equal(const Graph& a, const Graph& b);

}  // namespace fusejit::ir
