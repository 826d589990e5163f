# Writes OUT: a C++ file defining fusejit::jit::NAME (default kScalarPrelude) with the text of IN.
if(NOT NAME)
  set(NAME kScalarPrelude)
endif()
file(READ ${IN} content)
set(delim "FJ_PRELUDE_")
file(WRITE ${OUT} "// Generated from ${IN}; do not edit.\nnamespace fusejit::jit {\nextern const char* const ${NAME};\nconst char* const ${NAME} = R\"${delim}(${content})${delim}\";\n}\n")
