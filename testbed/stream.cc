#include "stream.h"

#include <algorithm>

#include "bugs.h"
#include "status.h"

namespace testbed {

WorkQueue::WorkQueue() : worker_([this] { Serve(); }) {}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void WorkQueue::Enqueue(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    work_.push_back(std::move(work));
    ++submitted_;
  }
  cv_.notify_all();
}

void WorkQueue::Drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = submitted_;
  cv_.wait(lock, [&] { return completed_ >= target; });
}

void WorkQueue::Serve() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !work_.empty(); });
    if (work_.empty()) return;  // stopping, and everything queued has run
    std::function<void()> work = std::move(work_.front());
    work_.pop_front();
    lock.unlock();
    work();
    lock.lock();
    ++completed_;
    cv_.notify_all();
  }
}

namespace {

// Weak references: a queue belongs to its stream, the device only needs to find it while it lives.
std::mutex g_device_mutex;
std::vector<std::weak_ptr<WorkQueue>>* g_device_queues = new std::vector<std::weak_ptr<WorkQueue>>();

// Live queues of `list` (expired ones dropped); the caller holds the list's lock.
std::vector<std::shared_ptr<WorkQueue>> LiveQueues(std::vector<std::weak_ptr<WorkQueue>>& list) {
  std::vector<std::shared_ptr<WorkQueue>> live;
  list.erase(std::remove_if(list.begin(), list.end(), [](const auto& q) { return q.expired(); }), list.end());
  for (const auto& q : list) {
    if (auto alive = q.lock()) live.push_back(std::move(alive));
  }
  return live;
}

void DrainAll(std::vector<std::shared_ptr<WorkQueue>> queues) {
  // Outside every lock: draining waits on device work, which takes no testbed lock.
  for (const auto& q : queues) q->Drain();
}

}  // namespace

std::shared_ptr<WorkQueue> NewDeviceQueue() {
  auto queue = std::make_shared<WorkQueue>();
  std::lock_guard<std::mutex> lock(g_device_mutex);
  LiveQueues(*g_device_queues);  // prunes expired entries
  g_device_queues->push_back(queue);
  return queue;
}

void DrainDeviceQueues() {
  std::vector<std::shared_ptr<WorkQueue>> live;
  {
    std::lock_guard<std::mutex> lock(g_device_mutex);
    live = LiveQueues(*g_device_queues);
  }
  DrainAll(std::move(live));
}

SessionStream::SessionStream(bool asynchronous, int64_t session)
    : asynchronous_(asynchronous), session_(session), creating_thread_(std::this_thread::get_id()) {}

std::shared_ptr<WorkQueue> SessionStream::NewQueue() {
  if (!asynchronous_) return nullptr;
  auto queue = NewDeviceQueue();
  std::lock_guard<std::mutex> lock(mutex_);
  LiveQueues(queues_);
  queues_.push_back(queue);
  return queue;
}

void SessionStream::Sync() {
  std::vector<std::shared_ptr<WorkQueue>> live;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    live = LiveQueues(queues_);
  }
  DrainAll(std::move(live));
}

namespace {

// B7 removes every sync point, not only the one in Compute: the seed had none of them.
OrtStatus* DrainUnlessB7(WorkQueue* queue) {
  TESTBED_API_BEGIN
  if (queue != nullptr && !Enabled(Bug::kNoComputeSync)) queue->Drain();
  return nullptr;
  TESTBED_API_END
}

}  // namespace

StreamImpl::StreamImpl(std::shared_ptr<SessionStream> session, std::shared_ptr<WorkQueue> queue)
    : OrtSyncStreamImpl{}, session_(std::move(session)), queue_(std::move(queue)) {
  ort_version_supported = ORT_API_VERSION;
  Release = ReleaseImpl;
  GetHandle = GetHandleImpl;
  CreateNotification = CreateNotificationImpl;
  Flush = FlushImpl;
  OnSessionRunEnd = OnSessionRunEndImpl;
}

const StreamImpl* StreamImpl::Of(OrtSyncStream* stream) {
  if (stream == nullptr) return nullptr;
  const OrtSyncStreamImpl* impl = EpApi().SyncStream_GetImpl(stream);
  if (impl == nullptr || impl->Release != &StreamImpl::ReleaseImpl) return nullptr;
  return static_cast<const StreamImpl*>(impl);
}

