# What `cmake --install` lays out for consumers: libmlatune.so with its soname links, the two
# public headers, a relocatable CMake package (mlatune::mlatune) and mlatune.pc; plus the
# `mlatune` CLI, which is how a database gets made. Static internal libraries and test programs are
# never installed: libmlatune.so carries all of their code. Components, for packagers: Runtime (the
# library), Development (headers, the libmlatune.so link, CMake and pkg-config files), Tools (CLI).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(MLATUNE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/mlatune)

# INCLUDES DESTINATION sets the exported target's include directory; the internal static libraries
# are PRIVATE to the shared library, so they stay out of its INTERFACE_LINK_LIBRARIES (and SQLite,
# a DT_NEEDED of libmlatune.so, is not a link-time dependency of its consumers).
install(TARGETS mlatune EXPORT mlatuneTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime
                NAMELINK_COMPONENT Development
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/runtime/include/mlatune/mlatune.h
              ${PROJECT_SOURCE_DIR}/runtime/include/mlatune/mlatune.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mlatune COMPONENT Development)

install(EXPORT mlatuneTargets NAMESPACE mlatune:: DESTINATION ${MLATUNE_INSTALL_CMAKEDIR}
        COMPONENT Development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mlatuneConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/mlatuneConfig.cmake
                              INSTALL_DESTINATION ${MLATUNE_INSTALL_CMAKEDIR})
# The soname is the major version, so a package of the same major version is a drop-in.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mlatuneConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mlatuneConfig.cmake
              ${PROJECT_BINARY_DIR}/mlatuneConfigVersion.cmake
        DESTINATION ${MLATUNE_INSTALL_CMAKEDIR} COMPONENT Development)

# pkg-config has no notion of relocation: mlatune.pc records the configure-time prefix.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(MLATUNE_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(MLATUNE_PC_LIBDIR "\${exec_prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(MLATUNE_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(MLATUNE_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/mlatune.pc.in ${PROJECT_BINARY_DIR}/mlatune.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mlatune.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT Development)

# A relative RUNPATH: the installed CLI finds the installed libmlatune.so wherever the prefix moves.
file(RELATIVE_PATH mlatune_bin_to_lib ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
set_target_properties(mlatune_cli PROPERTIES INSTALL_RPATH "\$ORIGIN/${mlatune_bin_to_lib}")
install(TARGETS mlatune_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Tools)
