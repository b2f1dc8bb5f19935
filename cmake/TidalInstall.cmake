include(CMakePackageConfigHelpers)

install(TARGETS tidal EXPORT tidalTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/tidal DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT tidalTargets NAMESPACE tidal:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tidal)

configure_package_config_file(cmake/tidalConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tidalConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tidal)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tidalConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tidalConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/tidalConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tidal)

# The prefix is written relative to the .pc file's own place, so that
# `cmake --install build --prefix P` (any P, chosen after configuring) gives a
# tidal.pc that points into P.
file(RELATIVE_PATH TIDAL_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" TIDAL_PC_TO_PREFIX "${TIDAL_PC_TO_PREFIX}")
configure_file(cmake/tidal.pc.in ${CMAKE_CURRENT_BINARY_DIR}/tidal.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tidal.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
