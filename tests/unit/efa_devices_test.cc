// EFA adapters are told apart from other RDMA devices by the kernel driver
// their PCI function is bound to, read from a sysfs tree built here the way
// the kernel lays it out (device/driver is a symlink into bus/pci/drivers).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "topology/efa_devices.h"

namespace tidal::topo {
namespace {

namespace fs = std::filesystem;

class FakeSysfs {
 public:
  FakeSysfs() : root_(fs::temp_directory_path() / ("tidal-efa-" + std::to_string(::getpid()))) {
    fs::remove_all(root_);
    fs::create_directories(root_ / "class/infiniband");
  }
  ~FakeSysfs() { fs::remove_all(root_); }
  // An RDMA device whose PCI function is bound to `driver` ("" : no driver link).
  void rdmaDevice(const std::string& name, const std::string& driver) {
    const fs::path pci = root_ / "devices/pci0000:00" / (name + "-fn");
    fs::create_directories(pci);
    if (!driver.empty()) {
      fs::create_directories(root_ / "bus/pci/drivers" / driver);
      fs::create_directory_symlink(root_ / "bus/pci/drivers" / driver, pci / "driver");
    }
    fs::create_directories(root_ / "class/infiniband" / name);
    fs::create_directory_symlink(pci, root_ / "class/infiniband" / name / "device");
  }
  std::string root() const { return root_.string(); }

 private:
  fs::path root_;
};

TEST(EfaDevices, OnlyDevicesBoundToTheEfaDriver) {
  FakeSysfs sys;
  sys.rdmaDevice("rdmap16s27", "efa");
  sys.rdmaDevice("mlx5_0", "mlx5_core");
  sys.rdmaDevice("rdmap0s6", "efa");
  sys.rdmaDevice("rxe0", "");  // Soft-RoCE: no PCI driver of its own
  EXPECT_EQ(efaDevices(sys.root()), (std::vector<std::string>{"rdmap0s6", "rdmap16s27"}));
}

TEST(EfaDevices, NoneWithoutEfaOrWithoutTheTree) {
  FakeSysfs sys;
  sys.rdmaDevice("mlx5_0", "mlx5_core");
  EXPECT_TRUE(efaDevices(sys.root()).empty());
  EXPECT_TRUE(efaDevices(sys.root() + "/no/such/dir").empty());
}

}  // namespace
}  // namespace tidal::topo
