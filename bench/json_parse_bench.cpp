// ParseJsonText (core/json.h) on the bodies that held the control thread, against the version before its
// scan was made linear (copied below as the baseline): a flat object of 100,000 keys (1.5 MB) and a 4 MiB
// batch of rank reports. See docs/benchmarks.md, "JSON parsing".
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/json.h"

namespace shepherd {
namespace {

// The scan of ParseJsonText before: each key compared with every earlier key of its object.
Result<Json> BaselineParseJsonText(std::string_view text, int max_depth) {
  // One scan before parsing: nesting deeper than max_depth is refused before anything deep is built, and a
  // key given twice in one object (the parser would keep the last value without a word) is found, by its
  // text as written (a key spelled once with \u escapes and once without is not seen). Malformed text is
  // left to the parser, whose error comes first.
  struct Open {
    bool object = false;
    std::size_t first_key = 0;  // objects: their keys start here in `keys`
    long index = 0;             // arrays: the element being read
    std::string_view key;       // objects: the member being read
  };
  std::vector<Open> open;
  std::vector<std::string_view> keys;  // of the open objects, innermost last
  std::string duplicate;
  bool in_string = false, escaped = false, is_key = false, expect_key = false;
  std::size_t string_start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
        if (is_key && !open.empty()) {
          const std::string_view key = text.substr(string_start, i - string_start);
          const auto first = keys.begin() + static_cast<long>(open.back().first_key);
          if (std::find(first, keys.end(), key) != keys.end() && duplicate.empty()) {
            open.back().key = key;
            for (const Open& o : open)
              duplicate += o.object ? (duplicate.empty() ? "" : ".") + std::string(o.key)
                                    : "[" + std::to_string(o.index) + "]";
          }
          keys.push_back(key);
          open.back().key = key;
        }
      }
    } else if (c == '"') {
      in_string = true;
      is_key = expect_key;
      expect_key = false;
      string_start = i + 1;
    } else if (c == '{' || c == '[') {
      if (static_cast<int>(open.size()) >= max_depth)
        return InvalidArgument("JSON nesting is deeper than " + std::to_string(max_depth) + " levels");
      open.push_back({.object = c == '{', .first_key = keys.size()});
      expect_key = c == '{';
    } else if (c == '}' || c == ']') {
      if (!open.empty()) {
        keys.resize(open.back().first_key);
        open.pop_back();
      }
      expect_key = false;
    } else if (c == ',' && !open.empty()) {
      if (open.back().object)
        expect_key = true;
      else
        ++open.back().index;
    }
  }
  try {
    Json j = Json::parse(text);
    if (!duplicate.empty())
      return Status(Code::kInvalidArgument, "the key '" + duplicate + "' is given twice in one object",
                    {{duplicate, "given twice in one object"}});
    return j;
  } catch (const Json::exception& e) {
    // nlohmann's message without its "[json.exception.parse_error.101] " tag: where and what (it quotes
    // the last token read, escaped; cut to a line).
    std::string what = e.what();
    if (const std::size_t tag = what.find("] ");
        what.starts_with("[json.exception.") && tag != std::string::npos)
      what.erase(0, tag + 2);
    if (what.size() > 200) what = what.substr(0, 200) + "...";
    return InvalidArgument("the body is not valid JSON: " + what);
  }
}

std::string FlatObject(int keys) {
  std::string text = "{";
  for (int i = 0; i < keys; ++i) text += "\"key" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  return text + "\"end\":0}";
}

// Reports as the rank client sends them, until the batch reaches 4 MiB.
std::string ReportBatch4MiB() {
  std::string text = "{\"reports\": [";
  for (int i = 0; text.size() < (std::size_t{4} << 20) - 400; ++i)
    text += std::string(i ? "," : "") + "{\"rank\": " + std::to_string(i % 4096) +
            ", \"attempt\": 3, \"kind\": \"heartbeat\", \"time\": 1767225600.25, \"step\": 1200, "
            "\"collective\": {\"seq\": 9, \"op\": \"all_reduce\", \"group\": \"dp\", "
            "\"since\": 1767225599.5}, \"loss\": 2.25, \"step_time_s\": 0.8}";
  return text + "]}";
}

JsonLimits Unlimited() {
  JsonLimits l = kLargeJsonLimits;
  l.max_depth = 64;
  return l;
}

void BM_Flat100kKeys(benchmark::State& state) {
  const std::string text = FlatObject(100000);
  for (auto _ : state) benchmark::DoNotOptimize(ParseJsonText(text, Unlimited()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
void BM_Flat100kKeysRefusedAtTheDefaultLimit(benchmark::State& state) {
  const std::string text = FlatObject(100000);
  for (auto _ : state) benchmark::DoNotOptimize(ParseJsonText(text));
}
void BM_Flat100kKeysBaseline(benchmark::State& state) {
  const std::string text = FlatObject(100000);
  for (auto _ : state) benchmark::DoNotOptimize(BaselineParseJsonText(text, 64));
}
void BM_ReportBatch4MiB(benchmark::State& state) {
  const std::string text = ReportBatch4MiB();
  for (auto _ : state) benchmark::DoNotOptimize(ParseJsonText(text));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
void BM_ReportBatch4MiBBaseline(benchmark::State& state) {
  const std::string text = ReportBatch4MiB();
  for (auto _ : state) benchmark::DoNotOptimize(BaselineParseJsonText(text, 64));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

BENCHMARK(BM_Flat100kKeys)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Flat100kKeysRefusedAtTheDefaultLimit)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Flat100kKeysBaseline)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_ReportBatch4MiB)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReportBatch4MiBBaseline)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace shepherd

BENCHMARK_MAIN();
