# FUSEJIT_SANITIZE (e.g. "address,undefined"): every fusejit object, test and tool is built with
# -fsanitize=<list> and stops at the first report (-fno-sanitize-recover=all), so a sanitizer
# finding fails the test that hit it. The CPU path's kernels (compiled by the host compiler at run
# time and dlopen'ed) get the same flags through FUSEJIT_SANITIZE_CXX, which tests/CMakeLists.txt
# passes to the tests as $CXX: the kernels' integer and float conversions (ir/scalar/fj_scalar.h)
# are then checked by UBSan as well. FUSEJIT_SANITIZE_KERNELS=OFF leaves the kernels to the plain
# host compiler, so a sanitized suite can reuse the modules a plain suite compiled into a shared
# FUSEJIT_TEST_CACHE_DIR (what CI does: the kernel compiles are most of the suite's time).
option(FUSEJIT_SANITIZE_KERNELS "Also build the CPU path's kernels with FUSEJIT_SANITIZE in the tests" ON)
if(FUSEJIT_SANITIZE)
  set(FUSEJIT_SANITIZE_FLAGS -fsanitize=${FUSEJIT_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_compile_options(${FUSEJIT_SANITIZE_FLAGS})
  add_link_options(-fsanitize=${FUSEJIT_SANITIZE})
  list(JOIN FUSEJIT_SANITIZE_FLAGS " " _fj_flags)
  if(FUSEJIT_SANITIZE_KERNELS)
    set(FUSEJIT_SANITIZE_CXX "${CMAKE_CXX_COMPILER} ${_fj_flags}")
  endif()
endif()

# FUSEJIT_BUILD_FUZZ: libFuzzer's coverage instrumentation for every object (clang only); the
# fuzz targets themselves link -fsanitize=fuzzer (tests/fuzz/CMakeLists.txt).
if(FUSEJIT_BUILD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "FUSEJIT_BUILD_FUZZ needs clang (libFuzzer); configure with -DCMAKE_CXX_COMPILER=clang++")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
