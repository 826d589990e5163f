# Compiles SOURCE (which includes fusejit's public headers) as C++17 with CXX and checks that it
# fails with exactly one error, fusejit.h's "need C++20" (run by the headers_refuse_cxx17 test).
execute_process(COMMAND ${CXX} -std=c++17 -fsyntax-only -I ${INCLUDE} ${SOURCE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCHALL "error:" errors "${out}${err}")
list(LENGTH errors n)
if(rc EQUAL 0 OR NOT n EQUAL 1 OR NOT err MATCHES "fusejit's headers need C\\+\\+20")
  message(FATAL_ERROR "expected one error saying the headers need C++20, got exit ${rc} and ${n} errors:\n${err}")
endif()
