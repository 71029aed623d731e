//! `futures_timer::Delay` (the futures-timer 3.0 API) on tokio's timer.
//!
//! libp2p arms one of these for every stream it negotiates and every request it sends
//! or answers (upgrade and request timeouts), and drops it moments later. Upstream, each
//! `Delay` lives on one global helper thread: creating one and dropping one each wake
//! that thread, so a session spent 12–15 % of its CPU per delivered message in that
//! thread and the futex calls that wake it (docs/BENCHMARKS.md, "Through MCP"). On
//! tokio's timer, which the node's runtime already drives, arming and dropping a
//! timeout is a wheel insert and removal on the same thread.
//!
//! A `Delay` takes its timer from the runtime that first polls it. Polled outside a
//! tokio runtime with timers (nothing in this workspace does that), it falls back to a
//! thread of its own that sleeps until the deadline, so it still fires.

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::{Arc, Condvar, Mutex, PoisonError},
    task::{Context, Poll, Waker},
    time::{Duration, Instant},
};

/// A future that completes at a set time.
pub struct Delay {
    deadline: Instant,
    timer: Timer,
}

enum Timer {
    /// Not polled yet: no timer is armed until it is.
    Unarmed,
    Tokio(Pin<Box<tokio::time::Sleep>>),
    Thread(Arc<Fallback>),
}

impl Delay {
    /// A delay that completes `dur` from now.
    pub fn new(dur: Duration) -> Delay {
        Delay {
            deadline: deadline_after(dur),
            timer: Timer::Unarmed,
        }
    }

    /// Moves the deadline to `dur` from now, whether or not the delay has completed.
    pub fn reset(&mut self, dur: Duration) {
        self.deadline = deadline_after(dur);
        match &mut self.timer {
            Timer::Unarmed => {}
            Timer::Tokio(sleep) => sleep.as_mut().reset(self.deadline.into()),
            Timer::Thread(f) => f.reset(self.deadline),
        }
    }
}

/// `now + dur`, or a time far enough ahead to mean "never" where that overflows.
fn deadline_after(dur: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(dur)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30))
}

impl Future for Delay {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let deadline = self.deadline;
        if let Timer::Unarmed = self.timer {
            if Instant::now() >= deadline {
                return Poll::Ready(());
            }
            self.timer = arm(deadline);
        }
        match &mut self.timer {
            Timer::Tokio(sleep) => sleep.as_mut().poll(cx),
            Timer::Thread(f) => f.poll(cx),
            // Armed just above: not reached.
            Timer::Unarmed => Poll::Ready(()),
        }
    }
}

/// A timer for `deadline` from the current runtime, else a thread's.
fn arm(deadline: Instant) -> Timer {
    // `sleep_until` panics in a runtime built without timers; the runtime's handle
    // cannot be asked whether it has them, so the attempt is caught.
    if tokio::runtime::Handle::try_current().is_ok()
        && let Ok(sleep) =
            std::panic::catch_unwind(|| Box::pin(tokio::time::sleep_until(deadline.into())))
    {
        return Timer::Tokio(sleep);
    }
    Timer::Thread(Fallback::start(deadline))
}

impl fmt::Debug for Delay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delay")
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

/// A deadline watched by a thread of its own, for a delay polled outside tokio.
#[derive(Default)]
struct Fallback {
    state: Mutex<FallbackState>,
    changed: Condvar,
}

#[derive(Default)]
struct FallbackState {
    deadline: Option<Instant>,
    fired: bool,
    waker: Option<Waker>,
    /// The delay was dropped: the thread ends.
    gone: bool,
}

impl Fallback {
    fn start(deadline: Instant) -> Arc<Self> {
        let f = Arc::new(Fallback::default());
        f.lock().deadline = Some(deadline);
        let watched = f.clone();
        // Should no thread start, the delay still completes: at once, as an expired one.
        if std::thread::Builder::new()
            .name("futures-timer-fallback".into())
            .spawn(move || watched.run())
            .is_err()
        {
            f.lock().fired = true;
        }
        f
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FallbackState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn run(&self) {
        let mut s = self.lock();
        loop {
            if s.gone {
                return;
            }
            let now = Instant::now();
            match s.deadline {
                Some(d) if !s.fired && d <= now => {
                    s.fired = true;
                    if let Some(w) = s.waker.take() {
                        w.wake();
                    }
                }
                Some(d) if !s.fired => {
                    s = self
                        .changed
                        .wait_timeout(s, d - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
                _ => {
                    s = self.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
    }

    fn reset(&self, deadline: Instant) {
        let mut s = self.lock();
        s.deadline = Some(deadline);
        s.fired = false;
        self.changed.notify_one();
    }

    fn poll(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.lock();
        if s.fired {
            return Poll::Ready(());
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Delay {
    fn drop(&mut self) {
        if let Timer::Thread(f) = &self.timer {
            f.lock().gone = true;
            f.changed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests;
