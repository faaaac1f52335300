//! Keeping a long operation's footing while it works: the locks of the messages it holds and
//! the CBS tokens of the entities it has links on. Runs beside the operation (raced with it, so
//! it stops when the operation does) and acts on a timer, so a batch whose sends outlast the
//! lock duration, or the token's lifetime, keeps both.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use super::receive::renew_locks;
use super::Amqp;

/// Lock tokens per `renew-lock` request.
const RENEW_CHUNK: usize = 100;

/// The lock tokens of the messages an operation holds right now.
#[derive(Default)]
pub struct LockSet(Mutex<HashSet<uuid::Uuid>>);

impl LockSet {
    fn with<T>(&self, f: impl FnOnce(&mut HashSet<uuid::Uuid>) -> T) -> T {
        f(&mut self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    pub fn hold(&self, token: Option<uuid::Uuid>) {
        if let Some(t) = token {
            self.with(|s| s.insert(t));
        }
    }

    pub fn drop_token(&self, token: Option<uuid::Uuid>) {
        if let Some(t) = token {
            self.with(|s| s.remove(&t));
        }
    }

    fn snapshot(&self) -> Vec<uuid::Uuid> {
        self.with(|s| s.iter().copied().collect())
    }

    fn holds(&self, t: &uuid::Uuid) -> bool {
        self.with(|s| s.contains(t))
    }
}

/// What to keep: the entity whose locks are held and every entity with a link open.
pub struct Keep<'a> {
    pub amqp: &'a Amqp,
    pub source: &'a str,
    pub linked: [&'a str; 2],
    /// The source's LockDuration.
    pub lock_secs: f64,
}

impl Keep<'_> {
    /// Renew at half the lock duration, and look at the tokens twice within their refresh
    /// margin, whichever comes first.
    pub fn period(&self) -> Duration {
        let half_lock = Duration::from_secs_f64((self.lock_secs / 2.0).clamp(0.5, 3600.0));
        half_lock.min(self.amqp.token_check_every())
    }

    /// Never returns: race it with the operation.
    pub async fn run(&self, locks: &LockSet) {
        let every = self.period();
        loop {
            tokio::time::sleep(every).await;
            // Tokens first: the links, and the renewal requests, ride on them.
            for e in self.linked {
                if let Err(err) = self.amqp.keep_authorised(e).await {
                    tracing::warn!("servicebus: keeping the token for {e}: {err}");
                }
            }
            self.renew(locks).await;
        }
    }

    /// Renew every held lock; where a request fails (one of its messages was settled
    /// meanwhile, or its lock lost), the others one by one.
    async fn renew(&self, locks: &LockSet) {
        let tokens = locks.snapshot();
        for chunk in tokens.chunks(RENEW_CHUNK) {
            if renew_locks(self.amqp, self.source, chunk).await.is_ok() {
                continue;
            }
            for t in chunk.iter().filter(|t| locks.holds(t)) {
                if let Err(e) = renew_locks(self.amqp, self.source, std::slice::from_ref(t)).await {
                    tracing::warn!("servicebus: renewing a lock on {}: {e}", self.source);
                }
            }
        }
    }
}
