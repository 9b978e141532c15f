# What `cmake --install` lays out for consumers: libmlatune.so with its soname links, the two
# public headers, a relocatable CMake package (mlatune::mlatune) and mlatune.pc; plus the
# `mlatune` CLI, which is how a database gets made. Static internal libraries and test programs are
# never installed: libmlatune.so carries all of their code. Components, for packagers: Runtime (the
# library), Development (headers, the libmlatune.so link, CMake and pkg-config files), Tools (CLI),
# Python (the ctypes binding, python/mlatune, which loads the Runtime component's library).
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

# The Python binding, pure Python: into lib/python3/dist-packages (not the libdir, which may be
# lib/<multiarch>), which is on Debian's sys.path for the prefix /usr; for another prefix, put
# <prefix>/lib/python3/dist-packages on PYTHONPATH. The package finds the library of its own
# prefix through a relative path recorded here, so a prefix moved as a whole keeps working.
set(MLATUNE_INSTALL_PYTHONDIR lib/python3/dist-packages CACHE STRING
    "Where cmake --install puts the Python package mlatune (relative to the prefix)")
if(IS_ABSOLUTE "${MLATUNE_INSTALL_PYTHONDIR}")
  set(mlatune_python_package_dir "${MLATUNE_INSTALL_PYTHONDIR}/mlatune")
else()
  set(mlatune_python_package_dir "${CMAKE_INSTALL_PREFIX}/${MLATUNE_INSTALL_PYTHONDIR}/mlatune")
endif()
file(RELATIVE_PATH MLATUNE_PYTHON_TO_LIBDIR ${mlatune_python_package_dir}
     ${CMAKE_INSTALL_FULL_LIBDIR})
set(MLATUNE_PYTHON_LIBRARY_FILE libmlatune.so.${PROJECT_VERSION_MAJOR})
configure_file(${PROJECT_SOURCE_DIR}/python/mlatune/_install_layout.py.in
               ${PROJECT_BINARY_DIR}/python/mlatune/_install_layout.py @ONLY)
install(FILES ${PROJECT_SOURCE_DIR}/python/mlatune/__init__.py
              ${PROJECT_SOURCE_DIR}/python/mlatune/_checks.py
              ${PROJECT_BINARY_DIR}/python/mlatune/_install_layout.py
        DESTINATION ${MLATUNE_INSTALL_PYTHONDIR}/mlatune COMPONENT Python)
