#include "slurm/jobs.h"

#include "slurm/scontrol_fields.h"
#include "slurm/hostlist.h"

namespace shepherd::slurm {
namespace {

Status ReadNodes(const Fields& f, const std::string& what, std::vector<std::string>& out) {
  const std::string* v = FindField(f, "NodeList");
  if (!v || v->empty() || *v == "(null)") return Status::Ok();
  auto hosts = ExpandHostlist(*v);
  if (!hosts.ok()) return InvalidArgument(what + ": " + hosts.status().message());
  out = std::move(*hosts);
  return Status::Ok();
}

}  // namespace

const char* ToString(SlurmJobState s) {
  switch (s) {
    case SlurmJobState::kPending:
      return "PENDING";
    case SlurmJobState::kRunning:
      return "RUNNING";
    case SlurmJobState::kSuspended:
      return "SUSPENDED";
    case SlurmJobState::kCompleting:
      return "COMPLETING";
    case SlurmJobState::kCompleted:
      return "COMPLETED";
    case SlurmJobState::kCancelled:
      return "CANCELLED";
    case SlurmJobState::kFailed:
      return "FAILED";
    case SlurmJobState::kTimeout:
      return "TIMEOUT";
    case SlurmJobState::kNodeFail:
      return "NODE_FAIL";
    case SlurmJobState::kPreempted:
      return "PREEMPTED";
    case SlurmJobState::kBootFail:
      return "BOOT_FAIL";
    case SlurmJobState::kDeadline:
      return "DEADLINE";
    case SlurmJobState::kOutOfMemory:
      return "OUT_OF_MEMORY";
    case SlurmJobState::kRequeued:
      return "REQUEUED";
    case SlurmJobState::kOther:
      return "OTHER";
  }
  return "OTHER";
}

SlurmJobState ParseJobState(std::string_view t) {
  for (int i = 0; i <= static_cast<int>(SlurmJobState::kOther); ++i)
    if (t == ToString(static_cast<SlurmJobState>(i))) return static_cast<SlurmJobState>(i);
  if (t == "REQUEUE_HOLD" || t == "REQUEUE_FED") return SlurmJobState::kRequeued;
  return SlurmJobState::kOther;
}

bool ValidJobId(std::string_view id) {
  auto digits = [](std::string_view d, std::size_t max) {
    return !d.empty() && d.size() <= max && d.find_first_not_of("0123456789") == std::string_view::npos;
  };
  const std::size_t under = id.find('_');
  if (under == std::string_view::npos) return digits(id, 20);
  return digits(id.substr(0, under), 20) && digits(id.substr(under + 1), 10);
}

bool IsActive(SlurmJobState s) {
  return s == SlurmJobState::kPending || s == SlurmJobState::kRunning || s == SlurmJobState::kSuspended ||
         s == SlurmJobState::kCompleting || s == SlurmJobState::kRequeued;
}

bool TasksRunning(const std::vector<SlurmStep>& steps) {
  for (const SlurmStep& s : steps) {
    const std::string_view kind = std::string_view(s.id).substr(s.id.rfind('.') + 1);
    if (s.state == "RUNNING" && kind != "batch" && kind != "extern" && kind != "interactive") return true;
  }
  return false;
}

std::optional<std::string> NotOwnedBy(const SlurmJob& job, const std::string& owner) {
  if (owner.empty() || owner == "anonymous" || job.user == owner) return std::nullopt;
  return "Slurm job " + job.id + " is " +
         (job.user.empty() ? std::string("no user's Slurm shows") : job.user + "'s") + ", not " + owner +
         "'s (the Shepherd job's owner)";
}

Result<SlurmJob> ParseJob(std::string_view scontrol_output) {
  std::vector<Fields> records = SplitRecords(scontrol_output, "JobId");
  if (records.empty()) return InvalidArgument("slurm job: no JobId in the output");
  const Fields& f = records.front();
  SlurmJob j;
  j.id = *FindField(f, "JobId");
  if (const std::string* v = FindField(f, "JobName")) j.name = *v;
  if (const std::string* v = FindField(f, "JobState")) j.state_text = *v, j.state = ParseJobState(*v);
  if (const std::string* v = FindField(f, "Reason")) j.reason = *v;
  if (const std::string* v = FindField(f, "Restarts")) j.restarts = std::atoi(v->c_str());
  if (const std::string* v = FindField(f, "ExitCode")) j.exit_code = *v;
  if (const std::string* v = FindField(f, "UserId")) j.user = v->substr(0, v->find('('));
  if (Status s = ReadNodes(f, "slurm job " + j.id, j.nodes); !s.ok()) return s;
  return j;
}

Result<std::vector<SlurmStep>> ParseSteps(std::string_view scontrol_output) {
  std::vector<SlurmStep> out;
  for (const Fields& f : SplitRecords(scontrol_output, "StepId")) {
    SlurmStep s;
    s.id = *FindField(f, "StepId");
    if (const std::string* v = FindField(f, "Name")) s.name = *v;
    if (const std::string* v = FindField(f, "State")) s.state = *v;
    if (Status st = ReadNodes(f, "slurm step " + s.id, s.nodes); !st.ok()) return st;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace shepherd::slurm
