# CUDA support: finds the toolkit (the usual places, then /usr/local/cuda),
# resolves TIDAL_WITH_CUDA into TIDAL_HAVE_CUDA and, only then, enables the
# CUDA language for the kernels in src/reduce/cuda.
#
# libtidal links the CUDA runtime statically (CUDA::cudart_static): it loads
# on machines without an NVIDIA driver, where every CUDA call simply reports
# that there is no device. Driver-API functions are reached through
# cudaGetDriverEntryPointByVersion, never by linking libcuda.
#
# Kernels are built for sm_80 and sm_90 plus compute_90 PTX, which the
# driver compiles for newer GPUs. TIDAL_CUDA_ARCHITECTURES overrides that.
if(NOT DEFINED CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
if(NOT TIDAL_WITH_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
endif()
if(NOT CUDAToolkit_FOUND OR NOT CUDAToolkit_NVCC_EXECUTABLE)
  set(CUDAToolkit_FOUND OFF)
endif()
tidal_resolve_option(TIDAL_WITH_CUDA CUDAToolkit_FOUND)

if(TIDAL_HAVE_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
  endif()
  set(TIDAL_CUDA_ARCHITECTURES "80-real;90" CACHE STRING "GPU architectures the kernels are built for")
  set(CMAKE_CUDA_ARCHITECTURES ${TIDAL_CUDA_ARCHITECTURES})
  enable_language(CUDA)
  # CMake 3.25 knows CUDA dialects only up to C++17; CUDA targets inherit
  # CMAKE_CXX_STANDARD (20), so tell it nvcc's flag for that.
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(TIDAL_CUDA_FLAGS --expt-relaxed-constexpr -Xcompiler=-Wall,-Wextra)
  if(TIDAL_WARNINGS_AS_ERRORS)
    list(APPEND TIDAL_CUDA_FLAGS -Werror=all-warnings -Xcompiler=-Werror)
  endif()
  message(STATUS "CUDA ${CUDAToolkit_VERSION} at ${CUDAToolkit_BIN_DIR}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
endif()
