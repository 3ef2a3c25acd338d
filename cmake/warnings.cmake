# Warnings for every target; -Werror in CI (CHAOSLOCO_WERROR=ON).
add_compile_options(-Wall -Wextra -Wshadow -Wstrict-prototypes -Wno-unused-parameter)
# snprintf truncation is the designed, bounded behaviour of every fixed-size
# buffer here (paths, log lines, headers); gcc's guesses about it depend on
# the optimisation level and would make -Werror builds flip between -O0/-O2.
add_compile_options(-Wno-format-truncation)
if(CHAOSLOCO_WERROR)
  add_compile_options(-Werror)
endif()
if(CHAOSLOCO_SANITIZE)
  string(REPLACE "," ";" _sans "${CHAOSLOCO_SANITIZE}")
  foreach(s ${_sans})
    add_compile_options(-fsanitize=${s})
    add_link_options(-fsanitize=${s})
  endforeach()
  add_compile_options(-fno-omit-frame-pointer -fno-sanitize-recover=undefined)
endif()
