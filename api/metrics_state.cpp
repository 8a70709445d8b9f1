#include "api/metrics_state.h"

#include <cstdio>
#include <string_view>

#include "goodput/accounting.h"

namespace shepherd {
namespace {

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// A label value as the text format requires: backslash, double quote and newline escaped.
void AppendLabel(std::string_view v, std::string* out) {
  for (char ch : v) {
    if (ch == '\\' || ch == '"') {
      out->push_back('\\');
      out->push_back(ch);
    } else if (ch == '\n') {
      out->append("\\n");
    } else {
      out->push_back(ch);
    }
  }
}

void Header(const char* name, const char* type, const char* help, std::string* out) {
  *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

// One family's samples, collected while the jobs are walked once.
struct Family {
  const char* name;
  const char* type;
  const char* help;
  std::string samples;
  void Sample(const std::string& job, std::string_view extra_labels, const std::string& value) {
    samples += name;
    samples += "{job=\"";
    AppendLabel(job, &samples);
    samples += '"';
    samples += extra_labels;
    samples += "} ";
    samples += value;
    samples += '\n';
  }
  void AppendTo(std::string* out) const {
    Header(name, type, help, out);
    *out += samples;
  }
};

void AppendJobMetrics(const Controller& c, Time now, std::string* out) REQUIRES_SHARED(kControl) {
  Family state{"shepherd_job_state",
               "gauge",
               "1 for the job's current state (queued, launching, running, recovering, succeeded, failed, "
               "cancelled); one series per job.",
               {}};
  Family attempt{"shepherd_job_attempt", "gauge", "The job's current attempt number (0: never started).", {}};
  Family budget{
      "shepherd_job_automatic_restarts",
      "gauge",
      "Automatic restarts the job has used against policy.max_restarts (kept across daemon restarts).",
      {}};
  Family step{"shepherd_job_last_step",
              "gauge",
              "The highest step any rank reported in the job's latest attempt (absent: none yet).",
              {}};
  Family step_time{"shepherd_job_step_time_seconds",
                   "gauge",
                   "Seconds per step of the running attempt: the median over the straggler window, else "
                   "the latest reported (absent: none reported).",
                   {}};
  Family restarts{"shepherd_job_restarts_total",
                  "counter",
                  "Restarts since the daemon started, by cause: the finding kind that led recovery to "
                  "restart the job, operator, or launch_timeout.",
                  {}};
  std::string labels;
  c.view().VisitJobMetrics(now - Seconds(kEndedJobSeriesSeconds), [&](const Controller::JobMetrics& m) {
    const std::string& id = m.job->id;
    labels = ",state=\"";
    labels += ToString(m.job->state);
    labels += '"';
    state.Sample(id, labels, "1");
    attempt.Sample(id, "", std::to_string(m.job->attempt));
    budget.Sample(id, "", std::to_string(m.job->restarts));
    if (m.last_step >= 0) step.Sample(id, "", std::to_string(m.last_step));
    if (m.step_time_s > 0) step_time.Sample(id, "", Num(m.step_time_s));
    if (m.restarts)
      for (const auto& [cause, n] : *m.restarts) {
        labels = ",cause=\"";
        AppendLabel(cause, &labels);
        labels += '"';
        restarts.Sample(id, labels, std::to_string(n));
      }
  });
  for (const Family* f : {&state, &attempt, &budget, &step, &step_time, &restarts}) f->AppendTo(out);
}

// Goodput per job (docs/goodput.md): the seconds of every bucket and the ETTR, accounted from the records
// in memory at each scrape. O(jobs and their attempts and checkpoints).
void AppendGoodputMetrics(const Controller& c, Time now, std::string* out) REQUIRES_SHARED(kControl) {
  Family seconds{"shepherd_job_goodput_seconds",
                 "gauge",
                 "Seconds of the job's wall time (submission to its end, or now) in each goodput bucket "
                 "(queued, startup, productive, lost_progress, checkpoint_save, detection, recovery, backoff, "
                 "unattributed); the buckets sum to the wall time.",
                 {}};
  Family ettr{"shepherd_job_ettr", "gauge",
              "The job's effective training time ratio: productive seconds over wall seconds.", {}};
  std::string labels;
  c.view().VisitGoodputRecords(now - Seconds(kEndedJobSeriesSeconds), true,
                        [&](const Controller::GoodputRecords& r) {
                          const JobGoodput g = AccountJob(r.Input(now));
                          for (int b = 0; b < kBucketCount; ++b) {
                            labels = ",bucket=\"";
                            labels += ToString(static_cast<Bucket>(b));
                            labels += '"';
                            seconds.Sample(r.job->id, labels, Num(g.buckets[b].seconds));
                          }
                          ettr.Sample(r.job->id, "", Num(g.ettr));
                        });
  seconds.AppendTo(out);
  ettr.AppendTo(out);
}

void AppendFleetMetrics(const Controller& c, std::string* out) REQUIRES_SHARED(kControl) {
  const Controller::FleetFacts fleet = c.view().Fleet();
  Header("shepherd_nodes", "gauge", "Nodes by state (every state, 0 included).", out);
  // Every state the enum names (ToString answers "unknown" past the last), so a state added later is
  // listed without a change here.
  for (int i = 0;; ++i) {
    const auto s = static_cast<NodeState>(i);
    const std::string_view name = ToString(s);
    if (name == "unknown") break;
    auto it = fleet.by_state.find(s);
    *out += "shepherd_nodes{state=\"" + std::string(name) + "\"} " +
            std::to_string(it == fleet.by_state.end() ? 0 : it->second) + "\n";
  }
  Header("shepherd_spare_nodes", "gauge", "Nodes held aside as spares, whatever their state.", out);
  *out += "shepherd_spare_nodes " + std::to_string(fleet.spare_nodes) + "\n";
  auto free = fleet.by_state.find(NodeState::kSpare);
  Header(
      "shepherd_spare_nodes_free", "gauge",
      "Spare nodes ready for a replacement (shepherd_nodes{state=\"spare\"}): schedulable, healthy, no job "
      "on them.",
      out);
  *out +=
      "shepherd_spare_nodes_free " + std::to_string(free == fleet.by_state.end() ? 0 : free->second) + "\n";
}

}  // namespace

void AppendStateMetrics(const Controller& c, Time now, std::string* out) {
  AppendFleetMetrics(c, out);
  AppendJobMetrics(c, now, out);
  AppendGoodputMetrics(c, now, out);
}

}  // namespace shepherd
