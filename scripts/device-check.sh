#!/usr/bin/env bash
# The whole GPU check in one command, from binaries built beforehand on a machine without a GPU
# (the build folder is copied over; the GPU machine needs the NVIDIA driver and the CUDA toolkit's
# NVRTC at /usr/local/cuda, nothing else: no package registry, no compiler).
#
#   scripts/device-check.sh [BUILD_DIR]          (default: build; run from anywhere)
#   scripts/device-check.sh --warm [BUILD_DIR]   on the BUILD machine, before copying the build
#       folder: compiles every kernel the check will need for sm_90 (H100/H200) into
#       BUILD_DIR/test-cache with NVRTC (no GPU needed: the GPU test runs on a fake driver), so the
#       GPU machine finds them on disk when its NVRTC has the same version.
#
# Steps: nvidia-smi summary; `ctest -L gpu` (GPU-labelled tests: test_gpu_runtime, test_gpu_scalar,
# and test_gpu_launch: AdamW in place bitwise, transposed/sliced device views, zero-size tensors,
# size-1 dims without a new kernel, CUDA graph capture and replay, two contexts);
# `bench_launch --gpu` (fusejit's host cost per launch against raw cuLaunchKernel);
# `fusejit run GRAPH --json` for every sample graph at its real (default) size (bias_gelu at half
# its rows); a table at the end: graph, kernels fused/unfused, times, GB/s, % of the copy
# bandwidth measured in the same run, speedup vs predicted traffic ratio, check; timing-only
# variants while the budget lasts (step 3b); then the Python package's GPU tests and
# bench/peers.py (step 3c). Logs and JSON go to $OUT when set (else BUILD_DIR/device-check). Steps
# 1 to 3b stop within DEVICE_CHECK_BUDGET_S (420 s: every command has a timeout, and the sample
# runs stop when the budget is spent); step 3c has its own: the extension's build (~1 min, at most
# 2 x 240 s), its tests (at most 120 s) and DEVICE_CHECK_PEERS_S (150 s, plus 60) for peers.py.
# Exit status: 0 when every step passed, 1 otherwise (it stops at once where BUILD_DIR is not a build
# folder, or no GPU is seen: nvidia-smi fails and the GPU tests skip).
source "$(dirname "$0")/help.sh"; help_if_asked "$0" "${1:-}"
set -u

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WARM=0
if [ "${1:-}" = "--warm" ]; then WARM=1; shift; fi
BUILD="${1:-$ROOT/build}"
case "$BUILD" in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac
OUTDIR="${OUT:-$BUILD/device-check}"
mkdir -p "$OUTDIR/runs"
START=$(date +%s)
BUDGET_S=${DEVICE_CHECK_BUDGET_S:-420}   # total wall-clock budget (issue 15: the whole run under 8 minutes)
FJ="$BUILD/cli/fusejit"
status=0

elapsed() { echo $(( $(date +%s) - START )); }
say() { echo "== $*" | tee -a "$OUTDIR/summary.txt"; }

: > "$OUTDIR/summary.txt"
say "fusejit device check: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown), build $BUILD"

# Kernels compiled on the build machine for this arch are found in the carried cache.
export FUSEJIT_CACHE_DIR="${FUSEJIT_CACHE_DIR:-$BUILD/test-cache}"
# Random graphs in the GPU test: fewer than the default 40 keeps compile time inside the slot.
export FUSEJIT_GPU_RANDOM_GRAPHS="${FUSEJIT_GPU_RANDOM_GRAPHS:-32}"
export PATH="/usr/local/cuda/bin:$PATH"
# The build folder may sit at another path here than where it was built: find libfusejit and the
# sample graphs without relying on the absolute paths baked in at build time.
export LD_LIBRARY_PATH="$BUILD/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FUSEJIT_SOURCE_DIR="$ROOT"
BUILT_AT="$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)"

