// Reduction kernels with real threads per block, through the library's whole GPU path: samples and
// hostile graphs are compiled for the fake GPU (tests/support/fake_gpu.h; NVRTC for sm_90), each
// launch runs with the grid and block the launcher chose from the fake device's answers, and each
// block of a reduction kernel runs as that many host threads (jit::HostCompileOptions::
// block_threads): the lane arrays written by many threads, the warp tree's shuffles, several rows
// or columns per block, the row cache filled by the block, a row split over blocks. Devices of
// 32 to 768 threads per block, 1 to 3 SMs, the row cache on and off, rows split or whole: the
// fused and the unfused plan give the reference evaluator's bits on finite random inputs and on
// inputs with special values (NaN, inf, -0.0, subnormals, extremes); random graphs with an axis
// of size 0 too.
// Until a GPU runs the same (scripts/device-check.sh), this is where a missing __syncthreads() or
// a wrong lane index shows.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include <fusejit/fusejit.h>

#include "ir/printer.h"
#include "ir/reference.h"
#include "tests/support/fake_gpu.h"
#include "tests/support/cpu_check.h"
#include "tests/support/random_graph.h"
#include "tests/support/samples.h"

namespace fj = fusejit;

namespace {

// A fake device's answers and the options that change how reductions launch.
struct Device {
  const char* name;
  int occ_block, sm_count, blocks_per_sm;
  bool row_cache = true;
  int64_t row_split = 0;
};

const Device kDevices[] = {
    {"768 threads, 2 SMs", 768, 2, 1},   // reductions at 256 threads (256 / V re-reading short rows with
                                         // vectors; 768 over long rows on chip), columns at 768
    {"96 threads, 3 SMs", 96, 3, 2},     // three warps: not a power of two
    {"32 threads, 1 SM", 32, 1, 1},      // one warp per block, one block at a time
    {"256 threads, no row cache", 256, 2, 1, false},
    {"128 threads, rows split in 3", 128, 2, 1, true, 3},
};

struct Case {
  std::string label;
  fj::Graph graph;
  // Rows of 16,384 elements or more on chip: the first device (768 threads) launches the kernel's
  // long-row entry ("_l"), whose block reduces 3 chunks at once (fj_red_chunk_range).
  bool long_rows = false;
};

// Whether `g` has reductions and every one has rows of no elements (a reduced axis of size 0): its
// kernels then have nothing to combine and launch one thread a block (random graph 9503: N = 0).
bool rows_all_empty(const fj::Graph& g) {
  const std::vector<fj::NodeInfo> nodes = g.nodes();
  bool any = false;
  for (const fj::NodeInfo& n : nodes) {
    if (n.axes.empty()) continue;
    any = true;
    int64_t length = 1;
    for (int64_t a : n.axes) length *= nodes[static_cast<size_t>(n.operands[0])].shape[static_cast<size_t>(a)];
    if (length > 0) return false;
  }
  return any;
}

// Random graphs heavy in reductions (sum ... argmin over random axes, softmax, a value normalised
// by its own reduction), tiny dims: many rows of 1 to 4 elements, most of a block's threads idle.
// With `zero_dims`, each has an axis of size 0: empty launches, and reductions over an empty axis
// writing their identities.

std::vector<Case> random_cases(int count, bool zero_dims = false) {
  std::vector<Case> c;
  for (int k = 0; k < count; ++k) {
    fusejit::testing::RandomGraphOptions o;
    o.seed = (zero_dims ? 9500 : 9000) + static_cast<uint64_t>(k);
    o.num_ops = 14;
    o.reduction_rate = 0.35;
    o.normalize_rate = 0.3;
    o.zero_dim_rate = zero_dims ? 1.0 : 0.0;
    c.push_back({"random graph " + std::to_string(o.seed),
                 fj::Graph::parse(fusejit::ir::print_graph(fusejit::testing::random_graph(o)))});
  }
  return c;
}

std::vector<Case> cases() {
  std::vector<Case> c;
  auto sample = [&](const char* file, fj::DimValues dims) {
    c.push_back({file, fj::Graph::load(fusejit::testing::sample_path(file), dims)});
  };
  sample("softmax.txt", {{"N", 5}, {"C", 1000}});  // short rows: re-read on the vector path
  sample("softmax.txt", {{"N", 3}, {"C", 3000}});  // on chip with kept values (row_cache 2)
  sample("layernorm.txt", {{"N", 3}, {"C", 2500}});
  sample("softmax_bf16.txt", {{"N", 3}, {"C", 1002}});
  sample("layernorm.txt", {{"N", 5}, {"C", 700}});
  sample("rmsnorm.txt", {{"T", 3}, {"D", 1000}});
  sample("residual_rmsnorm.txt", {{"T", 3}, {"D", 999}});
  sample("rmsnorm_decode.txt", {{"T", 1}, {"D", 20000}});
  c.back().long_rows = true;
  sample("softmax.txt", {{"N", 2}, {"C", 16384 + 3}});  // 3 chunks, the last of 3 elements: kept values
  c.back().long_rows = true;
  sample("softmax_bf16.txt", {{"N", 2}, {"C", 5 * 8192 + 7}});  // 6 chunks: 2 rounds of 3 (80 KiB on chip)
  c.back().long_rows = true;
  sample("logsumexp.txt", {{"N", 4}, {"V", 3000}});
  // Scores' and mask's rows take 96,000 B: on chip on a GPU with room for both, else the scores'
  // only, the mask re-read (row_cache 3).
  sample("masked_softmax.txt", {{"H", 2}, {"T", 2}, {"S", 12000}});
  sample("greedy_decode.txt", {{"B", 3}, {"V", 9000}});
  sample("bias_grad.txt", {{"N", 300}, {"C", 70}});
  sample("grad_norm.txt", {{"N", 40000}});
  sample("nchw_normalize.txt", {{"N", 2}, {"C", 3}, {"H", 17}, {"W", 19}});
  sample("amp_unscale.txt", {{"N", 7}, {"C", 1000}});
  auto text = [&](const char* label, const char* t) { c.push_back({label, fj::Graph::parse(t)}); };
  // Columns: three results per pass, f64 lanes; argmax/argmin pairs (16-byte lanes).
  text("columns f64", "graph c\ninput x : f64[300, 45]\na = sum(x, 0)\nb = amax(x, 0)\nc = amin(x, 0)\n"
                      "i = argmax(x, 0)\noutput a, b, c, i\n");
  text("column norm bf16", "graph c\ninput x : bf16[3000, 7] range -4:4\nmu = mean(x, 0, keepdim)\nd = x - mu\n"
                           "v = mean(d * d, 0, keepdim)\ny = d * rsqrt(v + 1e-5)\nam = argmax(x, 0)\noutput y, am\n");
  text("rows of two arg passes", "graph r\ninput x : f64[3, 3000]\na = argmax(x, -1)\nb = argmin(x, -1)\n"
                                 "s = sum(x, -1)\nm = amax(x, -1)\noutput a, b, s, m\n");
  text("middle axis f16", "graph m\ninput x : f16[3, 100, 5] range -4:4\ns = softmax(x, 1)\noutput s\n");
  text("u8 and bool rows", "graph u\ninput x : u8[3, 3001]\ninput b : bool[3, 3001]\ns = sum(x, -1)\n"
                           "p = prod(b, -1)\nm = amax(x, -1)\nk = argmin(x, -1)\noutput s, p, m, k\n");
  text("whole tensor", "graph a\ninput x : f32[30, 700]\ns = sum(x)\nm = argmax(x)\nv = var(x, [0, 1])\noutput s, m, v\n");
  text("rows of two dims", "graph r\ninput x : f32[3, 12, 100] range -4:4\nm = amax(x, [1, 2], keepdim)\n"
                           "e = exp(x - m)\ny = e / sum(e, [1, 2], keepdim)\noutput y\n");
  text("short rows broadcast", "graph r\ninput x : f32[64, 2, 6]\ninput w : f32[64, 1, 6]\n"
                               "s = sum(x * w, [1, 2], keepdim)\ny = x * w - s\noutput y\n");
  text("i8 row sums", "graph i\ninput x : i8[2, 9001]\ns = sum(x, -1)\nm = amax(x, -1)\nn = amin(x, -1)\noutput s, m, n\n");
  return c;
}

// Whether every element of a float tensor with elements is NaN: compared with such a tensor, a
// kernel's NaN passes whatever order it combined the row in (testing::identical).
bool all_nan(const fusejit::ir::Tensor& t) {
  if (!fusejit::ir::is_float(t.dtype) || t.numel() == 0) return false;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (!std::isnan(t.get(i).f)) return false;
  return true;
}

// Launches `c`'s fused and unfused plans on the first `devices` devices of kDevices, on finite
// inputs (`special` 0: testing::finite_inputs) or inputs with about `special` of their elements
// special (random_inputs), and compares each output with the reference's bits.
// `nan_at` >= 0: that element of the first input is NaN, the rest finite.
void check_devices(const Case& c, double special, size_t devices, int64_t nan_at = -1) {
  CAPTURE(c.label);
  CAPTURE(special);
  CAPTURE(nan_at);
  const fusejit::ir::Graph& g = c.graph.impl().graph;
  std::vector<fusejit::ir::Tensor> in =
      special > 0 ? fusejit::testing::random_inputs(g, 11, special) : fusejit::testing::finite_inputs(g, 11);
  if (nan_at >= 0) in[0].set(nan_at, fusejit::ir::Scalar{in[0].dtype, std::nan(""), 0});
  const std::vector<fusejit::ir::Tensor> want = fusejit::ir::evaluate_reference(g, in);
  // On finite inputs the comparison has something to compare: no output is NaN throughout.
  if (special == 0 && nan_at < 0)
    for (size_t k = 0; k < want.size(); ++k) CHECK_MESSAGE(!all_nan(want[k]), c.graph.outputs()[k].name, " is all NaN");
  std::vector<const void*> in_ptrs;
  for (const auto& t : in) in_ptrs.push_back(t.data.data());
  for (const Device& d : std::span(kDevices).first(devices)) {
    const std::string device = d.name;
    CAPTURE(device);
    fake_gpu::FakeGpu gpu;
    fake_cuda::st().occ_block = d.occ_block;
    fake_cuda::st().sm_count = d.sm_count;
    fake_cuda::st().occ_blocks_per_sm = d.blocks_per_sm;
    fj::Options o;
    o.backend = fj::Backend::Cuda;
    o.row_cache = d.row_cache;
    o.row_split = d.row_split;
    const fj::Program p = fj::Program::compile(c.graph, o);
    auto keep = fake_gpu::emulate(p, {.block_threads = true});
    for (fj::PlanKind kind : {fj::PlanKind::Fused, fj::PlanKind::Unfused}) {
      const std::string plan = kind == fj::PlanKind::Fused ? "fused" : "unfused";
      CAPTURE(plan);
      std::vector<fusejit::ir::Tensor> got;
      std::vector<void*> out_ptrs;
      for (const auto& t : want) {
        got.emplace_back(t.dtype, t.shape);
        std::memset(got.back().data.data(), 0xA5, got.back().data.size());  // no stale right answer
      }
      for (auto& t : got) out_ptrs.push_back(t.data.data());
      fake_cuda::st().keep_launches = true;
      fake_cuda::st().launches.clear();
      p.launch(in_ptrs, out_ptrs, {}, nullptr, kind);
      for (size_t k = 0; k < want.size(); ++k) {
        std::string why;
        CHECK_MESSAGE(fusejit::testing::identical(got[k], want[k], why), c.graph.outputs()[k].name, ": ", why);
      }
      // The reduction launches ran with the device's threads: at most its occupancy answer, and
      // more than one thread.
      bool threads = false, long_entry = false;
      for (const fake_cuda::Launch& l : fake_cuda::st().launches) {
        CHECK(l.block <= static_cast<unsigned>(d.occ_block));
        threads = threads || l.block > 1;
        long_entry = long_entry || (l.kernel.ends_with("_l") && l.block == 768);
      }
      CHECK((threads || rows_all_empty(c.graph)));
      if (c.long_rows && &d == &kDevices[0] && kind == fj::PlanKind::Fused) CHECK(long_entry);
    }
  }
}

}  // namespace

