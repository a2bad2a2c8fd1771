# `make package` (Makefile) -> CPack DEB: one .deb per install component of
# cmake/StrataInstall.cmake (docs/deploy.md lists what each holds):
#   runtime -> strata          CLI, daemons, strata-exec/-train/-inject,
#                              libstrata.so.0, systemd units, /etc/strata
#   dev     -> strata-dev      include/strata, libstrata.so, CMake + pkg-config
#   python  -> python3-strata  the Python package for Debian's python3
#   bench   -> strata-bench    strata-bench
# Depends come from dpkg-shlibdeps on the ELF files (plus the inter-package
# and interpreter ones no ELF file shows). No maintainer scripts: the units'
# StateDirectory= makes /var/lib/strata, DynamicUser= the users, and the
# ldconfig trigger comes from CPack's shlibs handling.
include(GNUInstallDirs)
# cpack (and `cmake --build --target install`) package what is built and do
# not rebuild the whole tree first (tests included): `make package` builds
# first, and the package tests run after the build.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

# Every package carries the Debian-required copyright and changelog.
set(strata_deb_names strata strata-dev python3-strata strata-bench)
set(strata_deb_components runtime dev python bench)
configure_file(deploy/debian/changelog.in ${PROJECT_BINARY_DIR}/debian/changelog @ONLY)
add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/debian/changelog.gz
  COMMAND gzip -9nf -k ${PROJECT_BINARY_DIR}/debian/changelog
  DEPENDS ${PROJECT_BINARY_DIR}/debian/changelog)
add_custom_target(strata_debian_changelog ALL
  DEPENDS ${PROJECT_BINARY_DIR}/debian/changelog.gz)
foreach(name comp IN ZIP_LISTS strata_deb_names strata_deb_components)
  install(FILES deploy/debian/copyright ${PROJECT_BINARY_DIR}/debian/changelog.gz
    DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/${name} COMPONENT ${comp})
endforeach()
install(FILES docs/deploy.md
  DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/strata COMPONENT runtime)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME strata)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "strata")
set(CPACK_PACKAGE_CONTACT "strata maintainers <maintainers@users.noreply.a-seed-d9d099a2.example>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "distributed training orchestrator")
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev python)
if(TARGET strata-bench)
  list(APPEND CPACK_COMPONENTS_ALL bench)
endif()

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dpkg-shlibdeps must find libstrata.so.0 of this build for strata-dev and
# strata-bench; the runtime package declares it (shlibs + ldconfig trigger).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY "=")

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME strata)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION net)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
  "distributed training orchestrator: CLI, daemons and rank library
strata runs data/tensor/pipeline-parallel training jobs on a cluster: a
coordinator places jobs on per-node workers, which start the ranks,
checkpoint asynchronously and resume after failures. This package has the
strata CLI, strata-coordinator and strata-worker (with systemd units),
strata-exec (mpirun launcher), strata-train, strata-inject and libstrata.")
# conffiles: /etc/strata; triggers: ldconfig after libstrata.so.0 changes
# (CPack 3.25 also writes postinst/postrm calling ldconfig for it).
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/deploy/debian/conffiles
  ${PROJECT_SOURCE_DIR}/deploy/debian/triggers)