if [ $WARM -eq 1 ]; then
  say "warming $FUSEJIT_CACHE_DIR for sm_90 (fake driver, NVRTC only)"
  (cd "$BUILD/tests" && FUSEJIT_GPU_TEST_FAKE=1 FUSEJIT_GPU_SKIP_HUGE=1 timeout 1200 ./test_gpu_runtime) \
    > "$OUTDIR/warm.log" 2>&1 || { say "warm-up run failed; see $OUTDIR/warm.log"; status=1; }
  (cd "$BUILD/tests" && FUSEJIT_GPU_TEST_FAKE=1 timeout 600 ./test_gpu_launch) >> "$OUTDIR/warm.log" 2>&1 ||
    { say "warm-up of test_gpu_launch failed; see $OUTDIR/warm.log"; status=1; }
  if [ -x "$BUILD/bench/bench_launch" ]; then
    timeout 120 "$BUILD/bench/bench_launch" --iters 1000 >> "$OUTDIR/warm.log" 2>&1 || true
  fi
  if [ -x "$FJ" ]; then
    # A compile that fails here fails on the GPU too (its runs then measure nothing): said, and the
    # warm-up's status is 1 (an NVRTC option the library came to refuse went unnoticed this way).
    warm_compile() {
      timeout 300 "$FJ" compile "$@" >> "$OUTDIR/warm.log" 2>&1 || { say "warm-up compile failed: $*"; status=1; }
    }
    for g in "$ROOT"/samples/graphs/*.txt; do
      warm_compile "$g" --arch sm_90 -o "$OUTDIR/compiled/$(basename "$g" .txt)"
    done
    for g in bias_gelu softmax softmax_bf16; do
      warm_compile "$ROOT/samples/graphs/$g.txt" --arch sm_90 --fast-math -o "$OUTDIR/compiled/$g~fast"
    done
    warm_compile "$ROOT/samples/graphs/bias_gelu.txt" --arch sm_90 --nvrtc-option=--maxrregcount=32 \
      -o "$OUTDIR/compiled/bias_gelu~regs32"
    # Step 3b's reduction variants built with other NVRTC options.
    for v in "softmax:-DFJ_RED_NO_VECTOR" "softmax_bf16:-DFJ_RED_NO_VECTOR" "rmsnorm:-DFJ_RED_NO_VECTOR" \
             "softmax:-DFJ_RED_NO_WARP_TREE" "softmax:-DFJ_RED_NO_KEPT" "softmax_bf16:-DFJ_RED_NO_KEPT" \
             "softmax:-DFJ_RED_NO_GROUPS" "layernorm:-DFJ_RED_NO_GROUPS" \
             "softmax_bf16:-DFJ_RED_MIN_BLOCKS=6" "layernorm:-DFJ_RED_MIN_BLOCKS=6"; do
      opt="${v#*:}"; tag="${opt#-D}"; tag="${tag#--}"
      warm_compile "$ROOT/samples/graphs/${v%%:*}.txt" --arch sm_90 --nvrtc-option="$opt" -o "$OUTDIR/compiled/${v%%:*}~$tag"
    done
  fi
  say "cache now $(du -sh "$FUSEJIT_CACHE_DIR" 2>/dev/null | cut -f1); done in $(elapsed) s"
  exit $status
fi

# 1. The GPU.
say "nvidia-smi"
timeout 20 nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,compute_cap \
  --format=csv 2>&1 | tee "$OUTDIR/nvidia-smi.txt"
gpu_seen=1
timeout 20 nvidia-smi >> "$OUTDIR/nvidia-smi.txt" 2>&1 || gpu_seen=0
# A mistyped folder ran every step on nothing (and called the GPU tests "passed": none were found).
if [ ! -x "$FJ" ] || ! ls "$BUILD"/tests/test_gpu_* > /dev/null 2>&1; then
  say "$BUILD is not a fusejit build folder (no cli/fusejit or tests/test_gpu_*): give the folder built (or carried)"
  exit 1
fi

# 2. GPU-labelled tests.
say "ctest -L gpu"
if command -v ctest >/dev/null 2>&1 && [ "$BUILT_AT" = "$BUILD" ]; then
  (cd "$BUILD" && timeout 230 ctest -L gpu --output-on-failure --timeout 160 -j1) > "$OUTDIR/ctest-gpu.log" 2>&1
  rc=$?
else
  # No CMake here, or the build folder moved (ctest files hold absolute paths): run the GPU test
  # executables directly (exit 77 = skipped).
  rc=0
  : > "$OUTDIR/ctest-gpu.log"
  for t in "$BUILD"/tests/test_gpu_*; do
    [ -x "$t" ] || continue
    lim=120; case "$(basename "$t")" in test_gpu_scalar) lim=30 ;; esac
    (cd "$BUILD/tests" && timeout $lim "$t") >> "$OUTDIR/ctest-gpu.log" 2>&1
    r=$?
    echo "$(basename "$t"): exit $r" >> "$OUTDIR/ctest-gpu.log"
    [ $r -ne 0 ] && [ $r -ne 77 ] && rc=$r  # 77: skipped, found below
  done
fi
tail -25 "$OUTDIR/ctest-gpu.log"
skipped=0
grep -qE "\(Skipped\)|skipped: |: exit 77$" "$OUTDIR/ctest-gpu.log" && skipped=1
if [ $skipped -eq 1 ] && [ $gpu_seen -eq 0 ]; then
  # Without a GPU every sample would run on the CPU path for minutes and measure nothing.
  say "no GPU here (nvidia-smi failed and the GPU tests were skipped): nothing to measure; stopping"
  exit 1
fi
if [ $rc -ne 0 ]; then say "GPU tests FAILED (exit $rc); see ctest-gpu.log"; status=1
elif [ $skipped -eq 1 ]; then
  say "GPU tests were SKIPPED (no driver or device seen); see ctest-gpu.log"; status=1
else say "GPU tests passed"; fi
grep -hE "MESSAGE|skipped" "$OUTDIR/ctest-gpu.log" | head -30 >> "$OUTDIR/summary.txt"

# 2b. fusejit's host cost per launch against raw cuLaunchKernel of the same kernels.
say "bench_launch --gpu"
if [ -x "$BUILD/bench/bench_launch" ]; then
  timeout 90 "$BUILD/bench/bench_launch" --gpu --iters 20000 > "$OUTDIR/bench_launch.txt" 2>&1
  rc=$?
  cat "$OUTDIR/bench_launch.txt" | tee -a "$OUTDIR/summary.txt"
  [ $rc -ne 0 ] && { say "bench_launch failed (exit $rc)"; status=1; }
else
  say "missing $BUILD/bench/bench_launch"; status=1
fi

# 3. Every sample at its real size, fused vs unfused, timed and checked.
say "samples (fusejit run --json)"
for g in "$ROOT"/samples/graphs/*.txt; do
  name="$(basename "$g" .txt)"
  left=$(( BUDGET_S - $(elapsed) ))
  if [ $left -lt 15 ]; then say "time budget spent: $name and later samples not run"; status=1; break; fi
  t=$(( left < 35 ? left : 35 ))
  # Value ranges come from the samples' `range` annotations (prices, variances, std).
  case "$name" in
    # 8192 x 8192 f16 needs ~30 s of host-side reference and per-op checking: half the rows fit the slot.
    bias_gelu) args=(--dim T=4096) ;;
    *) args=() ;;
  esac
  timeout "$t" "$FJ" run "$g" --json "${args[@]}" > "$OUTDIR/runs/$name.json" 2> "$OUTDIR/runs/$name.log"
  rc=$?
  echo "$rc" > "$OUTDIR/runs/$name.rc"
  [ $rc -ne 0 ] && status=1
  echo "   $name: exit $rc ($(elapsed) s)"
done

# 3b. Timing-only extras, budget permitting, issue 13's target first: softmax (f32, bf16), RMSNorm
# and LayerNorm over rows of 1,024 and 32,768 elements (the samples run 4,096 or 1,024 above) at
# 64 MiB of input (32 MiB for bf16 RMSNorm's 32,768-element rows), each against the copy bandwidth of the same run. Then
# softmax's kept values (exp(x - max) kept on chip for the epilogue, docs/ops.md: unmeasured): the
# samples' 4,096-element rows with a row cache limit that leaves room for x only (the same kernel,
# computing exp twice) and with their code compiled out as well (-DFJ_RED_NO_KEPT, which the
# launcher does not see: the limit keeps it from reserving their shared memory; the fast entry of
# the bf16 softmax takes 44 registers under ptxas, 37 with them). Then
# the row cache (docs/ops.md, "The row on chip"; its limit, the GPU's opt-in shared memory less
# 12 KiB, is unmeasured): 32,768-element rows on chip (128 KiB of f32, 64 KiB of bf16 a block),
# softmax and LayerNorm also with one lane array (-DFJ_RED_NO_GROUPS: a pass reduces one chunk at
# a time instead of four, fj_red_chunk_range), the bf16 softmax and LayerNorm with their fast
# entries held to 6 blocks of 256 an SM (-DFJ_RED_MIN_BLOCKS=6: 40 registers, no spills under
# ptxas, against ptxas's own 48 and 46 since the chunk loop was merged; before it, 39 and 40),
# then the 4,096-element softmaxes in fast-math mode
# (approximate exp and division: the bf16 one runs at the f32 one's elements a second, half its
# bandwidth; if fast math closes the gap, the strict kernels are bound by arithmetic, not memory),
# against a 48 KiB limit (re-read by every pass), softmax and LayerNorm with every pass reading
# memory; the row kernels' scalar loads instead of their 16-byte vector path (-DFJ_RED_NO_VECTOR),
# and the lane tree's nine block barriers instead of the warp tree's two (-DFJ_RED_NO_WARP_TREE,
# ir/scalar/fj_reduce.h). Then bias_gelu at its full size (the checked run above uses half the
# rows), in fast-math mode (f32 intermediates, fast erf: its compute ceiling, which tells whether
# the strict kernel is bound by instruction issue or by memory), and capped at 32 registers (full
# occupancy: does it need more bytes in flight?); the row split's thresholds
# (ir::choose_row_split, from one measurement): grad_norm in one block and in 1,024 (2 chunks a
# block: twice the loads in flight of its 64-thread blocks) against its 512-block split,
# and a vocabulary-sized logsumexp row (1 x 128256) in one block, in 8 parts, and as the rule splits
# it (8 parts since 2026-12-04). Rows of 2,048 elements (the short-row rule's edge, ir::
# kShortRowElements: re-read from L1/L2, not kept on chip) come after the rows of 1,024. Then a
# column reduction with few columns (per-channel sums of [100352, 64]): split over 26 blocks (the
# rule, ir::choose_column_split) against 2 blocks. Last, a masked softmax over rows of 32,768 f32
# whose [1, 1, S] mask does not fit on chip beside the scores (row_cache 3, since 2026-12-05: the
# scores' 128 KiB row kept, the mask re-read through L2) against every pass reading memory.
for extra in "softmax~rows1024:softmax:--dim=N=16384 --dim=C=1024" \
             "softmax~rows2048:softmax:--dim=N=8192 --dim=C=2048" \
             "layernorm~rows2048:layernorm:--dim=N=8192 --dim=C=2048" \
             "rmsnorm~rows2048:rmsnorm:--dim=T=16384 --dim=D=2048" \
             "softmax~rows32768:softmax:--dim=N=512 --dim=C=32768" \
             "softmax_bf16~rows32768:softmax_bf16:--dim=N=1024 --dim=C=32768" \
             "rmsnorm~rows1024:rmsnorm:--dim=T=32768 --dim=D=1024" \
             "rmsnorm~rows32768:rmsnorm:--dim=T=512 --dim=D=32768" \
             "layernorm~rows32768:layernorm:--dim=N=512 --dim=C=32768" \
             "softmax~rows32768-no-groups:softmax:--dim=N=512 --dim=C=32768 --nvrtc-option=-DFJ_RED_NO_GROUPS" \
             "layernorm~rows32768-no-groups:layernorm:--dim=N=512 --dim=C=32768 --nvrtc-option=-DFJ_RED_NO_GROUPS" \
             "softmax_bf16~min-blocks6:softmax_bf16:--nvrtc-option=-DFJ_RED_MIN_BLOCKS=6" \
             "layernorm~min-blocks6:layernorm:--nvrtc-option=-DFJ_RED_MIN_BLOCKS=6" \
             "softmax_bf16~fast-math:softmax_bf16:--fast-math" \
             "softmax~fast-math:softmax:--fast-math" \
             "softmax_bf16~no-kept-values:softmax_bf16:--row-cache-limit=8192" \
             "softmax_bf16~kept-compiled-out:softmax_bf16:--nvrtc-option=-DFJ_RED_NO_KEPT --row-cache-limit=8192" \
             "softmax~no-kept-values:softmax:--row-cache-limit=16384" \
             "softmax~kept-compiled-out:softmax:--nvrtc-option=-DFJ_RED_NO_KEPT --row-cache-limit=16384" \
             "softmax~rows32768-cache48k:softmax:--dim=N=512 --dim=C=32768 --row-cache-limit=49152" \
             "rmsnorm~rows32768-cache48k:rmsnorm:--dim=T=512 --dim=D=32768 --row-cache-limit=49152" \
             "softmax~no-row-cache:softmax:--no-row-cache" \
             "layernorm~no-row-cache:layernorm:--no-row-cache" \
             "softmax_bf16~scalar-loads:softmax_bf16:--nvrtc-option=-DFJ_RED_NO_VECTOR" \
             "rmsnorm~scalar-loads:rmsnorm:--nvrtc-option=-DFJ_RED_NO_VECTOR" \
             "softmax~scalar-loads:softmax:--nvrtc-option=-DFJ_RED_NO_VECTOR" \
             "softmax~rows1024-no-warp-tree:softmax:--dim=N=16384 --dim=C=1024 --nvrtc-option=-DFJ_RED_NO_WARP_TREE" \
             "bias_gelu~full:bias_gelu:" "bias_gelu~fast-math:bias_gelu:--fast-math" \
             "bias_gelu~regs32:bias_gelu:--nvrtc-option=--maxrregcount=32" \
             "grad_norm~one-block:grad_norm:--row-split=1" \
             "grad_norm~split1024:grad_norm:--row-split=1024" \
             "logsumexp~vocab:logsumexp:--dim=N=1 --dim=V=128256 --row-split=1" \
             "logsumexp~vocab-split8:logsumexp:--dim=N=1 --dim=V=128256 --row-split=8" \
             "logsumexp~vocab-rule:logsumexp:--dim=N=1 --dim=V=128256" \
             "bias_grad~channels:bias_grad:--dim=N=100352 --dim=C=64" \
             "bias_grad~channels-unsplit:bias_grad:--dim=N=100352 --dim=C=64 --row-split=1" \
             "masked_softmax~rows32768:masked_softmax:--dim=T=16 --dim=S=32768" \
             "masked_softmax~rows32768-no-row-cache:masked_softmax:--dim=T=16 --dim=S=32768 --no-row-cache"; do
  name="${extra%%:*}"; rest="${extra#*:}"; graph="${rest%%:*}"; flags="${rest#*:}"
  left=$(( BUDGET_S - $(elapsed) ))
  if [ $left -lt 15 ]; then say "time budget spent: $name not run"; break; fi
  t=$(( left < 25 ? left : 25 ))
  # shellcheck disable=SC2086
  timeout "$t" "$FJ" run "$ROOT/samples/graphs/$graph.txt" --json --no-check $flags \
    > "$OUTDIR/runs/$name.json" 2> "$OUTDIR/runs/$name.log"
  rc=$?
  echo "$rc" > "$OUTDIR/runs/$name.rc"
  echo "   $name: exit $rc ($(elapsed) s)"
done

# 3c. The Python package on this machine's own Python (the one with PyTorch and CuPy): its
# extension is compiled here (~1 minute: one source file) against the carried libfusejit, since
# the build machine's Python version differs; nanobind, CMake and ninja come with that Python (no
# package registry needed). Then the GPU tests of the package (torch and CuPy tensors on a
# non-default stream, no synchronisation, in place, strided views) and bench/peers.py (fusejit
# against PyTorch eager, torch.compile and CuPy on the same tensors), within their own budget
# DEVICE_CHECK_PEERS_S (default 150 s; 0 skips this step). One log, python.log ($OUT returns at most
# 8 files); the measurements as JSON in runs/peers.json.
PEERS_S=${DEVICE_CHECK_PEERS_S:-150}
PYB="${TMPDIR:-/tmp}/fusejit-pybuild"
if [ "$PEERS_S" -gt 0 ] && python3 -c "import nanobind, torch" >/dev/null 2>&1; then
  say "python: extension for $(python3 --version 2>&1), pytest test_gpu.py, bench/peers.py"
  if timeout 240 cmake -S "$ROOT/python" -B "$PYB" -G Ninja -DCMAKE_BUILD_TYPE=Release \
       -DFUSEJIT_PREBUILT_LIB="$BUILD/lib/libfusejit.so" -DPython_EXECUTABLE="$(command -v python3)" \
       > "$OUTDIR/python.log" 2>&1 && timeout 240 cmake --build "$PYB" -j"$(nproc)" >> "$OUTDIR/python.log" 2>&1; then
    PYTHONPATH="$PYB" timeout 120 python3 -m pytest -q -p no:cacheprovider "$ROOT/python/tests/test_gpu.py" \
      >> "$OUTDIR/python.log" 2>&1 || { say "python GPU tests FAILED; see python.log"; status=1; }
    tail -3 "$OUTDIR/python.log" | tee -a "$OUTDIR/summary.txt"
    PYTHONPATH="$PYB" timeout $((PEERS_S + 60)) python3 "$ROOT/bench/peers.py" --budget-s "$PEERS_S" \
      --json "$OUTDIR/runs/peers.json" 2>&1 | tee -a "$OUTDIR/python.log" | tee -a "$OUTDIR/summary.txt"
    [ "${PIPESTATUS[0]}" -ne 0 ] && { say "bench/peers.py: a peer failed its check or the budget ran out"; status=1; }
  else
    say "python: building the extension failed; see python.log"; status=1
  fi
else
  say "python step skipped (DEVICE_CHECK_PEERS_S=0, or no nanobind/torch for python3)"
fi

# 4. The table (and one JSON with every run).
say "results"
if command -v python3 >/dev/null 2>&1; then
  python3 - "$OUTDIR" <<'PY' | tee -a "$OUTDIR/summary.txt"
import json, os, sys
out = sys.argv[1]
runs, rows = {}, []
for f in sorted(os.listdir(os.path.join(out, "runs"))):
    if not f.endswith(".json"):
        continue
    name = f[:-5]
    num = lambda form, v: "-" if v is None else form % v  # null (not measured, e.g. on the CPU path): "-", not 0
    rc = open(os.path.join(out, "runs", name + ".rc")).read().strip() if os.path.exists(os.path.join(out, "runs", name + ".rc")) else "?"
    try:
        r = json.load(open(os.path.join(out, "runs", f)))
    except Exception as e:
        runs[name] = {"error": "no JSON (%s)" % e, "exit": rc}
        rows.append((name, "-", "-", "-", "-", "-", "-", "-", "-", "exit %s, no JSON" % rc))
        continue
    r["exit"] = rc
    runs[name] = r
    fu, un = r.get("fused", {}), r.get("unfused", {})
    checks = r.get("checks", [])
    ok = all(c.get("ok", False) for c in checks if c.get("ran", True)) and rc == "0"
    pred = r.get("predicted_ratio", 0) or 0
    sp = r.get("speedup", 0) or 0
    rows.append((name, "%s/%s" % (fu.get("kernels", "?"), un.get("kernels", "?")),
                 "%.3f/%.3f" % (fu.get("time_ms", 0), un.get("time_ms", 0)),
                 num("%.0f", fu.get("gbps")), num("%.0f", r.get("copy_gbps")), num("%.0f%%", fu.get("pct_of_copy")),
                 "%.2fx" % sp, "%.2fx" % pred, ("%.0f%%" % (100 * sp / pred)) if pred else "-",
                 ("ok" if checks else "timing only") if ok else
                 "FAIL " + "; ".join(c.get("detail", "")[:80] for c in checks if not c.get("ok", True))))
first = next((v for v in runs.values() if "device" in v), {})
print("device: %s  target: %s  driver: %s  NVRTC: %s  backend: %s" % (
    first.get("device", "?"), first.get("target", "?"), first.get("driver_version", "?"),
    first.get("nvrtc_version", "?"), first.get("backend", "?")))
hdr = ("graph", "kernels f/u", "ms fused/unfused", "GB/s", "copy GB/s", "% copy", "speedup", "predicted", "sp/pred", "check")
w = [max(len(str(x[i])) for x in rows + [hdr]) for i in range(len(hdr))]
for row in [hdr] + rows:
    print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(row)))
json.dump(runs, open(os.path.join(out, "device-check.json"), "w"), indent=1)
PY
else
  for j in "$OUTDIR"/runs/*.json; do echo "$(basename "$j"):"; head -c 2000 "$j"; echo; done
fi
say "done in $(elapsed) s, status $status; logs in $OUTDIR"
# The device tool returns at most 8 files from $OUT: fold the per-sample logs into one archive.
if [ -n "${OUT:-}" ] && [ -d "$OUTDIR/runs" ]; then
  tar czf "$OUTDIR/runs.tgz" -C "$OUTDIR" runs && rm -rf "$OUTDIR/runs"
fi
exit $status
