# CPACK_PRE_BUILD_SCRIPTS (cmake/StrataPackaging.cmake): runs on CPack's
# staging tree after the install, before the .deb files are made. The
# install rules put configuration under <prefix>/etc (right for
# `cmake --install --prefix P`); Debian wants /etc, not /usr/etc (FHS;
# lintian FSSTND-dir-in-usr), and deploy/debian/conffiles names /etc/strata.
file(GLOB strata_usr_etc LIST_DIRECTORIES true
  "${CPACK_TEMPORARY_DIRECTORY}/*/usr/etc" "${CPACK_TEMPORARY_DIRECTORY}/usr/etc")
foreach(dir IN LISTS strata_usr_etc)
  get_filename_component(usr "${dir}" DIRECTORY)
  get_filename_component(root "${usr}" DIRECTORY)
  file(RENAME "${dir}" "${root}/etc")
endforeach()
