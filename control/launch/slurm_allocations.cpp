#include "control/launch/slurm_allocations.h"

#include <algorithm>

#include "core/json.h"
#include "core/random_hex.h"

namespace shepherd {
namespace {

const std::string kReleasingKey = "slurm_alloc_releasing";

}  // namespace

const char* ToString(SlurmAllocationRecord::State s) {
  switch (s) {
    case SlurmAllocationRecord::State::kWanted:
      return "wanted";
    case SlurmAllocationRecord::State::kPending:
      return "pending";
    case SlurmAllocationRecord::State::kRunning:
      return "running";
  }
  return "wanted";
}

const SlurmAllocationRecord* SlurmAllocations::Find(const std::string& job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : &it->second;
}

std::set<std::string> SlurmAllocations::HeldNodes(const std::string& except) const {
  std::set<std::string> out;
  for (const auto& [job, a] : jobs_)
    if (job != except) out.insert(a.nodes.begin(), a.nodes.end());
  return out;
}

void SlurmAllocations::Want(const std::string& job, std::vector<std::string> nodes, const std::string& adopt_id,
                     bool named, WriteBatch* batch) {
  SlurmAllocationRecord& a = jobs_[job];
  const int64_t order = a.order;  // launch orders never repeat while the job keeps its record
  a = {};
  a.order = order;
  a.nodes = std::move(nodes);
  a.id = adopt_id;
  a.adopted = !adopt_id.empty();
  if (!a.adopted && named) a.request = RandomHex(8);
  Persist(job, batch);
}

void SlurmAllocations::Submitted(const std::string& job, const std::string& id, WriteBatch* batch) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || it->second.state != SlurmAllocationRecord::State::kWanted) return;
  it->second.state = SlurmAllocationRecord::State::kPending;
  it->second.id = id;
  Persist(job, batch);
}

std::vector<std::string> SlurmAllocations::Running(const std::string& job, const std::string& id,
                                            std::vector<std::string> nodes, WriteBatch* batch) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || (!it->second.id.empty() && it->second.id != id)) return {};
  SlurmAllocationRecord& a = it->second;
  std::vector<std::string> left;
  if (a.state == SlurmAllocationRecord::State::kRunning)
    for (const std::string& n : a.nodes)
      if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) left.push_back(n);
  if (a.state == SlurmAllocationRecord::State::kRunning && a.nodes == nodes) return left;
  a.state = SlurmAllocationRecord::State::kRunning;
  a.id = id;
  a.nodes = std::move(nodes);
  Persist(job, batch);
  return left;
}

void SlurmAllocations::Release(const std::string& job, WriteBatch* batch) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  if (!it->second.adopted && !it->second.id.empty()) releasing_.insert(it->second.id);
  Forget(job, batch);
}

void SlurmAllocations::Forget(const std::string& job, WriteBatch* batch) {
  if (jobs_.erase(job) == 0) return;
  batch->Erase(Collection::kMeta, kKeyPrefix + job);
  Json ids(releasing_);
  batch->Put(Record{Collection::kMeta, kReleasingKey, "", ids.dump()});
}

void SlurmAllocations::Cancelled(const std::string& id, WriteBatch* batch) {
  if (releasing_.erase(id) == 0) return;
  Json ids(releasing_);
  batch->Put(Record{Collection::kMeta, kReleasingKey, "", ids.dump()});
}

int64_t SlurmAllocations::NewOrder(const std::string& job, int attempt, WriteBatch* batch) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return 0;
  it->second.order += 1;
  it->second.order_attempt = attempt;
  Persist(job, batch);
  return it->second.order;
}

void SlurmAllocations::Touch(const std::string& job, WriteBatch* batch) const {
  if (jobs_.count(job)) Persist(job, batch);
}

void SlurmAllocations::Persist(const std::string& job, WriteBatch* batch) const {
  const SlurmAllocationRecord& a = jobs_.at(job);
  Json j = {{"state", ToString(a.state)},
            {"id", a.id},
            {"nodes", a.nodes},
            {"adopted", a.adopted},
            {"request", a.request},
            {"order", a.order},
            {"order_attempt", a.order_attempt}};
  batch->Put(Record{Collection::kMeta, kKeyPrefix + job, job, j.dump()});
}

Result<bool> SlurmAllocations::Restore(const Record& r) {
  const bool releasing = r.key == kReleasingKey;
  if (!releasing && r.key.rfind(kKeyPrefix, 0) != 0) return false;
  Result<Json> j = ParseJsonText(r.body, 4);
  if (!j.ok()) return j.status();
  try {
    if (releasing) {
      for (const Json& id : *j) releasing_.insert(id.get<std::string>());
      return true;
    }
    SlurmAllocationRecord a;
    const std::string state = j->at("state").get<std::string>();
    a.state = state == "running"   ? SlurmAllocationRecord::State::kRunning
              : state == "pending" ? SlurmAllocationRecord::State::kPending
                                   : SlurmAllocationRecord::State::kWanted;
    a.id = j->at("id").get<std::string>();
    a.nodes = j->at("nodes").get<std::vector<std::string>>();
    a.adopted = j->at("adopted").get<bool>();
    a.request = j->value("request", "");  // absent in records written before requests were named
    a.order = j->value("order", int64_t{0});  // absent in records written before launch orders
    a.order_attempt = j->value("order_attempt", 0);
    jobs_[r.key.substr(kKeyPrefix.size())] = std::move(a);
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("not an allocation record: ") + e.what());
  }
  return true;
}

}  // namespace shepherd
