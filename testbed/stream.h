// Streams: the per-session work queue and the OrtSyncStreamImpl ORT drives.
//
// WorkQueue is a device stream served by one worker thread: work runs in submission order,
// asynchronously to whoever enqueued it. SessionStream is the per-session stream state the EP and
// every OrtSyncStreamImpl ORT creates for that session share: it decides, per calling thread,
// whether work goes to the queue (threads other than the creating one, for an asynchronous
// backend) or runs inline on the creating thread's synchronous default stream.
// StreamImpl/NotificationImpl adapt that to ORT; their sync points drain the queue unless B7
// removed the sync.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "onnxruntime_c_api.h"

namespace testbed {

class WorkQueue {
 public:
  WorkQueue();
  ~WorkQueue();  // runs what is queued, then joins the worker
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Enqueue(std::function<void()> work);
  // Blocks until everything enqueued before the call has run.
  void Drain();

 private:
  void Serve();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> work_;
  uint64_t submitted_ = 0;
  uint64_t completed_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

class SessionStream {
 public:
  // `asynchronous`: work issued off the creating thread is queued (MIGraphX); else always inline.
  SessionStream(bool asynchronous, int64_t session);

  // The queue for work issued from the calling thread, or null to run it inline.
  WorkQueue* QueueForThisThread();
  // Waits for queued work (the per-Compute sync of the seed's #86). A no-op if there is no queue.
  void Sync();
  int64_t session() const { return session_; }

 private:
  const int64_t session_;
  const std::thread::id creating_thread_;
  const std::unique_ptr<WorkQueue> queue_;  // null for a synchronous backend
};

class StreamImpl : public OrtSyncStreamImpl {
 public:
  // `session` is null for a stream the factory creates outside any session.
  explicit StreamImpl(std::shared_ptr<SessionStream> session);

  // The session stream behind an OrtSyncStream ORT hands us, or null if it is not one of ours.
  static SessionStream* SessionStreamOf(OrtSyncStream* stream);

 private:
  static void ORT_API_CALL ReleaseImpl(OrtSyncStreamImpl* this_ptr) noexcept;
  static void* ORT_API_CALL GetHandleImpl(OrtSyncStreamImpl* this_ptr) noexcept;
  static OrtStatus* ORT_API_CALL CreateNotificationImpl(OrtSyncStreamImpl* this_ptr,
                                                        OrtSyncNotificationImpl** notification) noexcept;
  static OrtStatus* ORT_API_CALL FlushImpl(OrtSyncStreamImpl* this_ptr) noexcept;
  static OrtStatus* ORT_API_CALL OnSessionRunEndImpl(OrtSyncStreamImpl* this_ptr) noexcept;

  std::shared_ptr<SessionStream> session_;
};

class NotificationImpl : public OrtSyncNotificationImpl {
 public:
  explicit NotificationImpl(std::shared_ptr<SessionStream> session);

 private:
  static void ORT_API_CALL ReleaseImpl(OrtSyncNotificationImpl* this_ptr) noexcept;
  static OrtStatus* ORT_API_CALL ActivateImpl(OrtSyncNotificationImpl* this_ptr) noexcept;
  static OrtStatus* ORT_API_CALL WaitOnDeviceImpl(OrtSyncNotificationImpl* this_ptr,
                                                  OrtSyncStream* consumer_stream) noexcept;
  static OrtStatus* ORT_API_CALL WaitOnHostImpl(OrtSyncNotificationImpl* this_ptr) noexcept;

  std::shared_ptr<SessionStream> session_;
};

}  // namespace testbed