TEST_CASE("reduction kernels run with a host thread per CUDA thread: every fake device gives the reference's bits") {
  for (const Case& c : cases())
    // Finite values (the order of a row's combination decides their bits), then a few special ones
    // (NaN, inf, -0.0, subnormals, extremes: a row with a NaN in it is all NaN after a softmax, so
    // most rows must have none).
    for (double special : {0.0, 0.003}) check_devices(c, special, std::size(kDevices));
}

// A split row's combining block pairs its chunk values 256 at a time in shared memory
// (fj_red_combine_chunks): a whole-tensor reduction of 257 chunks, a whole group and one more.
TEST_CASE("a row split into more than 256 chunks: the combining block gives the reference's bits") {
  const Case c{"257 chunks", fj::Graph::parse("graph a\ninput x : f32[2105000]\ns = sum(x)\nm = amax(x)\n"
                                              "p = sum(x * x)\noutput s, m, p\n")};
  check_devices(c, 0.0, std::size(kDevices));  // finite: one NaN among 2,105,000 elements decides all three
  check_devices(c, 0.0, 2, 2104999);           // and one NaN, in the last chunk: carried through the combine
}

TEST_CASE("random graphs with reductions, with a host thread per CUDA thread, give the reference's bits") {
  for (const Case& c : random_cases(10)) check_devices(c, 0.05, 2);
  for (const Case& c : random_cases(4, true)) check_devices(c, 0.05, 2);
}
