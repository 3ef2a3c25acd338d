# npm_dir.cmake - cx_npm_dir(): a node test's folder in the build tree.
#
#   cx_npm_dir(<src dir> <build dir> <probe module> <label> <if it fails> FILES <file>...)
#
# Copies FILES (package.json, package-lock.json, the scripts) from <src dir>
# into <build dir> and there runs `npm ci --ignore-scripts` (never in the
# source tree) when node_modules/<probe module> is missing or the lockfile
# changed since the last install (its hash is cached per <label>). A failed
# install is a configure warning ending in <if it fails>, not an error: the
# tests that need the modules then skip or say why. Without npm it only copies.
find_program(CHAOSLOCO_NPM npm)

function(cx_npm_dir src dst probe label consequence)
  cmake_parse_arguments(ARG "" "" "FILES" ${ARGN})
  foreach(f ${ARG_FILES})
    configure_file(${src}/${f} ${dst}/${f} COPYONLY)
  endforeach()
  if(NOT CHAOSLOCO_NPM)
    return()
  endif()
  file(SHA256 ${src}/package-lock.json sha)
  string(MAKE_C_IDENTIFIER "CX_NPM_DONE_${label}" done)
  if(NOT EXISTS ${dst}/node_modules/${probe}/package.json OR NOT "${sha}" STREQUAL "${${done}}")
    execute_process(COMMAND ${CHAOSLOCO_NPM} ci --ignore-scripts --no-audit --no-fund
      WORKING_DIRECTORY ${dst} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(rc EQUAL 0)
      set(${done} ${sha} CACHE INTERNAL "lock hash of the last npm ci (${label})")
    else()
      message(WARNING "${label}: npm ci failed; ${consequence}:\n${out}")
    endif()
  endif()
endfunction()
