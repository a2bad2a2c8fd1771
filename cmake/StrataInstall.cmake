# What `cmake --install` puts under the prefix (docs/deploy.md), by
# component:
#   runtime  the CLI, the daemons, strata-exec, strata-train, strata-inject,
#            libstrata.so.<version>, the systemd units and /etc/strata examples
#   dev      include/strata/ (c_api.h and the C++ wrapper strata.hpp), the
#            libstrata.so link, strataConfig*.cmake (strata::strata), strata.pc
#   python   the Python package (python/strata) for the system interpreter
#   bench    strata-bench
# Included once from the top-level CMakeLists.txt after every add_subdirectory:
# install(TARGETS) on targets of other directories needs CMake >= 3.13.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# libstrata.so: the C ABI. SONAME libstrata.so.<major> (0 while the project
# is 0.x), file name libstrata.so.<project version>. Only the strata_*
# functions of c_api.h are exported (libstrata.map); the C++ modules linked
# into it stay internal, so their symbols never clash with a rank's own copy
# of protobuf, absl or spdlog.
set_target_properties(strata_c PROPERTIES
  EXPORT_NAME strata
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR}
  INTERFACE_INCLUDE_DIRECTORIES
    "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/runtime/include>;$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>"
  LINK_DEPENDS ${PROJECT_SOURCE_DIR}/runtime/libstrata.map)
target_link_options(strata_c PRIVATE
  "LINKER:--version-script=${PROJECT_SOURCE_DIR}/runtime/libstrata.map"
  "LINKER:--no-undefined")

# The binaries link strata's modules statically and the system's shared
# libraries from the standard path, so installed binaries need no RPATH;
# CMake drops the build tree's RPATH at install (INSTALL_RPATH stays empty),
# which tests/install/install_test.sh checks with readelf.
set(strata_runtime_programs strata strata-coordinator strata-worker
  strata-train strata-inject)
if(TARGET strata-exec)  # needs Open MPI (launch/CMakeLists.txt)
  list(APPEND strata_runtime_programs strata-exec)
endif()
install(TARGETS ${strata_runtime_programs}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
if(TARGET strata-bench)
  install(TARGETS strata-bench
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT bench)
endif()

install(TARGETS strata_c EXPORT strataTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    COMPONENT runtime NAMELINK_COMPONENT dev)
install(FILES runtime/include/strata/c_api.h runtime/include/strata/strata.hpp
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/strata COMPONENT dev)

set(strata_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/strata)
install(EXPORT strataTargets NAMESPACE strata:: FILE strataTargets.cmake
  DESTINATION ${strata_cmake_dir} COMPONENT dev)
configure_package_config_file(cmake/strataConfig.cmake.in
  ${PROJECT_BINARY_DIR}/strataConfig.cmake
  INSTALL_DESTINATION ${strata_cmake_dir})
# 0.x: a minor version may change the ABI, so only the same major.minor is
# compatible (semantic versioning's rule for 0.y.z).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/strataConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/strataConfig.cmake
  ${PROJECT_BINARY_DIR}/strataConfigVersion.cmake
  DESTINATION ${strata_cmake_dir} COMPONENT dev)

# pkg-config: ${prefix} is found from the file's own place (${pcfiledir},
# pkg-config(1)), so `cmake --install --prefix P` and the packages both get a
# correct file whatever CMAKE_INSTALL_PREFIX was at configure time.
file(RELATIVE_PATH STRATA_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
set(STRATA_PC_PREFIX "\${pcfiledir}/${STRATA_PC_UP}")
set(STRATA_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
set(STRATA_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(STRATA_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(STRATA_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(cmake/strata.pc.in ${PROJECT_BINARY_DIR}/strata.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/strata.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# Services: units and the files their EnvironmentFile= reads (examples the
# operator edits; the Debian package marks them as conffiles).
set(STRATA_SYSTEMD_UNIT_DIR "lib/systemd/system" CACHE STRING
  "where the systemd units go, relative to the prefix (Debian 12: lib/systemd/system)")
install(FILES deploy/systemd/strata-coordinator.service
  deploy/systemd/strata-worker.service
  DESTINATION ${STRATA_SYSTEMD_UNIT_DIR} COMPONENT runtime)
install(FILES deploy/systemd/coordinator.env deploy/systemd/worker.env
  deploy/demo.yaml
  DESTINATION ${CMAKE_INSTALL_SYSCONFDIR}/strata COMPONENT runtime)

# The Python package for the system interpreter (python3-strata); the
# wheel is built by python/pyproject.toml instead (cmake/StrataPackaging.cmake).
set(STRATA_PYTHON_DIR "lib/python3/dist-packages" CACHE STRING
  "where the python3-strata files go, relative to the prefix (Debian's dist-packages)")
install(DIRECTORY python/strata DESTINATION ${STRATA_PYTHON_DIR}
  COMPONENT python
  FILES_MATCHING PATTERN "*.py" PATTERN "py.typed"
  PATTERN "__pycache__" EXCLUDE)

# tests/install: the install, find_package, pkg-config, RPATH checks.
if(STRATA_BUILD_TESTS)
  strata_add_script_test(install_test
    ${PROJECT_SOURCE_DIR}/tests/install/install_test.sh ${PROJECT_BINARY_DIR} 300)
  strata_add_script_test(pip_test
    ${PROJECT_SOURCE_DIR}/tests/install/pip_test.sh ${PROJECT_BINARY_DIR} 300)
endif()
