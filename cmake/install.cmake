# `cmake --install <build> [--prefix P]`: the public headers, libferry.a and libferry_doctor.a, the CMake package (ferryConfig.cmake,
# ferryConfigVersion.cmake, ferryTargets.cmake with the target ferry::ferry) and ferry.pc for pkg-config.
# Everything here is in the component `devel`; the CLI and the Python module have their own.
# tests/downstream/ builds a project against the result three ways: see tests/downstream/check.sh.
include(CMakePackageConfigHelpers)

set(FERRY_CMAKE_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/ferry"
    CACHE STRING "Where ferryConfig.cmake goes, relative to the prefix")
set(FERRY_PKGCONFIG_INSTALL_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig"
    CACHE STRING "Where ferry.pc goes, relative to the prefix")

install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/ferry" DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        COMPONENT devel FILES_MATCHING PATTERN "*.hpp")
install(TARGETS ferry_lib ferry_doctor ferry_all EXPORT ferryTargets
        ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}" COMPONENT devel
        INCLUDES DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
install(EXPORT ferryTargets NAMESPACE ferry:: DESTINATION "${FERRY_CMAKE_INSTALL_DIR}" COMPONENT devel)

configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/ferryConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/package/ferryConfig.cmake"
  INSTALL_DESTINATION "${FERRY_CMAKE_INSTALL_DIR}")
# 0.x: a new minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file("${PROJECT_BINARY_DIR}/package/ferryConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}" COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/package/ferryConfig.cmake" "${PROJECT_BINARY_DIR}/package/ferryConfigVersion.cmake"
        DESTINATION "${FERRY_CMAKE_INSTALL_DIR}" COMPONENT devel)

# ferry.pc names its prefix relative to where it is installed (${pcfiledir}), so `cmake --install --prefix P`
# gives a correct file whatever prefix was configured. Absolute directories are written as they are.
if(IS_ABSOLUTE "${FERRY_PKGCONFIG_INSTALL_DIR}")
  set(FERRY_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH FERRY_PC_UP "/ferry-prefix/${FERRY_PKGCONFIG_INSTALL_DIR}" "/ferry-prefix")
  string(REGEX REPLACE "/$" "" FERRY_PC_UP "${FERRY_PC_UP}")
  set(FERRY_PC_PREFIX "\${pcfiledir}/${FERRY_PC_UP}")
endif()
foreach(kind IN ITEMS LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(FERRY_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(FERRY_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
# What a link with libferry.a needs besides it: fmt (through Requires), the thread library and libdl.
set(FERRY_PC_LIBS_DEPS "${CMAKE_THREAD_LIBS_INIT}")
foreach(lib IN LISTS CMAKE_DL_LIBS)
  string(APPEND FERRY_PC_LIBS_DEPS " -l${lib}")
endforeach()
string(STRIP "${FERRY_PC_LIBS_DEPS}" FERRY_PC_LIBS_DEPS)
set(FERRY_PC_REQUIRES "fmt")
if(FERRY_HAVE_REMOTE)
  string(APPEND FERRY_PC_REQUIRES " libcurl libcrypto")
endif()
if(FERRY_HAVE_IO_URING)
  string(APPEND FERRY_PC_REQUIRES " liburing")
endif()
configure_file("${CMAKE_CURRENT_LIST_DIR}/ferry.pc.in" "${PROJECT_BINARY_DIR}/package/ferry.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/package/ferry.pc" DESTINATION "${FERRY_PKGCONFIG_INSTALL_DIR}" COMPONENT devel)