SessionStream* StreamImpl::SessionStreamOf(OrtSyncStream* stream) {
  const StreamImpl* self = Of(stream);
  return self != nullptr ? self->session_.get() : nullptr;
}

WorkQueue* StreamImpl::QueueOf(OrtSyncStream* stream) {
  const StreamImpl* self = Of(stream);
  return self != nullptr ? self->queue_.get() : nullptr;
}

void StreamImpl::MarkBusy(OrtSyncStream* stream, uint64_t run) {
  const StreamImpl* self = Of(stream);
  uint64_t unmarked = 0;
  if (self != nullptr && run != 0) self->busy_run_.compare_exchange_strong(unmarked, run);
}

bool StreamImpl::BusyWithOtherRun(OrtSyncStream* stream, uint64_t run) {
  const StreamImpl* self = Of(stream);
  if (self == nullptr) return false;
  const uint64_t busy = self->busy_run_.load();
  return busy != 0 && busy != run;
}

void ORT_API_CALL StreamImpl::ReleaseImpl(OrtSyncStreamImpl* this_ptr) noexcept {
  delete static_cast<StreamImpl*>(this_ptr);
}

void* ORT_API_CALL StreamImpl::GetHandleImpl(OrtSyncStreamImpl* this_ptr) noexcept {
  auto* self = static_cast<StreamImpl*>(this_ptr);
  return self->session_ != nullptr ? static_cast<void*>(self->session_.get()) : static_cast<void*>(self);
}

OrtStatus* ORT_API_CALL StreamImpl::CreateNotificationImpl(OrtSyncStreamImpl* this_ptr,
                                                           OrtSyncNotificationImpl** notification) noexcept {
  *notification = nullptr;
  TESTBED_API_BEGIN
  *notification = new NotificationImpl(static_cast<StreamImpl*>(this_ptr)->queue_);
  return nullptr;
  TESTBED_API_END
}

OrtStatus* ORT_API_CALL StreamImpl::FlushImpl(OrtSyncStreamImpl* this_ptr) noexcept {
  return DrainUnlessB7(static_cast<StreamImpl*>(this_ptr)->queue_.get());
}

OrtStatus* ORT_API_CALL StreamImpl::OnSessionRunEndImpl(OrtSyncStreamImpl* this_ptr) noexcept {
  // The only place the busy mark is cleared: ORT skips OnSessionRunEnd for a terminated run
  // (checked with ORT 1.31.1 and 1.32), so such a run hands its stream back still marked.
  static_cast<StreamImpl*>(this_ptr)->busy_run_.store(0);
  return DrainUnlessB7(static_cast<StreamImpl*>(this_ptr)->queue_.get());
}

NotificationImpl::NotificationImpl(std::shared_ptr<WorkQueue> queue)
    : OrtSyncNotificationImpl{}, queue_(std::move(queue)) {
  ort_version_supported = ORT_API_VERSION;
  Release = ReleaseImpl;
  Activate = ActivateImpl;
  WaitOnDevice = WaitOnDeviceImpl;
  WaitOnHost = WaitOnHostImpl;
}

void ORT_API_CALL NotificationImpl::ReleaseImpl(OrtSyncNotificationImpl* this_ptr) noexcept {
  delete static_cast<NotificationImpl*>(this_ptr);
}

OrtStatus* ORT_API_CALL NotificationImpl::ActivateImpl(OrtSyncNotificationImpl* /*this_ptr*/) noexcept {
  return nullptr;  // the wait drains the producer's queue, so there is no event to record
}

OrtStatus* ORT_API_CALL NotificationImpl::WaitOnDeviceImpl(OrtSyncNotificationImpl* this_ptr,
                                                           OrtSyncStream* /*consumer_stream*/) noexcept {
  // Stronger than a device-side wait (the host waits for the producer), and just as ordered.
  return DrainUnlessB7(static_cast<NotificationImpl*>(this_ptr)->queue_.get());
}

OrtStatus* ORT_API_CALL NotificationImpl::WaitOnHostImpl(OrtSyncNotificationImpl* this_ptr) noexcept {
  return DrainUnlessB7(static_cast<NotificationImpl*>(this_ptr)->queue_.get());
}

}  // namespace testbed
