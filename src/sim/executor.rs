//! A single-threaded executor on virtual time. When no task can make
//! progress, time jumps to the next timer, so a simulated hour of a fleet
//! runs in moments and every run with the same inputs is the same run.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use crate::rt::{LocalBoxFuture, Runtime};
use crate::time::{Clock, Millis};

type Ready = Arc<Mutex<VecDeque<usize>>>;

struct TaskWaker {
    id: usize,
    ready: Ready,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.ready.lock().expect("one thread").push_back(self.id);
    }
}

#[derive(Default)]
struct Timers {
    queue: BinaryHeap<Reverse<(Millis, u64)>>,
    wakers: HashMap<u64, Waker>,
    next_seq: u64,
}

#[derive(Default)]
struct State {
    now: Cell<Millis>,
    timers: RefCell<Timers>,
    tasks: RefCell<HashMap<usize, LocalBoxFuture<'static, ()>>>,
    spawned: RefCell<Vec<LocalBoxFuture<'static, ()>>>,
    next_task: Cell<usize>,
    ready: Ready,
}

/// The simulation's clock, timers and task queue. Clones share them.
#[derive(Clone, Default)]
pub struct SimRuntime {
    state: Rc<State>,
}

impl SimRuntime {
    pub fn new(start_ms: Millis) -> Self {
        let rt = SimRuntime::default();
        rt.state.now.set(start_ms);
        rt
    }

    /// Runs tasks, jumping time from timer to timer, until nothing is left
    /// to do before `until_ms`; the clock then stands at `until_ms`.
    pub fn run_until(&self, until_ms: Millis) {
        self.run_timers_until(until_ms);
        self.state.now.set(self.state.now.get().max(until_ms));
    }

    /// Runs until no task can ever wake again; the clock stays at the last
    /// timer that fired.
    pub fn run_to_completion(&self) {
        self.run_timers_until(Millis::MAX);
    }

    fn run_timers_until(&self, until_ms: Millis) {
        loop {
            self.run_ready();
            match self.next_timer() {
                Some(at) if at <= until_ms => {
                    self.state.now.set(self.state.now.get().max(at));
                    self.fire_timers();
                }
                _ => return,
            }
        }
    }

    /// Spawns `work` and returns where its output lands once it finishes.
    pub fn spawn_output<T: 'static>(
        &self,
        work: impl Future<Output = T> + 'static,
    ) -> Rc<RefCell<Option<T>>> {
        let out = Rc::new(RefCell::new(None));
        let slot = out.clone();
        self.spawn(Box::pin(async move {
            *slot.borrow_mut() = Some(work.await);
        }));
        out
    }

    /// Runs `work` to completion on virtual time and returns its output.
    pub fn block_on<T: 'static>(&self, work: impl Future<Output = T> + 'static) -> T {
        let out = self.spawn_output(work);
        self.run_to_completion();
        let output = out.borrow_mut().take();
        output.expect("the work finished")
    }

    pub fn pending_tasks(&self) -> usize {
        self.state.tasks.borrow().len() + self.state.spawned.borrow().len()
    }

    fn run_ready(&self) {
        loop {
            let spawned: Vec<_> = self.state.spawned.borrow_mut().drain(..).collect();
            for task in spawned {
                let id = self.state.next_task.get();
                self.state.next_task.set(id + 1);
                self.state.tasks.borrow_mut().insert(id, task);
                self.state.ready.lock().expect("one thread").push_back(id);
            }
            let next = self.state.ready.lock().expect("one thread").pop_front();
            let Some(id) = next else {
                if self.state.spawned.borrow().is_empty() {
                    return;
                }
                continue;
            };
            let Some(mut task) = self.state.tasks.borrow_mut().remove(&id) else {
                continue;
            };
            let waker = Waker::from(Arc::new(TaskWaker {
                id,
                ready: self.state.ready.clone(),
            }));
            if task
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
            {
                self.state.tasks.borrow_mut().insert(id, task);
            }
        }
    }

    fn next_timer(&self) -> Option<Millis> {
        let mut timers = self.state.timers.borrow_mut();
        while let Some(&Reverse((at, seq))) = timers.queue.peek() {
            if timers.wakers.contains_key(&seq) {
                return Some(at);
            }
            timers.queue.pop();
        }
        None
    }

    fn fire_timers(&self) {
        let now = self.state.now.get();
        let mut due = Vec::new();
        {
            let mut timers = self.state.timers.borrow_mut();
            while let Some(&Reverse((at, seq))) = timers.queue.peek() {
                if at > now {
                    break;
                }
                timers.queue.pop();
                if let Some(w) = timers.wakers.remove(&seq) {
                    due.push(w);
                }
            }
        }
        due.into_iter().for_each(Waker::wake);
    }
}

impl Clock for SimRuntime {
    fn now_ms(&self) -> Millis {
        self.state.now.get()
    }
}

impl Runtime for SimRuntime {
    fn sleep(&self, ms: Millis) -> LocalBoxFuture<'static, ()> {
        Box::pin(Sleep {
            rt: self.clone(),
            deadline: self.now_ms().saturating_add(ms),
            seq: None,
        })
    }

    fn spawn(&self, task: LocalBoxFuture<'static, ()>) {
        self.state.spawned.borrow_mut().push(task);
    }
}

struct Sleep {
    rt: SimRuntime,
    deadline: Millis,
    seq: Option<u64>,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.rt.now_ms() >= self.deadline {
            if let Some(seq) = self.seq.take() {
                self.rt.state.timers.borrow_mut().wakers.remove(&seq);
            }
            return Poll::Ready(());
        }
        let mut timers = self.rt.state.timers.borrow_mut();
        let seq = match self.seq {
            Some(seq) => seq,
            None => {
                let seq = timers.next_seq;
                timers.next_seq += 1;
                timers.queue.push(Reverse((self.deadline, seq)));
                seq
            }
        };
        timers.wakers.insert(seq, cx.waker().clone());
        drop(timers);
        self.seq = Some(seq);
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(seq) = self.seq {
            self.rt.state.timers.borrow_mut().wakers.remove(&seq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_jumps_from_timer_to_timer_and_tasks_see_it() {
        let rt = SimRuntime::new(1_000);
        let seen = Rc::new(RefCell::new(Vec::new()));
        for delay in [300, 100, 200] {
            let (rt2, seen) = (rt.clone(), seen.clone());
            rt.spawn(Box::pin(async move {
                rt2.sleep(delay).await;
                seen.borrow_mut().push(rt2.now_ms());
            }));
        }
        rt.run_to_completion();
        assert_eq!(*seen.borrow(), [1_100, 1_200, 1_300]);
        assert_eq!(rt.pending_tasks(), 0);
    }

    #[test]
    fn a_dropped_sleep_cancels_its_timer() {
        let rt = SimRuntime::new(0);
        drop(rt.sleep(50));
        let mut pending = rt.sleep(500);
        let waker = Waker::from(Arc::new(TaskWaker {
            id: 0,
            ready: Ready::default(),
        }));
        assert!(pending
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_pending());
        drop(pending);
        rt.run_until(10_000);
        assert_eq!(rt.next_timer(), None);
        assert_eq!(rt.now_ms(), 10_000);
    }
}
