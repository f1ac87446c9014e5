// Streams: device work queues and the OrtSyncStreamImpl ORT drives.
//
// WorkQueue is a device stream served by one worker thread: work runs in submission order,
// asynchronously to whoever enqueued it. Every asynchronous (MIGraphX) OrtSyncStreamImpl owns one:
// the per-session streams ORT makes through OrtEp::CreateSyncStreamForDevice (one per concurrent
// run) and the factory streams Python's OrtEpDevice.create_sync_stream() makes. Every live queue
// is also registered with the device, so that a copy without a stream can act as the legacy
// default stream does: wait for all of them first (DrainDeviceQueues).
//
// SessionStream is the per-session state every stream of a session shares: the creating thread
// (whose launches run inline, the seed's synchronous default stream) and the session's queues,
// which OrtEp::Sync drains. StreamImpl/NotificationImpl adapt a queue to ORT; their sync points
// drain it unless B7 removed the sync. A DirectML stream has no queue: its work is synchronous.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

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

// A new queue, registered with the device until its last owner drops it.
std::shared_ptr<WorkQueue> NewDeviceQueue();
// The device barrier: waits for everything queued so far on every live queue.
void DrainDeviceQueues();

class SessionStream {
 public:
  // `asynchronous`: the session's streams get queues (MIGraphX); else none (DirectML).
  SessionStream(bool asynchronous, int64_t session);

  // The queue for a new stream of this session, or null for a synchronous backend.
  std::shared_ptr<WorkQueue> NewQueue();
  bool OnCreatingThread() const { return std::this_thread::get_id() == creating_thread_; }
  // Waits for the work queued on every live stream of the session (OrtEp::Sync).
  void Sync();
  int64_t session() const { return session_; }

 private:
  const bool asynchronous_;
  const int64_t session_;
  const std::thread::id creating_thread_;
  std::mutex mutex_;
  std::vector<std::weak_ptr<WorkQueue>> queues_;
};

class StreamImpl : public OrtSyncStreamImpl {
 public:
  // `session` is null for a stream the factory creates outside any session; `queue` is null
  // for a synchronous backend's stream.
  StreamImpl(std::shared_ptr<SessionStream> session, std::shared_ptr<WorkQueue> queue);

  // The session stream behind an OrtSyncStream ORT hands us, or null if it is not one of ours
  // or belongs to no session.
  static SessionStream* SessionStreamOf(OrtSyncStream* stream);
  // The queue behind an OrtSyncStream, or null (no stream, not ours, or synchronous).
  static WorkQueue* QueueOf(OrtSyncStream* stream);
  // B13's bookkeeping: the run (CurrentRun()) whose first work claimed the stream, cleared by
  // OnSessionRunEnd. Kept in every build; only B13 reads it.
  static void MarkBusy(OrtSyncStream* stream, uint64_t run);
  // Whether the stream is still claimed by a run other than `run`.
  static bool BusyWithOtherRun(OrtSyncStream* stream, uint64_t run);

 private:
  static const StreamImpl* Of(OrtSyncStream* stream);
  static void ORT_API_CALL ReleaseImpl(OrtSyncStreamImpl* this_ptr) noexcept;
  static void* ORT_API_CALL GetHandleImpl(OrtSyncStreamImpl* this_ptr) noexcept;
  static OrtStatus* ORT_API_CALL CreateNotificationImpl(OrtSyncStreamImpl* this_ptr,
                                                        OrtSyncNotificationImpl** notification) noexcept;
  static OrtStatus* ORT_API_CALL FlushImpl(OrtSyncStreamImpl* this_ptr) noexcept;
  static OrtStatus* ORT_API_CALL OnSessionRunEndImpl(OrtSyncStreamImpl* this_ptr) noexcept;

  std::shared_ptr<SessionStream> session_;
  std::shared_ptr<WorkQueue> queue_;
  mutable std::atomic<uint64_t> busy_run_{0};
};

class NotificationImpl : public OrtSyncNotificationImpl {
 public:
  explicit NotificationImpl(std::shared_ptr<WorkQueue> queue);

 private:
  static void ORT_API_CALL ReleaseImpl(OrtSyncNotificationImpl* this_ptr) noexcept;
  static OrtStatus* ORT_API_CALL ActivateImpl(OrtSyncNotificationImpl* this_ptr) noexcept;
  static OrtStatus* ORT_API_CALL WaitOnDeviceImpl(OrtSyncNotificationImpl* this_ptr,
                                                  OrtSyncStream* consumer_stream) noexcept;
  static OrtStatus* ORT_API_CALL WaitOnHostImpl(OrtSyncNotificationImpl* this_ptr) noexcept;

  std::shared_ptr<WorkQueue> queue_;
};

}  // namespace testbed
