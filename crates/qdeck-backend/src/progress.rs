use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Progress of a long-running operation (redrive, purge).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProgressState {
    pub done: u64,
    pub failed: u64,
    /// Known total, if the broker told us up front.
    pub total: Option<u64>,
    /// Short text: "copying", "waiting for confirms", "cooling down"…
    pub phase: String,
}

/// Handle a backend uses to report progress and notice cancellation.
#[derive(Clone)]
pub struct OpProgress {
    tx: watch::Sender<ProgressState>,
    cancel: CancellationToken,
}

impl OpProgress {
    pub fn new() -> (Self, watch::Receiver<ProgressState>) {
        let (tx, rx) = watch::channel(ProgressState::default());
        (
            OpProgress {
                tx,
                cancel: CancellationToken::new(),
            },
            rx,
        )
    }

    /// A handle nobody watches (tests, scripts).
    pub fn detached() -> Self {
        Self::new().0
    }

    pub fn update(&self, f: impl FnOnce(&mut ProgressState)) {
        self.tx.send_modify(f);
    }

    pub fn set_total(&self, total: Option<u64>) {
        self.update(|s| s.total = total);
    }

    pub fn add_done(&self, n: u64) {
        self.update(|s| s.done += n);
    }

    pub fn add_failed(&self, n: u64) {
        self.update(|s| s.failed += n);
    }

    pub fn phase(&self, p: &str) {
        self.update(|s| s.phase = p.to_string());
    }

    pub fn snapshot(&self) -> ProgressState {
        self.tx.borrow().clone()
    }

    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    pub fn cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
}
