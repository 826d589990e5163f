// The whole job of `fusejit run`, `fusejit plan` and `fusejit cache` as library calls: run a graph
// fused and unfused, time both, check both against the reference evaluator, and report. The
// `fusejit` command is a thin client of these functions; programs can call them too.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fusejit/fusejit.h"

#if FUSEJIT_CPLUSPLUS >= 201709L  // fusejit.h's check: it says why not

namespace fusejit {

/// Options of run_graph().
struct RunOptions {
  Options options;                                              ///< backend, arch, cache, fast mode, device, message style
  // In `params` and `input_ranges` a name given twice takes its last value (the command line refuses
  // a name given twice to any of its NAME=VALUE options); an input given twice in `input_files` is
  // an error.
  Params params;                                                ///< param values, named or positional (else the defaults)
  std::vector<std::pair<std::string, std::string>> input_files; ///< input name -> .npy file (else random)
  /// input name -> [lo, hi) for random values (else the per-dtype default range of docs/ops.md).
  std::vector<std::pair<std::string, std::pair<double, double>>> input_ranges;
  uint64_t seed = 0;             ///< seed of the deterministic random inputs
  /// Mix hard cases into the random inputs (NaN, +-inf, -0.0, subnormals, extremes; about half
  /// the elements), as documented in docs/ops.md.
  bool special_values = false;
  std::string save_dir;          ///< "" = none; else each output is written as DIR/<name>.npy (DIR made as mkdir -p)
  int warmup = 3;                ///< GPU: untimed launches before timing; >= 0
  int repeats = 20;              ///< GPU: timed launches (the CPU path: at most 3); the median is reported; >= 1 (Error(User) otherwise)
  bool check = true;             ///< compare fused, unfused and the reference evaluator
};

/// Per output: summary statistics of the values, as NumPy's nanmin/nanmax/nanmean (NaNs counted,
/// not included; NaN when every value is NaN or the output is empty: the text report then prints
/// "-" for an empty output).
struct OutputStats {
  TensorInfo info;
  double min = 0, max = 0, mean = 0;
  int64_t nan_count = 0, inf_count = 0;
};

/// One execution path: fused or unfused.
struct PathReport {
  std::string name;             ///< "fused" or "unfused"
  int kernels = 0;              ///< kernels of the plan (fusion groups)
  /// Kernel launches per run (Measurement::kernels): one per kernel, 2 to 5 or more for a
  /// reduction whose few long rows split over blocks (docs/ops.md, "A row split over blocks").
  int launches = 0;
  double time_ms = 0;           ///< median time of one run (GPU: CUDA events; CPU: steady clock)
  int64_t bytes = 0;            ///< bytes moved: each kernel's inputs read once, outputs written once
  double gbps = 0;              ///< bytes / time (to_json writes null for it on the CPU path)
  double pct_of_copy = 0;       ///< gbps over the measured device-to-device copy bandwidth (GPU only)
  int compiled = 0, memory_hits = 0, disk_hits = 0;  ///< the plan's kernels: compiled now, from memory, from disk
  double compile_ms = 0;        ///< total compile time of kernels that were compiled
};

/// The outcome of one comparison.
struct CheckReport {
  std::string what;             ///< e.g. "fused vs unfused (bitwise)"
  bool ran = false;             ///< false: not made (e.g. the GPU checks on the CPU path)
  bool ok = true;               ///< it ran and agreed (within the stated tolerance)
  std::string detail;           ///< first mismatch: output, index, both values in decimal and hex
};

/// Everything `fusejit run` reports.
struct RunReport {
  std::string graph_name;        ///< `graph NAME` ("" when the graph has none)
  std::vector<TensorInfo> inputs;   ///< at this run's dims
  std::vector<TensorInfo> outputs;  ///< at this run's dims
  int op_count = 0;              ///< ops of the graph as written
  int64_t elements = 0;          ///< elements of the largest output
  std::string backend;           ///< "cuda" or "cpu"
  std::string backend_note;      ///< e.g. why no GPU was used
  std::string device;            ///< GPU name or "host CPU"
  std::string target;            ///< "sm_90 (CUBIN)", "compute_120 (PTX, ...)", "host C++"
  std::string driver_version;    ///< "" on the CPU
  std::string nvrtc_version;     ///< "13.0" on a GPU; "" on the CPU (its host compiler is in `target`)
  bool fast_math = false;
  uint64_t seed = 0;             ///< seed of the random inputs
  bool special_values = false;   ///< random inputs mixed with hard cases (false when every input is read from a file)
  std::vector<std::string> file_inputs;  ///< inputs read from .npy files (RunOptions::input_files); the rest are random
  DimValues dims;                ///< dim values of this run
  std::vector<std::pair<std::string, Scalar>> params;  ///< param values of this run (integers exact)
  std::string rewrites;          ///< which rules fired, counted
  std::string plan;              ///< fused plan summary
  double predicted_ratio = 0;    ///< unfused bytes / fused bytes (1 when neither moves a byte; +inf, null in JSON, when only the unfused plan does: size-0 dims)
  double copy_gbps = 0;          ///< measured device-to-device copy bandwidth (GPU only)
  PathReport fused, unfused;
  double speedup = 0;            ///< unfused time / fused time
  std::vector<OutputStats> stats;    ///< per output: its values' statistics
  std::vector<CheckReport> checks;   ///< fused vs unfused, each vs the reference
  std::vector<std::string> warnings; ///< what the report says about the run (outputs mostly NaN, an L2-sized working set)
  bool ok() const;               ///< every check that ran passed
  std::string to_text() const;   ///< the human-readable report
  std::string to_json() const;   ///< the same as JSON; what was not measured (GB/s on the CPU, % of copy) is null
};

/// The dim values that the .npy files of `input_files` (input name -> file, as RunOptions) give:
/// each named dim in the shape of an input read from a file takes the file's size on that axis, as
/// a Program call takes dims from its tensors (`fusejit run --input` without a `--dim` for them).
/// Only headers are read; a file of another rank than its input, or for a name that is no input,
/// gives nothing (run_graph reports it). Throws Error(User) naming both files when two files give
/// one dim different sizes (file() the second), when one input is given twice, and for an
/// unreadable file or header (naming the file and the input).
DimValues input_file_dims(const Graph& graph, const std::vector<std::pair<std::string, std::string>>& input_files);

/// Compiles the graph, runs it fused and unfused on the chosen backend, times both and checks
/// both against the reference evaluator. Throws Error on bad options, unreadable/mismatched
/// input files (naming the input, expected and found), compile or driver failures; a failed
/// check is reported in RunReport::checks, not thrown.
RunReport run_graph(const Graph& graph, const RunOptions& options);

/// `fusejit plan`: rewrites and plans without compiling.
struct PlanReport {
  std::string text;   ///< rewritten graph with rule counts, fusion groups, traffic
  std::string dot;    ///< Graphviz DOT: one cluster per fusion group (its bytes read and written), a recomputed node dashed in each
  std::string json;   ///< the same data for tools
  double predicted_ratio = 0;  ///< the traffic model's unfused bytes over fused bytes (1 when neither moves a byte; +inf when only the unfused plan does)
  int fused_kernels = 0, unfused_kernels = 0;  ///< kernels of each plan
};
/// Rewrites (strict, or fast-math rules too) and plans `graph` without compiling anything (the
/// kernels' source is generated for their names); throws as Program::compile would for the graph.
PlanReport plan_graph(const Graph& graph, bool fast_math = false);
/// The same with `options`' fast_math, and its row_split, row_cache and row_cache_limit: the plan's
/// notes and traffic then say how reduction kernels run under them (docs/ops.md, "The row on chip",
/// "A row split over blocks"). Planned without a GPU unless `options.arch` names one ("sm_90"):
/// then as a program on a GPU of that compute capability runs it (its blocks' opt-in shared memory
/// less 12 KiB for a row cache, jit::shared_optin_bytes; short rows re-read from L1/L2), and
/// without, row_cache_limit 0 means 48 KiB. The other options do not change a plan. Errors as
/// plan_graph(graph, fast_math), and Error(User) for a row_split or row_cache_limit below 0 (as
/// Program::compile), a malformed arch, or one whose shared memory fusejit does not know.
PlanReport plan_graph(const Graph& graph, const Options& options);

/// `fusejit compile`: generates and compiles every kernel of both plans ahead of time (no GPU
/// needed) and writes the graph (graph.txt), each kernel's .cu and .cubin or .ptx, and index.json
/// (every kernel's entry points and arguments; format: docs/aot.md) into `out_dir`, a folder
/// Program::load() runs without NVRTC. `arch` is "sm_XY" (CUBIN) or "compute_XY" (PTX). `cache`
/// supplies the kernel cache settings (cache_dir, disk_cache), extra NVRTC options
/// (nvrtc_options) and the message style; its other fields are ignored. Returns the kernels
/// written, fused first. Each file is written to a temporary name and renamed (a symlink in the
/// folder is replaced, not written through), under an flock of the folder; kernel files of an
/// earlier dump that this one does not write are removed, and the temporary files (".NAME.PID.N.tmp",
/// NAME one of fusejit's) of a dump that was killed, nothing else; graph.txt and index.json are
/// written last, so a dump that fails leaves the earlier pair (which loads unless a binary of the
/// same name, one for another arch, was replaced: then refused by its hash). Throws Error(User) for
/// a bad arch, an empty `out_dir`, an unwritable folder, or a folder fusejit did not write (an
/// index.json not fusejit's or of a newer format; with no index.json, a graph.txt or prelude header
/// of other text than the dump's), Error(Compile) when NVRTC fails or is not available. `with_unfused` false (`fusejit compile --fused-only`): the fused plan's kernels only,
/// for deployment; a program loaded from such a folder compiles its unfused plan with NVRTC on
/// its first use (Error(Compile) without NVRTC).
std::vector<KernelInfo> compile_to_dir(const Graph& graph, const std::string& arch, const std::string& out_dir,
                                       bool fast_math = false, const Options& cache = {}, bool with_unfused = true);

/// The kernel cache on disk (`fusejit cache`): one store for GPU kernels and CPU-path host
/// modules, in the folder Options::cache_dir names (else FUSEJIT_CACHE_DIR, else
/// $XDG_CACHE_HOME/fusejit, else ~/.cache/fusejit; docs/api.md "The kernel cache"). Every call
/// throws Error(User) when no folder is set or a cache environment variable is malformed.
struct CacheEntryInfo {
  std::string key;     ///< 32 hex digits (XXH3-128 of everything that changes the binary)
  std::string path;    ///< the entry's file
  int64_t bytes = 0;   ///< file size
  std::string label;   ///< kernel name(s)
  std::string target;  ///< "sm_90" (CUBIN), "compute_90" (PTX) or "host" (a CPU-path host module)
  bool valid = false;  ///< header and payload hash check out (a bad entry is deleted on its next load)
  std::string problem; ///< why not valid ("" when valid): "truncated", "foreign entry" (another fusejit version), ...
};
struct CacheStats {
  std::string path;             ///< the cache folder
  bool enabled = true;          ///< false: disabled (Options::disk_cache, FUSEJIT_DISABLE_CACHE) or unusable
  std::string disabled_reason;  ///< why not enabled, e.g. "... may be written by its group or other users"
  int64_t entries = 0;          ///< GPU kernel entries (CUBIN or PTX)
  int64_t bytes = 0;            ///< their files' total size
  int64_t cap_bytes = 0;        ///< size cap of all entries together, GPU and CPU (LRU eviction beyond it); 0: no cap
  int64_t host_modules = 0;     ///< CPU path: compiled host modules (entries of the same store)
  int64_t host_bytes = 0;       ///< their files' total size
  int64_t invalid = 0;          ///< damaged entries (deleted and rebuilt on their next use)
  int64_t temp_files = 0;       ///< temporary files and build folders (swept after an hour)
  /// Why each subfolder (`DIR/ab`) the store does not use is not used (another owner, say root
  /// after a `sudo` run, or writable by the group or others), sorted: the kernels whose keys fall
  /// in it are compiled again by each process. Empty when every subfolder is usable.
  std::vector<std::string> unusable_subfolders;
};
/// Resolves the cache folder as Options::cache_dir / the environment would (an absolute path).
std::string cache_path(const Options& options = {});
/// Counts the entries of the folder; reads it only (damaged entries are counted, not deleted).
CacheStats cache_stats(const Options& options = {});
/// Every entry, most recently used first (none for an absent folder). Throws Error(User) when the
/// folder cannot be looked into or is not a folder, as cache_clear does.
std::vector<CacheEntryInfo> cache_list(const Options& options = {});
/// Removes every entry (GPU kernels and CPU host modules) and every temporary file, except what
/// builds running meanwhile (other processes) use: their build folders (locked while in use) and
/// temporary entry files younger than a minute. Returns how many entries were removed; throws
/// Error(User) when some entry could not be removed (a read-only folder), naming the first, or
/// when the folder cannot be looked into or is not a folder (a symbolic link loop, a path through
/// a file), or is one fusejit does not use as a cache (CacheStats::disabled_reason: writable by
/// other users, another user's); an absent folder holds nothing (0). Other users' build folders
/// and subfolders in it are left alone.
int64_t cache_clear(const Options& options = {});

}  // namespace fusejit

#endif  // C++20
