# bpf_object(NAME SOURCE [MANIFEST] [DEPENDS header...])
#
# Compiles bpf/NAME.bpf.c with clang for the BPF target (CO-RE, against the
# checked-in vmlinux.h, never the build host's kernel), strips its DWARF, and
# generates NAME.skel.h with bpftool and, with MANIFEST, NAME.manifest.h
# with bpf/manifest.cpp. Yields an INTERFACE target `NAME_skel` whose
# include directory holds them.
find_program(BPF_CLANG NAMES clang clang-16 clang-15 clang-14 REQUIRED)
find_program(BPF_STRIP NAMES llvm-strip llvm-strip-16 llvm-strip-15 llvm-strip-14 REQUIRED)
find_program(BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin REQUIRED)

set(BPF_VMLINUX_DIR ${PROJECT_SOURCE_DIR}/bpf/vmlinux/x86)
pkg_get_variable(LIBBPF_INCLUDEDIR libbpf includedir)

function(bpf_object name source)
  cmake_parse_arguments(ARG "MANIFEST" "" "DEPENDS" ${ARGN})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${name})
  add_custom_command(
    OUTPUT ${out}.skel.h
    COMMAND ${BPF_CLANG} -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_x86
            -Wall -Werror -Wno-unused-function
            -I${BPF_VMLINUX_DIR} -I${PROJECT_SOURCE_DIR} -I${LIBBPF_INCLUDEDIR}
            -c ${CMAKE_CURRENT_SOURCE_DIR}/${source} -o ${out}.tmp.o
    COMMAND ${BPF_STRIP} -g ${out}.tmp.o -o ${out}.bpf.o
    COMMAND ${BPFTOOL} gen skeleton ${out}.bpf.o name ${name}_bpf > ${out}.skel.h.tmp
    COMMAND ${CMAKE_COMMAND} -E rename ${out}.skel.h.tmp ${out}.skel.h
    DEPENDS ${source} ${ARG_DEPENDS} ${BPF_VMLINUX_DIR}/vmlinux.h
    COMMENT "BPF ${source} -> ${name}.skel.h"
    VERBATIM)
  set(generated ${out}.skel.h)
  if(ARG_MANIFEST)
    add_custom_command(
      OUTPUT ${out}.manifest.h
      COMMAND bpf_manifest ${name} ${out}.bpf.o > ${out}.manifest.h.tmp
      COMMAND ${CMAKE_COMMAND} -E rename ${out}.manifest.h.tmp ${out}.manifest.h
      DEPENDS ${out}.skel.h bpf_manifest
      COMMENT "BPF ${name}.bpf.o -> ${name}.manifest.h"
      VERBATIM)
    list(APPEND generated ${out}.manifest.h)
  endif()
  add_custom_target(${name}_skel_gen DEPENDS ${generated})
  add_library(${name}_skel INTERFACE)
  add_dependencies(${name}_skel ${name}_skel_gen)
  target_include_directories(${name}_skel INTERFACE ${CMAKE_CURRENT_BINARY_DIR})
  target_link_libraries(${name}_skel INTERFACE confine_libbpf)
endfunction()
