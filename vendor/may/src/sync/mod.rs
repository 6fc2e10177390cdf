mod atomic_option;
mod barrier;
mod blocking;
mod condvar;
mod mutex;
mod poison;
mod rwlock;
mod semphore;
mod sync_flag;
mod wait_group;

pub(crate) mod atomic_dur;
#[cfg(not(unix))]
pub(crate) mod delay_drop;
// pub(crate) mod fast_blocking;
pub mod mpmc;
pub mod mpsc;
pub mod spsc;
pub use atomic_option::AtomicOption;
pub use barrier::{Barrier, BarrierWaitResult};
pub use blocking::{Blocker, FastBlocker};
pub use condvar::{Condvar, WaitTimeoutResult};
pub use mutex::{Mutex, MutexGuard};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use semphore::Semphore;
pub use sync_flag::SyncFlag;
pub use wait_group::WaitGroup;
