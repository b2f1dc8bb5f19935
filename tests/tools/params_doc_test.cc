// docs/env.md is the user's reference for TIDAL_* parameters; it must name
// every parameter the registry declares (src/core/params_table.cc).
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "core/params.h"

namespace {

TEST(ParamsDoc, EnvMdNamesEveryParameter) {
  std::ifstream in(TIDAL_ENV_DOC);
  ASSERT_TRUE(in) << TIDAL_ENV_DOC << " does not exist";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  for (const auto& def : tidal::params::definitions()) {
    // Followed by a non-name character, so TIDAL_DEBUG alone does not count
    // for TIDAL_DEBUG_FILE.
    bool found = false;
    const std::string name = def.name;
    for (size_t at = doc.find(name); at != std::string::npos && !found;
         at = doc.find(name, at + 1)) {
      const size_t end = at + name.size();
      const char after = end < doc.size() ? doc[end] : ' ';
      found = !(std::isalnum(static_cast<unsigned char>(after)) || after == '_');
    }
    EXPECT_TRUE(found) << def.name << " is not documented in " << TIDAL_ENV_DOC;
  }
}

}  // namespace
