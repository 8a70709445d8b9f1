// Prints every published run (tests/planner/published_runs.h) with the planner's predictions as one JSON
// array on stdout: what scripts/planner_validation_table.py renders into docs/planner.md's validation table.
// Facts only, no formatting: the row as published (name, source, GPUs, batch, sequence, recompute, published
// TFLOP/s and tokens/s per GPU, known miss, convention, the figure as stated), the estimate of its own
// layout (the layout, TFLOP/s and tokens/s per GPU, predicted over published, memory and stage of the worst
// stage) and auto's choice (its layout, recompute and TFLOP/s). Exit status 1, with the row named on stderr,
// when a layout is rejected or auto fails: the PublishedRunTest cases say why.
#include <cstdio>
#include <string>

#include "core/json.h"
#include "planner/planner.h"
#include "tests/planner/published_runs.h"

namespace shepherd {
namespace {

using testing::PublishedRun;

std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;  // UTF-8 passes through
    }
  }
  return out + "\"";
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string PlanJson(const Plan& p) {
  return "{\"tp\": " + std::to_string(p.tp) + ", \"cp\": " + std::to_string(p.cp) +
         ", \"pp\": " + std::to_string(p.pp) + ", \"vpp\": " + std::to_string(p.vpp) +
         ", \"ep\": " + std::to_string(p.ep) + ", \"etp\": " + std::to_string(p.expert_tp()) +
         ", \"dp\": " + std::to_string(p.dp) + ", \"zero_stage\": " + std::to_string(p.zero_stage) +
         ", \"micro_batch_size\": " + std::to_string(p.micro_batch_size) + "}";
}

int Run() {
  std::printf("[\n");
  bool first = true;
  for (const PublishedRun& r : testing::PublishedRuns()) {
    auto e = EvaluatePlan(r.spec, r.layout, r.hw);
    if (!e.ok()) {
      std::fprintf(stderr, "%s: %s\n", r.name, e.status().message().c_str());
      return 1;
    }
    auto chosen = AutoPlan(r.spec, r.hw);
    if (!chosen.ok()) {
      std::fprintf(stderr, "%s: auto: %s\n", r.name, chosen.status().message().c_str());
      return 1;
    }
    const double gpus = static_cast<double>(r.spec.resources.gpus);
    std::printf("%s  {\"name\": %s, \"test_name\": %s, \"source\": %s, \"gpus\": %s, \"gpu\": %s,\n",
                first ? "" : ",\n", Quoted(r.name).c_str(), Quoted(testing::TestName(r)).c_str(),
                Quoted(r.source).c_str(), Number(gpus).c_str(), Quoted(r.spec.resources.gpu).c_str());
    std::printf("   \"global_batch_size\": %d, \"seq_len\": %s, \"recompute\": %s,\n",
                r.spec.training.global_batch_size, Number(r.spec.model.seq_len).c_str(),
                Quoted(ToString(e->activation_recompute)).c_str());
    std::printf(
        "   \"published_tflops_per_gpu\": %s, \"published_tokens_per_s_per_gpu\": %s, \"known_miss\": %s,\n",
        Number(r.published_tflops_per_gpu).c_str(), Number(r.published_tokens_per_s_per_gpu).c_str(),
        r.known_miss ? Quoted(r.known_miss).c_str() : "null");
    std::printf("   \"convention\": %s, \"published_as_stated\": %s,\n",
                r.convention ? Quoted(r.convention).c_str() : "null", Number(r.published_as_stated).c_str());
    std::printf("   \"layout\": %s,\n", PlanJson(e->plan).c_str());
    std::printf(
        "   \"predicted\": {\"fits\": %s, \"tflops_per_gpu\": %s, \"tokens_per_s_per_gpu\": %s, "
        "\"predicted_over_published\": %s, \"by_tokens\": %s, \"memory_bytes\": %s, \"stage\": %d},\n",
        e->fits ? "true" : "false", Number(e->tflops_per_gpu).c_str(), Number(e->tokens_per_s / gpus).c_str(),
        Number(testing::PredictedOverPublished(r, *e)).c_str(),
        testing::PublishedByTokens(r) ? "true" : "false", Number(e->memory.total).c_str(), e->memory.stage);
    std::printf("   \"auto\": {\"layout\": %s, \"recompute\": %s, \"tflops_per_gpu\": %s}}",
                PlanJson(chosen->plan).c_str(), Quoted(ToString(chosen->activation_recompute)).c_str(),
                Number(chosen->tflops_per_gpu).c_str());
    first = false;
  }
  std::printf("\n]\n");
  return 0;
}

}  // namespace
}  // namespace shepherd

int main() {
  return shepherd::Run();
}
