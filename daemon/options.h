// Command-line parsing shared by the shepherdd subcommands: options only, and a word that is no option is
// refused by name rather than ignored.
#pragma once

#include <boost/program_options.hpp>
#include <iostream>
#include <string>
#include <vector>

namespace shepherd {

// Parses argv (argv[0] is skipped by the parser) against `opts` into `vm`. On a bad option or a stray word,
// prints "<prog>: <error><hint>" and the options to stderr and returns false: the caller exits 2.
inline bool ParseOnlyOptions(int argc, char** argv, const boost::program_options::options_description& opts,
                             boost::program_options::variables_map* vm, const char* prog,
                             const char* stray_hint = "") {
  namespace po = boost::program_options;
  try {
    po::options_description all;
    all.add(opts).add_options()("stray", po::value<std::vector<std::string>>());
    po::store(po::command_line_parser(argc, argv)
                  .options(all)
                  .positional(po::positional_options_description().add("stray", -1))
                  .run(),
              *vm);
    po::notify(*vm);
    if (vm->count("stray"))
      throw std::invalid_argument("unexpected argument '" + (*vm)["stray"].as<std::vector<std::string>>()[0] +
                                  "'" + stray_hint);
  } catch (const std::exception& e) {
    std::cerr << prog << ": " << e.what() << "\n" << opts << "\n";
    return false;
  }
  return true;
}

}  // namespace shepherd
