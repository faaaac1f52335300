//! The effect executor: carries out what `update` asks for. Work that talks to a broker runs
//! on tasks (`jobs.rs`) and reports back as actions; what is left here is the executor's own
//! bookkeeping: the poller, the session, the fleet pollers and the demo. It never touches the
//! state (beyond reading the settings it starts from): what it has to say goes to `update` as
//! an action.

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::mpsc;

use super::export::{osc52, save_jsonl};
use super::{initial_state, one_line};
use crate::demo::DemoHandle;
use crate::tui::state::State;
use crate::tui::update::{Action, Effect};
use qdeck_backend::OpProgress;
use qdeck_engine::fleet::{self, FleetHandle, FleetRow};
use qdeck_engine::poller::{self, PollConfig, PollEvent, PollerHandle};
use qdeck_engine::session::Session;
use qdeck_model::config::paths;
use qdeck_model::domain::QueueId;

/// Poll events waiting for the event loop.
const POLL_QUEUE: usize = 64;

pub(super) struct Exec {
    pub(super) session: Session,
    /// Sessions opened by `:profile NAME`, each with the number of its request.
    switch_tx: mpsc::Sender<Switched>,
    /// The number of the latest profile switch asked for: an earlier request that answers
    /// late (a hung broker's session) must not switch away from the one asked for since.
    pub(super) switch_seq: u64,
    pub(super) tx: mpsc::Sender<Action>,
    pub(super) poller: PollerHandle,
    demo: Option<DemoHandle>,
    pub(super) op: Option<OpProgress>,
    export_dir: PathBuf,
    /// Pollers of every profile, while the fleet view is open.
    fleet: Option<FleetHandle>,
    /// The profiles named on the command line (`-p a,b`) for the fleet view; empty: all.
    /// They outlive a `:profile` switch.
    fleet_profiles: Vec<String>,
    /// The profiles the running fleet pollers poll.
    fleet_names: Vec<String>,
    fleet_tx: mpsc::Sender<FleetRow>,
    /// A message to open in the editor once this batch of effects is done: the event loop
    /// owns the terminal and the key reader it must suspend.
    pub(super) pending_edit: Option<EditJob>,
    /// The reasons scan running, to cancel.
    pub(super) reasons_op: Option<OpProgress>,
}

pub(super) struct EditJob {
    pub(super) queue: QueueId,
    pub(super) message: Box<qdeck_model::domain::Message>,
    pub(super) draft: String,
}

/// A profile switch's answer: the number of its request and the session (or why not).
pub(super) type Switched = (u64, Result<Session, String>);

/// What reaches the event loop besides the keyboard and the clock.
pub(super) struct Inbox {
    /// Results of the executor's tasks.
    pub(super) rx: mpsc::Receiver<Action>,
    pub(super) poll: mpsc::Receiver<PollEvent>,
    pub(super) switch: mpsc::Receiver<Switched>,
    pub(super) fleet: mpsc::Receiver<FleetRow>,
}

impl Exec {
    /// The executor for `session`, its poller started, and the channels it reports on.
    /// `fleet_profiles`: the profiles the fleet view polls (empty: every configured one).
    pub(super) fn start(
        session: Session,
        demo: Option<DemoHandle>,
        fleet_profiles: Vec<String>,
        st: &State,
    ) -> (Exec, Inbox) {
        let (tx, rx) = mpsc::channel::<Action>(256);
        let (poll_tx, poll) = mpsc::channel::<PollEvent>(POLL_QUEUE);
        let (switch_tx, switch) = mpsc::channel::<Switched>(4);
        let (fleet_tx, fleet) = mpsc::channel::<FleetRow>(64);
        let poller = poller::spawn(
            session.backend.clone(),
            PollConfig::with_refresh(st.session.refresh_secs).with_budget(st.session.call_budget),
            poll_tx,
        );
        let ex = Exec {
            export_dir: st
                .session
                .export_dir
                .clone()
                .unwrap_or_else(|| paths::state_dir().join("exports")),
            session,
            switch_tx,
            switch_seq: 0,
            tx,
            poller,
            demo,
            op: None,
            pending_edit: None,
            reasons_op: None,
            fleet: None,
            fleet_profiles,
            fleet_names: Vec::new(),
            fleet_tx,
        };
        let inbox = Inbox {
            rx,
            poll,
            switch,
            fleet,
        };
        (ex, inbox)
    }

