# Warnings for every target; -Werror in CI (CHAOSLOCO_WERROR=ON).
add_compile_options(-Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter)
# snprintf truncation is the designed, bounded behaviour of every fixed-size
# buffer here (paths, log lines, headers); gcc's guesses about it depend on
# the optimisation level and would make -Werror builds flip between -O0/-O2.
if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
  add_compile_options(-Wno-format-truncation) # clang has no such warning (nor the guesses)
endif()
if(CHAOSLOCO_WERROR)
  add_compile_options(-Werror)
endif()
if(CHAOSLOCO_SANITIZE)
  string(REPLACE "," ";" _sans "${CHAOSLOCO_SANITIZE}")
  foreach(s ${_sans})
    add_compile_options(-fsanitize=${s})
    add_link_options(-fsanitize=${s})
  endforeach()
  # GCC's "undefined" leaves out float-cast-overflow (clang's includes it):
  # a float -> int conversion out of range is undefined and libFuzzer found
  # one (injectors/straggle.c), so the main suite checks for it too.
  if("undefined" IN_LIST _sans AND CMAKE_C_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-fsanitize=float-cast-overflow -fno-sanitize-recover=float-cast-overflow)
    add_link_options(-fsanitize=float-cast-overflow)
  endif()
  add_compile_options(-fno-omit-frame-pointer -fno-sanitize-recover=undefined)
endif()
# libFuzzer builds: coverage instrumentation for every library; the fuzz
# targets themselves link libFuzzer (tests/fuzz/CMakeLists.txt).
if(CHAOSLOCO_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "CHAOSLOCO_FUZZ needs clang (CC=clang; scripts/install-deps --test installs it)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
