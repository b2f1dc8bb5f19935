# Finds what the torch.distributed backend (python/) needs: a Python that
# imports torch, torch's C++ headers with c10d (libtorch-dev), pybind11 and
# the torch libraries. Sets TIDAL_HAVE_TORCH from TIDAL_WITH_TORCH
# (AUTO|ON|OFF); AUTO quietly leaves the backend out when any piece is missing.
#
# Debian's torch lives in the system Python (/usr/bin/python3), which need not
# be the python3 first on PATH (pyenv, venvs), so the system one is tried first
# unless TIDAL_TORCH_PYTHON names one.
set(TIDAL_TORCH_FOUND OFF)
set(TIDAL_TORCH_PYTHON "" CACHE FILEPATH "Python interpreter with torch for the tidal backend")
if(NOT TIDAL_WITH_TORCH STREQUAL "OFF")
  set(candidates ${TIDAL_TORCH_PYTHON} /usr/bin/python3)
  find_program(TIDAL_PATH_PYTHON3 python3)
  if(TIDAL_PATH_PYTHON3)
    list(APPEND candidates ${TIDAL_PATH_PYTHON3})
  endif()
  set(probe "import sys, sysconfig, torch, torch.distributed as d\n"
            "from torch.utils import cpp_extension as c\n"
            "assert d.is_available()\n"
            "print(','.join(c.include_paths()))\n"
            "print(','.join(c.library_paths()))\n"
            "print(sysconfig.get_paths()['include'])\n"
            "print(sysconfig.get_config_var('EXT_SUFFIX'))\n"
            "print(int(torch._C._GLIBCXX_USE_CXX11_ABI))\n"
            "print(torch.__version__)\n"
            "print(sysconfig.get_python_version())\n")
  string(CONCAT probe ${probe})
  foreach(py IN LISTS candidates)
    if(NOT EXISTS "${py}")
      continue()
    endif()
    execute_process(COMMAND "${py}" -c "${probe}" RESULT_VARIABLE rc OUTPUT_VARIABLE raw
                    ERROR_QUIET)
    if(rc EQUAL 0)
      string(REGEX MATCHALL "[^\n]+" lines "${raw}")
      list(GET lines 0 TIDAL_TORCH_INCLUDE_DIRS)
      list(GET lines 1 TIDAL_TORCH_LIBRARY_DIRS)
      list(GET lines 2 TIDAL_TORCH_PYTHON_INCLUDE)
      list(GET lines 3 TIDAL_TORCH_EXT_SUFFIX)
      list(GET lines 4 TIDAL_TORCH_CXX11_ABI)
      list(GET lines 5 TIDAL_TORCH_VERSION)
      list(GET lines 6 TIDAL_TORCH_PYTHON_VERSION)
      string(REPLACE "," ";" TIDAL_TORCH_INCLUDE_DIRS "${TIDAL_TORCH_INCLUDE_DIRS}")
      string(REPLACE "," ";" TIDAL_TORCH_LIBRARY_DIRS "${TIDAL_TORCH_LIBRARY_DIRS}")
      set(TIDAL_TORCH_PYTHON_EXE "${py}")
      break()
    endif()
  endforeach()
  if(TIDAL_TORCH_PYTHON_EXE)
    find_path(TIDAL_TORCH_C10D_HEADER torch/csrc/distributed/c10d/ProcessGroup.hpp
              HINTS ${TIDAL_TORCH_INCLUDE_DIRS})
    find_path(TIDAL_PYBIND11_INCLUDE pybind11/pybind11.h
              HINTS ${TIDAL_TORCH_INCLUDE_DIRS} ${TIDAL_TORCH_PYTHON_INCLUDE})
    set(libs_ok ON)
    foreach(lib c10 torch torch_cpu torch_python)
      find_library(TIDAL_TORCH_LIB_${lib} ${lib} HINTS ${TIDAL_TORCH_LIBRARY_DIRS})
      if(NOT TIDAL_TORCH_LIB_${lib})
        set(libs_ok OFF)
      endif()
    endforeach()
    if(TIDAL_TORCH_C10D_HEADER AND TIDAL_PYBIND11_INCLUDE AND libs_ok)
      set(TIDAL_TORCH_FOUND ON)
      message(STATUS "torch ${TIDAL_TORCH_VERSION} for the tidal backend: ${TIDAL_TORCH_PYTHON_EXE}")
    else()
      message(STATUS "torch backend: torch imports in ${TIDAL_TORCH_PYTHON_EXE}, but headers "
                     "(c10d: '${TIDAL_TORCH_C10D_HEADER}', pybind11: '${TIDAL_PYBIND11_INCLUDE}') "
                     "or libraries are missing (libtorch-dev, pybind11-dev)")
    endif()
  else()
    message(STATUS "torch backend: no Python with torch.distributed found (python3-torch)")
  endif()
endif()
tidal_resolve_option(TIDAL_WITH_TORCH TIDAL_TORCH_FOUND)
