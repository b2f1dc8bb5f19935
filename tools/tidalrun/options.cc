#include "tidalrun/options.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string_view>

namespace tidalrun {

namespace {

constexpr const char* kDescription =
    "Starts N ranks of PROGRAM on this host and wires them together.\n"
    "Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,\n"
    "MASTER_PORT, TIDAL_COMM_ID, TIDAL_RANK, TIDAL_NRANKS and TIDAL_SECRET.\n"
    "Output is forwarded line by line. The exit status is the first non-zero\n"
    "status of a rank (128+S for a rank killed by signal S), 124 after --timeout,\n"
    "2 for command-line errors, 0 when every rank exits 0.";

// CLI11 only knows single-character short options, but `-np N` is what every
// MPI user types. Rewrite it to `--np`, and only among tidalrun's own options:
// the scan stops at `--` or at the program name so the program's own `-np`
// reaches it untouched. To know where the program starts, every option that
// takes a value must skip that value.
std::vector<std::string> rewriteMpiStyle(int argc, char** argv, const CLI::App& app) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--" || a.empty() || a[0] != '-' || a == "-") break;
    if (a == "-np") {
      a = "--np";
    } else if (a.rfind("-np=", 0) == 0) {
      a = "-" + a;
    }
    if (a.find('=') != std::string::npos) continue;
    const CLI::Option* opt = app.get_option_no_throw(a);
    if (opt == nullptr && a.size() > 2 && a[1] != '-') continue;  // -n4: value attached
    if (opt != nullptr && opt->get_items_expected_max() > 0) ++i;
  }
  return args;
}

bool splitAssignment(const std::string& text, std::pair<std::string, std::string>& out) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  out = {text.substr(0, eq), text.substr(eq + 1)};
  return true;
}

// CLI11's generated usage line knows nothing of the program that follows.
class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override {
    return "\nUsage: tidalrun -np N [OPTIONS] [--] PROGRAM [ARGS...]\n";
  }
};

int usageError(std::string_view message) {
  std::fprintf(stderr,
               "tidalrun: error: %.*s\n"
               "Usage: tidalrun -np N [OPTIONS] [--] PROGRAM [ARGS...]\n"
               "Run 'tidalrun --help' for the options.\n",
               static_cast<int>(message.size()), message.data());
  return kUsageExitCode;
}

}  // namespace

std::optional<Options> parseOptions(int argc, char** argv, int& exitCode) {
  Options o;
  std::vector<std::string> extraEnv;
  CLI::App app{kDescription, "tidalrun"};
  app.formatter(std::make_shared<UsageFormatter>());
  app.add_option("-n,--np", o.nranks, "Number of ranks to start (also spelled -np)")
      ->type_name("N")
      ->required()
      ->check(CLI::Range(1, 1024).description(""));
  app.add_flag("--tag-output", o.tagOutput, "Prefix every output line with \"[rank] \"");
  app.add_option("-x", extraEnv, "Set NAME=VALUE in every rank's environment (repeatable)")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--timeout", o.timeoutSeconds,
                 "Terminate the job after SECONDS and exit 124 (0: no limit)")
      ->type_name("SECONDS");
  app.add_option("--abort-grace", o.abortGraceSeconds,
                 "After a rank fails, SECONDS the others may still run before SIGTERM")
      ->capture_default_str()
      ->type_name("SECONDS");
  app.add_option("--kill-grace", o.killGraceSeconds,
                 "SECONDS between SIGTERM and SIGKILL when tidalrun terminates ranks")
      ->capture_default_str()
      ->type_name("SECONDS");
  app.add_option("--port", o.port, "Rendezvous port on 127.0.0.1 (default: a free one)")
      ->type_name("PORT")
      ->check(CLI::Range(1, 65535).description(""));
  std::string bind;
  CLI::Option* bindOption =
      app.add_option("--bind", bind,
                     "Where each rank runs, inside tidalrun's CPUs: core (one CPU each), numa "
                     "(one NUMA node's CPUs, ranks spread over the nodes), gpu (its GPU's CPUs; "
                     "core without a GPU) or none (and TIDAL_BIND=none for the library). Default: "
                     "gpu on a host with GPUs, else core. Rules: docs/topology.md")
          ->type_name("none|core|numa|gpu");
  app.add_flag("-v,--verbose", o.verbose, "Report the rendezvous and each rank's pid on stderr");
  // Everything from the first positional on is the program and its arguments.
  app.prefix_command();

  std::vector<std::string> args = rewriteMpiStyle(argc, argv, app);
  try {
    // CLI11 parses a reversed vector (it pops from the back).
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    exitCode = app.exit(e);
    return std::nullopt;
  } catch (const CLI::ParseError& e) {
    exitCode = usageError(e.what());
    return std::nullopt;
  }

  o.command = app.remaining();
  // prefix_command() also stops at an option it does not know; that is a typo
  // in tidalrun's options, not a program name. An explicit `--` lets a program
  // whose name starts with '-' through.
  if (!o.command.empty() && o.command.front() == "--") {
    o.command.erase(o.command.begin());
  } else if (!o.command.empty() && o.command.front().size() > 1 && o.command.front()[0] == '-') {
    exitCode = usageError("unknown option " + o.command.front());
    return std::nullopt;
  }
  if (o.command.empty()) {
    exitCode = usageError("no program given");
    return std::nullopt;
  }
  for (const auto& [name, value] : {std::pair{"--timeout", o.timeoutSeconds},
                                    {"--abort-grace", o.abortGraceSeconds},
                                    {"--kill-grace", o.killGraceSeconds}}) {
    // The negation also catches NaN.
    if (!(value >= 0 && value <= 1e7)) {
      exitCode = usageError(std::string(name) + " expects seconds from 0 to 1e7, got " +
                            fmt::format("{}", value));
      return std::nullopt;
    }
  }
  if (bindOption->count() > 0) {
    o.bind = tidal::topo::parseBindPolicy(bind);
    if (!o.bind) {
      exitCode = usageError("--bind expects none, core, numa or gpu, got '" + bind + "'");
      return std::nullopt;
    }
  }
  for (const auto& text : extraEnv) {
    std::pair<std::string, std::string> kv;
    if (!splitAssignment(text, kv)) {
      exitCode = usageError("-x expects NAME=VALUE, got '" + text + "'");
      return std::nullopt;
    }
    o.extraEnv.push_back(std::move(kv));
  }
  return o;
}

}  // namespace tidalrun
