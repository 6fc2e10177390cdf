use std::sync::Mutex;

use crate::config::config;
use crate::coroutine_impl::CoroutineImpl;
use generator::Gn;

/// the raw coroutine pool, with stack and register prepared
/// you need to tack care of the local storage
///
/// archzoo: a stack (last in, first out), not upstream's `SegQueue` (first in, first out).
/// A finished coroutine's stack is warm in the CPU's caches and TLB; a queue handed each
/// new coroutine the coldest of up to `pool_capacity` stacks (1000 by default, a few pages
/// touched on each), so a connection's coroutine missed the cache on every frame it
/// touched. Upstream's queue is lock-free; an uncontended mutex costs the same two atomic
/// operations a get or a put, and the pool is still safe from every scheduler thread.
pub struct CoroutinePool {
    // the pool must support mpmc operation!
    pool: Mutex<Vec<CoroutineImpl>>,
}

impl CoroutinePool {
    fn create_dummy_coroutine() -> CoroutineImpl {
        Gn::new_opt(config().get_stack_size(), move || {
            unreachable!("dummy coroutine should never be called");
        })
    }

    pub fn new() -> Self {
        let capacity = config().get_pool_capacity();
        let pool = (0..capacity)
            .map(|_| Self::create_dummy_coroutine())
            .collect();
        CoroutinePool {
            pool: Mutex::new(pool),
        }
    }

    fn stack(&self) -> std::sync::MutexGuard<'_, Vec<CoroutineImpl>> {
        // A panic cannot leave the vector half-changed: push and pop are all it does.
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// get a raw coroutine from the pool
    #[inline]
    pub fn get(&self) -> CoroutineImpl {
        let co = self.stack().pop();
        co.unwrap_or_else(Self::create_dummy_coroutine)
    }

    /// put a raw coroutine into the pool
    #[inline]
    pub fn put(&self, co: CoroutineImpl) {
        let mut pool = self.stack();
        if pool.len() < config().get_pool_capacity() {
            pool.push(co);
            return;
        }
        drop(pool);
        // discard the co when the pool is full (its stack is freed outside the lock)
        drop(co);
    }
}
