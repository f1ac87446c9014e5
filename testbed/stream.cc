#include "stream.h"

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

SessionStream::SessionStream(bool asynchronous, int64_t session)
    : session_(session),
      creating_thread_(std::this_thread::get_id()),
      queue_(asynchronous ? std::make_unique<WorkQueue>() : nullptr) {}

WorkQueue* SessionStream::QueueForThisThread() {
  return std::this_thread::get_id() == creating_thread_ ? nullptr : queue_.get();
}

void SessionStream::Sync() {
  if (queue_ != nullptr) queue_->Drain();
}

namespace {

// B7 removes every sync point, not only the one in Compute: the seed had none of them.
OrtStatus* SyncUnlessB7(SessionStream* session) {
  TESTBED_API_BEGIN
  if (session != nullptr && !Enabled(Bug::kNoComputeSync)) session->Sync();
  return nullptr;
  TESTBED_API_END
}

}  // namespace

StreamImpl::StreamImpl(std::shared_ptr<SessionStream> session) : OrtSyncStreamImpl{}, session_(std::move(session)) {
  ort_version_supported = ORT_API_VERSION;
  Release = ReleaseImpl;
  GetHandle = GetHandleImpl;
  CreateNotification = CreateNotificationImpl;
  Flush = FlushImpl;
  OnSessionRunEnd = OnSessionRunEndImpl;
}

SessionStream* StreamImpl::SessionStreamOf(OrtSyncStream* stream) {
  if (stream == nullptr) return nullptr;
  const OrtSyncStreamImpl* impl = EpApi().SyncStream_GetImpl(stream);
  if (impl == nullptr || impl->Release != &StreamImpl::ReleaseImpl) return nullptr;
  return static_cast<const StreamImpl*>(impl)->session_.get();
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
  *notification = new NotificationImpl(static_cast<StreamImpl*>(this_ptr)->session_);
  return nullptr;
  TESTBED_API_END
}

OrtStatus* ORT_API_CALL StreamImpl::FlushImpl(OrtSyncStreamImpl* this_ptr) noexcept {
  return SyncUnlessB7(static_cast<StreamImpl*>(this_ptr)->session_.get());
}

OrtStatus* ORT_API_CALL StreamImpl::OnSessionRunEndImpl(OrtSyncStreamImpl* this_ptr) noexcept {
  return SyncUnlessB7(static_cast<StreamImpl*>(this_ptr)->session_.get());
}

NotificationImpl::NotificationImpl(std::shared_ptr<SessionStream> session)
    : OrtSyncNotificationImpl{}, session_(std::move(session)) {
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
  return nullptr;  // one queue per session: there is no other device stream to signal
}

OrtStatus* ORT_API_CALL NotificationImpl::WaitOnDeviceImpl(OrtSyncNotificationImpl* /*this_ptr*/,
                                                           OrtSyncStream* /*consumer_stream*/) noexcept {
  return nullptr;
}

OrtStatus* ORT_API_CALL NotificationImpl::WaitOnHostImpl(OrtSyncNotificationImpl* this_ptr) noexcept {
  return SyncUnlessB7(static_cast<NotificationImpl*>(this_ptr)->session_.get());
}

}  // namespace testbed
