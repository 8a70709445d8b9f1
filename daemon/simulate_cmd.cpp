// `shepherdd simulate`: the run simulator (goodput/simulator.h) from the command line. The flags become the
// body POST /v1/simulate takes, so both read and refuse input alike (api/simulate_json.h).
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "api/simulate_json.h"
#include "daemon/commands.h"
#include "daemon/options.h"

namespace po = boost::program_options;

namespace shepherd {

namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

void PrintSummary(const SimInput& in, const SimResult& r) {
  std::cout << "Scenario: Llama 3 fault model (Dubey et al. 2024, Table 5), "
            << Fixed(in.duration_s / 86400, 1) << " days, " << Fixed(r.job_nodes, 0) << " job nodes ("
            << Fixed(r.job_gpus, 0) << " GPUs), " << r.spares << " spares, " << in.seeds << " seeds\n";
  std::cout << "ETTR: " << Fixed(r.ettr_mean, 3) << " [" << Fixed(r.ettr_low, 3) << ", "
            << Fixed(r.ettr_high, 3) << "]\n";
  std::cout << "Checkpoint interval: " << Fixed(r.interval_s, 0) << " s simulated; advised (Daly) "
            << Fixed(r.advice.interval_s, 0) << " s, expected ETTR there " << Fixed(r.advice.ettr_advised, 3)
            << "; job MTBF " << Fixed(r.advice.mtbf_s / 60, 1) << " min\n";
  std::cout << "Restarts per run: " << Fixed(r.restarts_mean, 1) << "\n";
  std::cout << "Detection (s):";
  for (int c = 0; c < kFaultCauseCount; ++c)
    std::cout << " " << ToString(static_cast<FaultCause>(c)) << " " << Fixed(r.detection_s[c], 1);
  std::cout << "\nBadput by cause (GPU-hours, mean per run):\n";
  const Json j = ToJson(r);
  for (const auto& [name, v] : j["badput_by_cause"].items())
    std::cout << "  " << name << ": " << Fixed(v["gpu_hours"].get<double>(), 0) << "\n";
  std::cout << "Time (hours, mean per run):";
  for (const auto& [name, v] : j["buckets"].items())
    std::cout << " " << name << " " << Fixed(v["seconds"].get<double>() / 3600, 1);
  std::cout << "\nSpares: " << r.spares << " at start, fewest ready " << r.min_ready_spares
            << ", most nodes in repair at once " << r.spares_needed << "\n";
}

}  // namespace

int RunSimulate(int argc, char** argv) {
  po::options_description opts(
      "Usage: shepherdd simulate [options]\n\n"
      "Predicts a training run's effective training time ratio (ETTR) with the daemon's own recovery "
      "policy. Options");
  opts.add_options()("help,h", "show this help")("scenario", po::value<std::string>(),
                                                 "llama3 (the default)")("nodes", po::value<long long>(),
                                                                         "job nodes of 8 GPUs [2048]")(
      "spares-per-leaf", po::value<long long>(), "spares in each leaf of 16 job nodes [1]")(
      "days", po::value<double>(), "length of the run [54]")(
      "interval-s", po::value<double>(), "seconds of training between checkpoints [the advised interval]")(
      "seeds", po::value<long long>(), "independent runs [8]")(
      "seed", po::value<long long>(), "first seed [1]")("repair-hours", po::value<double>(),
                                                        "a failed node returns as a spare after [48]")(
      "save-s", po::value<double>(), "seconds training waits per checkpoint [30]")(
      "load-s", po::value<double>(), "seconds to load a checkpoint [30]")(
      "request", po::value<std::string>(),
      "a POST /v1/simulate body (JSON text); the flags above override it")(
      "json", "print the answer of POST /v1/simulate");
  po::variables_map vm;
  if (!ParseOnlyOptions(argc, argv, opts, &vm, "shepherdd simulate")) return 2;
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  Json body = Json::object();
  if (vm.count("request")) {
    Result<Json> given = ParseJsonText(vm["request"].as<std::string>());
    if (!given.ok() || !given->is_object()) {
      std::cerr << "shepherdd simulate: --request: "
                << (given.ok() ? "must be a JSON object" : given.status().message()) << "\n";
      return 2;
    }
    body = std::move(given).value();
  }
  if (vm.count("scenario")) body["scenario"] = vm["scenario"].as<std::string>();
  if (vm.count("nodes")) body["nodes"] = vm["nodes"].as<long long>();
  if (vm.count("spares-per-leaf")) body["spares_per_leaf"] = vm["spares-per-leaf"].as<long long>();
  if (vm.count("days")) body["days"] = vm["days"].as<double>();
  if (vm.count("interval-s")) body["interval_s"] = vm["interval-s"].as<double>();
  if (vm.count("seeds")) body["seeds"] = vm["seeds"].as<long long>();
  if (vm.count("seed")) body["seed"] = vm["seed"].as<long long>();
  if (vm.count("repair-hours")) body["repair_hours"] = vm["repair-hours"].as<double>();
  if (vm.count("save-s")) body["timing"]["save_s"] = vm["save-s"].as<double>();
  if (vm.count("load-s")) body["timing"]["load_s"] = vm["load-s"].as<double>();
  Result<SimInput> in = ParseSimRequest(body);
  if (!in.ok()) {
    std::cerr << "shepherdd simulate: " << in.status().message() << "\n";
    for (const FieldError& e : in.status().fields())
      std::cerr << "  " << e.field << ": " << e.message << "\n";
    return 2;
  }
  Result<SimResult> r = Simulate(*in);
  if (!r.ok()) {
    std::cerr << "shepherdd simulate: " << r.status().message() << "\n";
    for (const FieldError& e : r.status().fields()) std::cerr << "  " << e.field << ": " << e.message << "\n";
    return 2;
  }
  if (vm.count("json")) {
    std::cout << ToJson(*r).dump(2) << "\n";
    return 0;
  }
  PrintSummary(*in, *r);
  return 0;
}

}  // namespace shepherd
