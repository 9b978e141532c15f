// Runs a command body and turns the errors it may raise into messages and exit codes.
#pragma once

#include <exception>
#include <functional>
#include <iostream>

#include "db/sqlite_util.h"
#include "tuner/cli/commands.h"
#include "tuner/config.h"

namespace mlatune::cli {

inline int run_guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const ConfigError& e) {
    std::cerr << "mlatune: config error: " << e.what() << "\n";
    return kExitConfig;
  } catch (const DbError& e) {
    std::cerr << "mlatune: database error: " << e.what() << "\n";
    return kExitDatabase;
  } catch (const LaunchError& e) {
    std::cerr << "mlatune: device error: " << e.what() << "\n";
    return kExitNoDevice;
  } catch (const std::exception& e) {
    std::cerr << "mlatune: error: " << e.what() << "\n";
    return kExitInternal;
  }
}

}  // namespace mlatune::cli