set(CPACK_PRE_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/StrataCPackPreBuild.cmake)
# strata-exec runs mpirun, hang diagnoses run eu-stack: programs, not
# libraries, so dpkg-shlibdeps cannot see them.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "openmpi-bin, elfutils")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME strata-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "strata (= ${PROJECT_VERSION})")
set(CPACK_COMPONENT_DEV_DESCRIPTION
  "distributed training orchestrator: development files
Headers (strata/c_api.h, the C++ wrapper strata/strata.hpp), the libstrata.so
link, the CMake package (find_package(strata), target strata::strata) and
the pkg-config file strata.pc for programs that run as strata ranks.")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-strata)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_PACKAGE_ARCHITECTURE all)
set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3:any, strata (>= ${PROJECT_VERSION})")
set(CPACK_COMPONENT_PYTHON_DESCRIPTION
  "distributed training orchestrator: Python package
The strata Python package (ctypes over libstrata) for ranks written in
Python: placement, reshardable checkpoints, step telemetry.")

set(CPACK_DEBIAN_BENCH_PACKAGE_NAME strata-bench)
set(CPACK_COMPONENT_BENCH_DESCRIPTION
  "distributed training orchestrator: benchmarks
strata-bench measures strata's planner, collectives, checkpoints, control
plane and trainer against the tools a user would pick instead.")

include(CPack)

# The wheel `make package` leaves next to the .deb files: python/ copied
# out of the source tree (setuptools writes build/ and *.egg-info where it
# builds), libstrata bundled through STRATA_WHEEL_LIB (python/setup.py).
# Debian's interpreter: its python3-setuptools and python3-wheel build the
# wheel offline (deploy/install-deps.sh build).
set(STRATA_WHEEL_PYTHON /usr/bin/python3 CACHE FILEPATH
  "Python that builds the wheel (needs setuptools >= 61 and wheel)")
if(EXISTS ${STRATA_WHEEL_PYTHON})
  add_custom_target(strata_wheel
    COMMAND ${CMAKE_COMMAND} -E rm -rf ${PROJECT_BINARY_DIR}/wheel-src
    COMMAND ${CMAKE_COMMAND} -E copy_directory ${PROJECT_SOURCE_DIR}/python
      ${PROJECT_BINARY_DIR}/wheel-src
    COMMAND ${CMAKE_COMMAND} -E rm -rf ${PROJECT_BINARY_DIR}/wheel-src/examples
    # The wheel's copy without debug information, as in the .deb.
    COMMAND ${CMAKE_STRIP} --strip-unneeded -o ${PROJECT_BINARY_DIR}/wheel-src/libstrata.so.0
      $<TARGET_FILE:strata_c>
    COMMAND ${CMAKE_COMMAND} -E env STRATA_WHEEL_LIB=${PROJECT_BINARY_DIR}/wheel-src/libstrata.so.0
      ${STRATA_WHEEL_PYTHON} -m pip wheel --no-deps --no-build-isolation
      --no-index -q -w ${PROJECT_BINARY_DIR}/packages ${PROJECT_BINARY_DIR}/wheel-src
    DEPENDS strata_c
    COMMENT "Building the strata wheel into ${PROJECT_BINARY_DIR}/packages"
    VERBATIM)
endif()

# The Debian packages may depend only on what Debian's archive has. A build
# that found CUDA/NCCL under /usr/local/cuda (STRATA_WITH_CUDA=AUTO on a GPU
# machine) links libcudart/libnccl, which no Debian package provides, so
# `make package` packages a second build without CUDA (Makefile: PKG_BUILD,
# this directory's name + "-package"), and the package tests take their
# packages from there in that case.
set(STRATA_PACKAGE_BUILD_DIR ${PROJECT_BINARY_DIR}-package CACHE PATH
  "the CUDA-free build `make package` packages when this build links CUDA")
if(STRATA_HAVE_CUDA)
  set(strata_package_build ${STRATA_PACKAGE_BUILD_DIR})
  message(STATUS "strata: this build links CUDA from /usr/local/cuda; the package "
    "tests use the CUDA-free build in ${STRATA_PACKAGE_BUILD_DIR} (make package)")
else()
  set(strata_package_build ${PROJECT_BINARY_DIR})
endif()

# tests/package: the .deb files in a clean Debian 12 root, lintian; the
# units; the image under podman.
if(STRATA_BUILD_TESTS)
  set(pkg_tests ${PROJECT_SOURCE_DIR}/tests/package)
  strata_add_script_test(deb_test ${pkg_tests}/deb_test.sh
    ${strata_package_build} 900 SERIAL)
  strata_add_script_test(container_test ${pkg_tests}/container_test.sh
    ${strata_package_build} 900 SERIAL)
  strata_add_script_test(systemd_test ${pkg_tests}/systemd_test.sh
    ${PROJECT_BINARY_DIR} 120)
  strata_add_script_test(systemd_container_test
    ${pkg_tests}/systemd_container_test.sh ${strata_package_build} 600 SERIAL)
endif()