    pub(super) fn send_later(&self, a: Action) {
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let _ = tx.send(a).await;
        });
    }

    /// Carry out `e`. Most effects report later, over the channels; the answer of one done
    /// at once comes back here for `update` to apply.
    pub(super) fn run(&mut self, e: Effect) -> Option<Action> {
        match e {
            Effect::Visible(ids) => self.poller.set_visible(ids),
            Effect::Refresh => self.poller.refresh_now(),
            Effect::Browse {
                queue,
                cursor,
                force,
                scheduled,
            } => self.browse(queue, cursor, force, scheduled),
            Effect::Reasons(queue) => self.reasons(queue),
            Effect::CancelReasons => {
                if let Some(p) = self.reasons_op.take() {
                    p.cancel();
                }
            }
            Effect::BrowseGroup {
                queue,
                signature,
                origin,
            } => self.browse_group(queue, signature, origin),
            Effect::Edit { queue, message } => self.edit(queue, message),
            Effect::EditAgain {
                queue,
                message,
                draft,
            } => {
                self.pending_edit = Some(EditJob {
                    queue,
                    message,
                    draft,
                });
            }
            Effect::Resend {
                source,
                original,
                edited,
                target,
            } => self.resend(source, original, edited, target),
            Effect::Refused { action, queue, why } => {
                self.session.gate.refuse(action, &queue, &why);
            }
            Effect::Consumers(queue) => self.consumers(queue),
            Effect::Partitions(queue) => self.partitions(queue),
            Effect::PlanRedrive(req) => self.plan_redrive(req),
            Effect::PlanPurge(queue) => self.plan_purge(queue),
            Effect::PlanReset(queue, to) => self.plan_reset(queue, to),
            Effect::PlanCancel { queue, id } => self.plan_cancel(queue, id),
            Effect::PlanDelete { queue, ids } => self.plan_delete(queue, ids),
            Effect::RunPlan(plan) => self.run_plan(plan),
            Effect::PlanTransfer {
                source,
                messages,
                to,
                to_profile,
                moving,
            } => self.plan_transfer(source, messages, to, to_profile, moving),
            Effect::Transfer(ask) => self.transfer(ask),
            Effect::CancelOp => {
                if let Some(op) = &self.op {
                    op.cancel();
                }
            }
            Effect::Copy(text) => {
                let r = osc52(&text);
                self.send_later(Action::Notice(r));
            }
            Effect::Notify { bell, desktop } => {
                // Nothing to tell the user when the terminal does not take it.
                let _ = super::export::notify(bell, desktop.as_deref());
            }
            Effect::Save { queue, messages } => self.save(queue, messages),
            Effect::SwitchProfile(name) => self.switch_profile(name),
            Effect::ReadProfiles(then) => self.read_profiles(then),
            Effect::StartFleet(book) => return Some(self.start_fleet(book)),
            // A few hundred short lines: written at once, so the next run (or the state of a
            // `:profile` switch, read from the file) has the command just run.
            Effect::SaveHistory(lines) => {
                super::prompt_files::save_history(&super::prompt_files::history_file(), &lines);
            }
            Effect::AddWorker => return self.demo_worker(true),
            Effect::RemoveWorker => return self.demo_worker(false),
        }
        None
    }

    fn save(&self, queue: QueueId, messages: Vec<qdeck_model::domain::Message>) {
        let dir = self.export_dir.clone();
        let tx = self.tx.clone();
        let kind = self.session.backend.kind();
        tokio::task::spawn_blocking(move || {
            let r = save_jsonl(&dir, kind, &queue, &messages);
            let _ = tx.blocking_send(Action::Notice(r));
        });
    }

    /// Open the profile `name` on a task; the event loop switches when it is open.
    fn switch_profile(&mut self, name: String) {
        self.switch_seq += 1;
        let seq = self.switch_seq;
        let opts = self.session.loaded.options_for(&name);
        let tx = self.switch_tx.clone();
        tokio::spawn(async move {
            let r = match qdeck_engine::config_check::load(&opts) {
                Ok(loaded) => Session::open(loaded)
                    .await
                    .map_err(|e| one_line(&e.to_string())),
                Err(e) => Err(one_line(&e.to_string())),
            };
            let _ = tx.send((seq, r)).await;
        });
    }

    /// Re-read the profile names from the file this profile was loaded from.
    fn read_profiles(&self, then: Option<String>) {
        let opts = self
            .session
            .loaded
            .options_for(&self.session.profile().name);
        let tx = self.tx.clone();
        tokio::task::spawn_blocking(move || {
            let names = qdeck_engine::config_check::load(&opts)
                .map(|l| qdeck_model::config::profile_names(&l.config))
                .map_err(|e| one_line(&e.to_string()));
            let _ = tx.blocking_send(Action::Profiles { names, then });
        });
    }

    /// Poll the fleet view's profiles. The file is read again (as `:profile` does): a
    /// profile added since the start joins the fleet, one removed leaves it.
    fn start_fleet(&mut self, book: qdeck_engine::alerts::AlertBook) -> Action {
        let opts = self
            .session
            .loaded
            .options_for(&self.session.profile().name);
        let names = match qdeck_engine::config_check::load(&opts) {
            Ok(l) => fleet::profiles_to_poll(&l.config, &self.fleet_profiles),
            Err(_) => fleet::profiles_to_poll(&self.session.loaded.config, &self.fleet_profiles),
        };
        if self.fleet_names != names {
            // Dropping the handle stops the pollers of the old set.
            self.fleet = None;
            self.fleet_names.clone_from(&names);
        }
        if self.fleet.is_none() {
            let loaded = self.session.loaded.clone();
            let rules = qdeck_engine::alerts::rules(&loaded.config).unwrap_or_default();
            self.fleet = Some(fleet::spawn(
                move |n| loaded.options_for(n),
                &names,
                rules,
                book,
                self.fleet_tx.clone(),
            ));
        }
        Action::FleetStarted(names)
    }

    /// One demo worker more or fewer: the count now.
    fn demo_worker(&mut self, add: bool) -> Option<Action> {
        let d = self.demo.as_ref()?;
        if add {
            d.add_worker();
        } else {
            d.remove_worker();
        }
        Some(Action::DemoWorkers(d.workers()))
    }

    /// Take over the session of `:profile NAME`: its poller replaces this one's. Returns its
    /// fresh state, for `update::switched`, and the new poller's channel: the old profile's
    /// figures still queued go with the old one, and none of the new one's can be taken for
    /// them (draining a shared channel could drop the new poller's first queue list).
    pub(super) fn switch(&mut self, session: Session) -> (State, mpsc::Receiver<PollEvent>) {
        self.poller.stop();
        // The demo's workers run only against the embedded broker the demo itself started.
        let demo = match (&self.demo, session.backend.kind()) {
            (Some(d), qdeck_model::domain::BrokerKind::Local) => Some(d.workers()),
            _ => None,
        };
        let fresh = initial_state(&session, demo);
        let (poll_tx, poll) = mpsc::channel::<PollEvent>(POLL_QUEUE);
        self.poller = poller::spawn(
            session.backend.clone(),
            PollConfig::with_refresh(fresh.session.refresh_secs)
                .with_budget(fresh.session.call_budget),
            poll_tx,
        );
        self.session = session;
        self.op = None;
        (fresh, poll)
    }

    pub(super) fn start_op(&mut self) -> OpProgress {
        let (p, mut rx) = OpProgress::new();
        self.op = Some(p.clone());
        let tx = self.tx.clone();
        tokio::spawn(async move {
            // At most ten progress updates a second reach the UI.
            while rx.changed().await.is_ok() {
                let snap = rx.borrow_and_update().clone();
                if tx.send(Action::OpProgress(snap)).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        p
    }
}
