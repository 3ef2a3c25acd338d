# folder_lib.cmake - cx_folder_lib(): one folder's static library, linked
# into the chaosloco executable.
#
#   cx_folder_lib(<name> SOURCES <file>... LINK <dependency>...)
#
# <name> links its dependencies PUBLIC (so the link line orders them) and
# joins the global property CHAOSLOCO_SUBCOMMAND_LIBS, which the top-level
# CMakeLists.txt links into chaosloco.
function(cx_folder_lib name)
  cmake_parse_arguments(A "" "" "SOURCES;LINK" ${ARGN})
  add_library(${name} STATIC ${A_SOURCES})
  target_link_libraries(${name} PUBLIC ${A_LINK})
  set_property(GLOBAL APPEND PROPERTY CHAOSLOCO_SUBCOMMAND_LIBS ${name})
endfunction()
