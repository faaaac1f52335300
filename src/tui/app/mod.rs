//! The event loop and the effect executor. The loop never awaits the network: backends run
//! on tasks and report back over channels; a dead broker makes panels stale, never the keys.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine;
use crossterm::event::{Event, EventStream};
use futures::StreamExt;
use ratatui::backend::Backend as TermBackend;
use ratatui::Terminal;
use tokio::sync::mpsc;

use super::frame_stats::FrameStats;
use super::keymap::KeyMap;
use super::state::{FleetState, Level, OpSummary, State, View};
use super::theme::Theme;
use super::update::{set_status, update, Action, Effect};
use super::views;
use crate::backend::OpProgress;
use crate::config::{paths, redact::redact};
use crate::demo::DemoHandle;
use crate::domain::{now_ms, BrowseRequest, Message, QueueId, RedriveTarget};
use crate::engine::edit::{self, EditorOutcome};
use crate::engine::fleet::{self, FleetHandle, FleetRow};
use crate::engine::ops::{self, Outcome, Verdict};
use crate::engine::poller::{self, PollConfig, PollEvent, PollerHandle};
use crate::engine::session::Session;
use crate::engine::store::Store;

/// Messages per browse page.
pub const PAGE_SIZE: usize = 200;
/// At most this many frames per second.
const FRAME: Duration = Duration::from_millis(33);
/// OSC 52 payloads larger than this are refused by most terminals.
const COPY_LIMIT: usize = 100_000;

pub fn refresh_secs(session: &Session) -> f64 {
    session
        .profile()
        .refresh_secs
        .unwrap_or(session.loaded.config.ui.refresh_secs)
}

/// The console's state for a session, before any figures arrive.
pub fn initial_state(session: &Session, demo_workers: Option<usize>) -> State {
    let cfg = &session.loaded.config;
    let mut store = Store::new(cfg.ui.history_secs.max(60), 240, cfg.ui.drain_target_secs);
    store.alert_age_secs = cfg.fire.max_age_secs;
    let mut st = State::new(
        store,
        session.backend.capabilities(),
        &session.profile().name,
        session.backend.kind().as_str(),
    );
    let (km, problems) = KeyMap::new(&cfg.keys);
    st.keymap = km;
    let backend = session.backend.clone();
    st.caps_of = Some(std::sync::Arc::new(move |info| {
        backend.capabilities_for(info)
    }));
    let dir = paths::config_dir().join("themes");
    let (theme, theme_err) = Theme::startup(&cfg.ui.theme, Some(&dir));
    st.theme = theme;
    st.theme_dir = Some(dir);
    st.access = session.gate.access();
    st.protected = session.gate.protected();
    st.demo_workers = demo_workers;
    st.profiles = crate::config::profile_names(cfg);
    st.refresh_secs = refresh_secs(session);
    st.call_budget = session.profile().calls_per_minute();
    st.export_dir = Some(paths::state_dir().join("exports"));
    if let Some(e) = theme_err.or(problems.into_iter().next()) {
        set_status(&mut st, Level::Warn, e);
    }
    st
}

/// Restores the terminal when dropped (normal exit and error returns; the panic hook
/// installed by `ratatui::try_init` covers panics).
struct RestoreGuard;

impl Drop for RestoreGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

fn init_logging() -> Option<tracing_appender::non_blocking::WorkerGuard> {
    let dir = paths::state_dir();
    std::fs::create_dir_all(&dir).ok()?;
    let appender = tracing_appender::rolling::never(&dir, "qdeck.log");
    let (nb, guard) = tracing_appender::non_blocking(appender);
    let filter = tracing_subscriber::EnvFilter::try_from_env("QDECK_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // If main already installed a subscriber, it stays (it must not write to the screen).
    tracing_subscriber::fmt()
        .with_writer(nb)
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init()
        .ok()?;
    Some(guard)
}

/// Runs until the user quits; returns the summary of the operation the user quit after.
/// `fleet` opens on the fleet view (`qdeck --fleet`, `qdeck -p a,b`) over those profiles
/// (empty: every configured one).
pub async fn run(
    session: Session,
    demo: Option<DemoHandle>,
    fleet: Option<Vec<String>>,
) -> anyhow::Result<Option<OpSummary>> {
    let _log = init_logging();
    let mut st = initial_state(&session, demo.as_ref().map(|d| d.workers()));
    let start_fleet = fleet.is_some();
    st.fleet_profiles = fleet.unwrap_or_default();
    let mut terminal = ratatui::try_init()?;
    let _guard = RestoreGuard;
    if let Ok(sz) = terminal.size() {
        tracing::info!("console started at {}x{}", sz.width, sz.height);
    }
    let r = event_loop(&mut terminal, st, session, demo, start_fleet).await;
    if let Err(e) = &r {
        tracing::error!("console stopped: {e}");
    }
    r
}

struct Exec {
    session: Session,
    /// Sessions opened by `:profile NAME`.
    switch_tx: mpsc::Sender<Result<Session, String>>,
    poll_tx: mpsc::Sender<PollEvent>,
    tx: mpsc::Sender<Action>,
    poller: PollerHandle,
    demo: Option<DemoHandle>,
    op: Option<OpProgress>,
    export_dir: PathBuf,
    /// Pollers of every profile, while the fleet view is open.
    fleet: Option<FleetHandle>,
    fleet_tx: mpsc::Sender<FleetRow>,
    /// A message to open in the editor once this batch of effects is done: the event loop
    /// owns the terminal and the key reader it must suspend.
    pending_edit: Option<EditJob>,
    /// The reasons scan running, to cancel.
    reasons_op: Option<OpProgress>,
}

struct EditJob {
    queue: QueueId,
    message: Box<crate::domain::Message>,
    draft: String,
}

async fn event_loop<B: TermBackend>(
    terminal: &mut Terminal<B>,
    mut st: State,
    session: Session,
    demo: Option<DemoHandle>,
    start_fleet: bool,
) -> anyhow::Result<Option<OpSummary>>
where
    B::Error: Send + Sync + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Action>(256);
    let (ptx, mut prx) = mpsc::channel::<PollEvent>(64);
    let (switch_tx, mut switch_rx) = mpsc::channel::<Result<Session, String>>(2);
    let (fleet_tx, mut fleet_rx) = mpsc::channel::<FleetRow>(64);
    let poller = poller::spawn(
        session.backend.clone(),
        PollConfig::with_refresh(st.refresh_secs).with_budget(st.call_budget),
        ptx.clone(),
    );
    if let Ok(sz) = terminal.size() {
        st.size = (sz.width, sz.height);
    }
    let mut ex = Exec {
        export_dir: st
            .export_dir
            .clone()
            .unwrap_or_else(|| paths::state_dir().join("exports")),
        session,
        switch_tx,
        poll_tx: ptx,
        tx,
        poller,
        demo,
        op: None,
        pending_edit: None,
        reasons_op: None,
        fleet: None,
        fleet_tx,
    };
    if start_fleet {
        ex.run(Effect::StartFleet, &mut st);
    }
    let mut events = EventStream::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last_draw: Option<Instant> = None;
    let mut frames = FrameStats::default();
    loop {
        if st.dirty {
            let due = last_draw.is_none_or(|t| t.elapsed() >= FRAME);
            if due {
                let t = Instant::now();
                terminal.draw(|f| views::render(f, &st))?;
                frames.drawn(t.elapsed(), st.size);
                st.dirty = false;
                last_draw = Some(Instant::now());
            }
        }
        let deadline = match (st.dirty, last_draw) {
            (true, Some(t)) => Some(tokio::time::Instant::from_std(t + FRAME)),
            _ => None,
        };
        let first = tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(Event::Key(k))) => Action::Key(k),
                Some(Ok(Event::Resize(w, h))) => Action::Resize(w, h),
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(e.into()),
                None => break,
            },
            Some(a) = rx.recv() => a,
            Some(p) = prx.recv() => {
                if let PollEvent::Queues(q) = &p {
                    frames.list_arrived(Instant::now(), q.len());
                }
                Action::Poll(p)
            }
            Some(r) = fleet_rx.recv() => Action::Fleet(r),
            Some(r) = switch_rx.recv() => {
                match r {
                    Ok(session) => {
                        st = ex.switch(session, &st);
                        // Figures of the old profile still queued are dropped.
                        while prx.try_recv().is_ok() {}
                    }
                    Err(e) => set_status(&mut st, Level::Error, e),
                }
                st.dirty = true;
                continue;
            }
            _ = tick.tick() => Action::Tick(now_ms()),
            _ = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            } => continue,
        };
        // Coalesce whatever else is ready into this frame.
        let mut batch = vec![first];
        while let Ok(p) = prx.try_recv() {
            if let PollEvent::Queues(q) = &p {
                frames.list_arrived(Instant::now(), q.len());
            }
            batch.push(Action::Poll(p));
        }
        while let Ok(a) = rx.try_recv() {
            batch.push(a);
        }
        while let Ok(r) = fleet_rx.try_recv() {
            batch.push(Action::Fleet(r));
        }
        for a in batch {
            for e in update(&mut st, a) {
                ex.run(e, &mut st);
            }
        }
        if let Some(job) = ex.pending_edit.take() {
            // The key reader would steal the editor's keystrokes: it goes, and comes back
            // after the editor.
            drop(events);
            let result = edit_suspended(job.draft).await;
            events = EventStream::new();
            // Both buffers empty: the next frame is drawn whole on the cleared screen.
            // (`Terminal::clear` would ask the terminal for the cursor position.)
            terminal.swap_buffers();
            let a = Action::Edited {
                queue: job.queue,
                original: job.message,
                result,
            };
            for e in update(&mut st, a) {
                ex.run(e, &mut st);
            }
            st.dirty = true;
        }
        if st.quit {
            break;
        }
    }
    frames.flush();
    ex.poller.stop();
    if let Some(op) = &ex.op {
        op.cancel();
    }
    Ok(st.exit_summary.take())
}

/// The profile's `[triage]` scan bounds and extra reason headers, as the CLI reads them.
fn triage_settings(
    session: &Session,
) -> (crate::triage::ScanLimits, crate::triage::SignatureConfig) {
    let t = &session.loaded.config.triage;
    (
        crate::triage::ScanLimits {
            max_messages: Some(t.scan_limit),
            max_time: Some(Duration::from_secs_f64(t.scan_secs)),
            ..Default::default()
        },
        crate::triage::SignatureConfig::for_session(&session.loaded),
    )
}

/// Group a DLQ over the configured bounded scan, sending the groups so far after each page (at
/// most every 100 ms) so the first ones show while the rest is read.
async fn scan_reasons(
    gate: &crate::engine::gate::Gate,
    queue: &QueueId,
    limits: &crate::triage::ScanLimits,
    cfg: &crate::triage::SignatureConfig,
    progress: &OpProgress,
    tx: &mpsc::Sender<Action>,
) -> Result<crate::triage::ReasonsReport, crate::backend::BackendError> {
    use crate::engine::gate::Mutation;
    use crate::triage::{scan, Grouper, ReasonsReport};
    gate.require(Mutation::Browse, queue)?;
    let mut grouper = Grouper::new(cfg.clone());
    let mut last = Instant::now() - Duration::from_secs(1);
    let summary = scan(gate.backend().as_ref(), queue, limits, progress, |page| {
        for m in page {
            grouper.add(m);
        }
        if last.elapsed() >= Duration::from_millis(100) {
            last = Instant::now();
            let p = progress.snapshot();
            // A full channel only delays the next picture; the final one is awaited.
            let _ = tx.try_send(Action::ReasonsProgress {
                queue: queue.clone(),
                groups: grouper.groups(),
                scanned: p.done,
                total: p.total,
            });
        }
        true
    })
    .await?;
    Ok(ReasonsReport {
        scan: summary,
        groups: grouper.groups(),
    })
}

/// Messages of one reasons group, for the message browser: the same bounded scan, keeping
/// at most `PAGE_SIZE` matching messages.
async fn group_page(
    gate: &crate::engine::gate::Gate,
    queue: &QueueId,
    limits: &crate::triage::ScanLimits,
    cfg: &crate::triage::SignatureConfig,
    signature: &str,
    origin: Option<&str>,
) -> Result<crate::domain::Page, crate::backend::BackendError> {
    use crate::engine::gate::Mutation;
    use crate::triage::scan;
    gate.require(Mutation::Browse, queue)?;
    let mut messages: Vec<Message> = Vec::new();
    let summary = scan(
        gate.backend().as_ref(),
        queue,
        limits,
        &OpProgress::detached(),
        |page| {
            for m in page {
                let s = crate::triage::signature(m, cfg);
                if messages.len() < PAGE_SIZE
                    && s.text == signature
                    && s.origin.as_deref() == origin
                {
                    messages.push(m.clone());
                }
            }
            // Enough for one page: stop reading.
            messages.len() < PAGE_SIZE
        },
    )
    .await?;
    Ok(crate::domain::Page {
        messages,
        next: None,
        effect_note: summary.effect_note,
    })
}

/// Leave the alternate screen and raw mode, run the editor, come back. The terminal is
/// restored even when the editor cannot start.
async fn edit_suspended(draft: String) -> Result<EditorOutcome, String> {
    use crossterm::terminal::{
        disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
    };
    let mut out = std::io::stdout();
    let _ = crossterm::execute!(out, LeaveAlternateScreen, crossterm::cursor::Show);
    let _ = disable_raw_mode();
    let r = tokio::task::spawn_blocking(move || edit::run_editor(&draft))
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
    let _ = enable_raw_mode();
    let _ = crossterm::execute!(
        out,
        EnterAlternateScreen,
        crossterm::terminal::Clear(crossterm::terminal::ClearType::All),
        crossterm::cursor::Hide
    );
    r
}

/// The status line and the exit summary of a finished operation.
fn summary(outcome: &Outcome, queue: &QueueId) -> OpSummary {
    OpSummary::of(outcome, one_line(&outcome.summary(queue)))
}

fn one_line(s: &str) -> String {
    redact(s).split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Exec {
    fn send_later(&self, a: Action) {
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let _ = tx.send(a).await;
        });
    }

    fn run(&mut self, e: Effect, st: &mut State) {
        match e {
            Effect::Visible(ids) => self.poller.set_visible(ids),
            Effect::Refresh => self.poller.refresh_now(),
            Effect::Browse {
                queue,
                cursor,
                force,
            } => {
                let gate = self.session.gate.clone();
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    let append = cursor.is_some();
                    let req = BrowseRequest {
                        cursor,
                        max: PAGE_SIZE,
                        force,
                    };
                    let result = gate.browse(&queue, &req).await;
                    let _ = tx
                        .send(Action::Page {
                            queue,
                            append,
                            result,
                        })
                        .await;
                });
            }
            Effect::Reasons(queue) => {
                if let Some(p) = self.reasons_op.take() {
                    p.cancel();
                }
                let p = OpProgress::detached();
                self.reasons_op = Some(p.clone());
                let gate = self.session.gate.clone();
                let tx = self.tx.clone();
                let (limits, cfg) = triage_settings(&self.session);
                tokio::spawn(async move {
                    let result = scan_reasons(&gate, &queue, &limits, &cfg, &p, &tx).await;
                    let _ = tx.send(Action::ReasonsDone { queue, result }).await;
                });
            }
            Effect::CancelReasons => {
                if let Some(p) = self.reasons_op.take() {
                    p.cancel();
                }
            }
            Effect::BrowseGroup {
                queue,
                signature,
                origin,
            } => {
                let gate = self.session.gate.clone();
                let tx = self.tx.clone();
                let (limits, cfg) = triage_settings(&self.session);
                tokio::spawn(async move {
                    let result =
                        group_page(&gate, &queue, &limits, &cfg, &signature, origin.as_deref())
                            .await;
                    let _ = tx
                        .send(Action::Page {
                            queue,
                            append: false,
                            result,
                        })
                        .await;
                });
            }
            Effect::Edit { queue, message } => {
                let b = &self.session.backend;
                if b.deleter().is_none() {
                    self.send_later(Action::Notice(Err(format!(
                        "edit deletes the original by id, which the {} backend cannot do",
                        b.kind().as_str()
                    ))));
                    return;
                }
                match edit::render(b.kind(), &queue, &message) {
                    Ok(draft) => {
                        self.pending_edit = Some(EditJob {
                            queue,
                            message,
                            draft,
                        })
                    }
                    Err(e) => self.send_later(Action::Notice(Err(e))),
                }
            }
            Effect::Resend {
                source,
                original,
                edited,
                target,
            } => {
                let gate = self.session.gate.clone();
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    let to = RedriveTarget::Queue(target);
                    let done = match edit::resend(&gate, &source, &original, *edited, &to).await {
                        Ok(r) => {
                            let o = Outcome::Edit(r);
                            OpSummary::of(&o, one_line(&o.line()))
                        }
                        Err(e) => OpSummary::new(
                            format!("nothing was sent: {}", one_line(&e.to_string())),
                            Verdict::Failed,
                        ),
                    };
                    let _ = tx
                        .send(Action::Resent {
                            queue: source,
                            done,
                        })
                        .await;
                });
            }
            Effect::Refused { action, queue, why } => {
                self.session.gate.refuse(action, &queue, &why);
            }
            Effect::Consumers(queue) => {
                let backend = self.session.backend.clone();
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    let result = backend.consumers(&queue).await;
                    let _ = tx.send(Action::Consumers { queue, result }).await;
                });
            }
            Effect::PlanRedrive(req) => {
                let gate = self.session.gate.clone();
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    let result = match ops::plan_redrive(&gate, req.clone()).await {
                        Ok(ops::Planned::Redrive { plan, .. }) => Ok(plan),
                        Ok(_) => Err(crate::backend::BackendError::Other(
                            "the redrive planned as another operation".into(),
                        )),
                        Err(e) => Err(e),
                    };
                    let _ = tx.send(Action::RedrivePlanned { req, result }).await;
                });
            }
            Effect::Redrive(req) => {
                let p = self.start_op();
                let gate = self.session.gate.clone();
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    // Planned at confirm time from the broker's current count, the same code
                    // as the CLI and its dry run; the count the dialog showed caps it too.
                    let queue = req.source.clone();
                    let outcome = match ops::plan_redrive(&gate, req).await {
                        Ok(planned) => ops::run(&gate, planned, &p).await,
                        Err(error) => Outcome::Failed {
                            error,
                            progress: p.snapshot(),
                        },
                    };
                    let _ = tx.send(Action::OpDone(summary(&outcome, &queue))).await;
                });
            }
            Effect::Purge(queue) => {
                let p = self.start_op();
                let gate = self.session.gate.clone();
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    let outcome = match ops::plan_purge(&gate, &queue).await {
                        Ok(planned) => ops::run(&gate, planned, &p).await,
                        Err(error) => Outcome::Failed {
                            error,
                            progress: p.snapshot(),
                        },
                    };
                    let _ = tx.send(Action::OpDone(summary(&outcome, &queue))).await;
                });
            }
            Effect::Delete {
                queue,
                ids,
                run: false,
            } => {
                let gate = self.session.gate.clone();
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    let result =
                        match ops::plan_delete(&gate, &queue, ids.clone(), serde_json::json!({}))
                            .await
                        {
                            Ok(ops::Planned::Delete { note, .. }) => Ok(note),
                            Ok(_) => Ok(None),
                            Err(e) => Err(e),
                        };
                    let _ = tx.send(Action::DeletePlanned { queue, ids, result }).await;
                });
            }
            Effect::Delete {
                queue,
                ids,
                run: true,
            } => {
                let p = self.start_op();
                let gate = self.session.gate.clone();
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    // Planned again at confirm time: the queue may have changed since the
                    // dialog opened, and the refusal must hold for what really runs.
                    let selection =
                        serde_json::json!({"selected": ids.len(), "chosen_in": "console"});
                    let outcome = match ops::plan_delete(&gate, &queue, ids, selection).await {
                        Ok(planned) => ops::run(&gate, planned, &p).await,
                        Err(error) => Outcome::Failed {
                            error,
                            progress: p.snapshot(),
                        },
                    };
                    let _ = tx.send(Action::OpDone(summary(&outcome, &queue))).await;
                });
            }
            Effect::PlanTransfer {
                source,
                messages,
                to,
                to_profile,
                moving,
            } => {
                let own = self.session.clone();
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    let result =
                        super::transfer::plan(&own, source, messages, to, to_profile, moving).await;
                    let _ = tx.send(Action::TransferPlanned { moving, result }).await;
                });
            }
            Effect::Transfer(ask) => {
                let p = self.start_op();
                let own = self.session.clone();
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    let done = super::transfer::run(&own, *ask, &p).await;
                    let _ = tx.send(Action::OpDone(done)).await;
                });
            }
            Effect::CancelOp => {
                if let Some(op) = &self.op {
                    op.cancel();
                }
            }
            Effect::Copy(text) => {
                let r = osc52(&text);
                self.send_later(Action::Notice(r));
            }
            Effect::Save { queue, messages } => {
                let dir = self.export_dir.clone();
                let tx = self.tx.clone();
                let kind = self.session.backend.kind();
                tokio::task::spawn_blocking(move || {
                    let r = save_jsonl(&dir, kind, &queue, &messages);
                    let _ = tx.blocking_send(Action::Notice(r));
                });
            }
            Effect::SwitchProfile(name) => {
                let opts = self.session.loaded.options_for(&name);
                let tx = self.switch_tx.clone();
                tokio::spawn(async move {
                    let r = match crate::config::load(&opts) {
                        Ok(loaded) => Session::open(loaded)
                            .await
                            .map_err(|e| one_line(&e.to_string())),
                        Err(e) => Err(one_line(&e.to_string())),
                    };
                    let _ = tx.send(r).await;
                });
            }
            Effect::ReadProfiles(then) => {
                let opts = self.session.loaded.options_for(&st.profile);
                let tx = self.tx.clone();
                tokio::task::spawn_blocking(move || {
                    let names = crate::config::load(&opts)
                        .map(|l| crate::config::profile_names(&l.config))
                        .map_err(|e| one_line(&e.to_string()));
                    let _ = tx.blocking_send(Action::Profiles { names, then });
                });
            }
            Effect::StartFleet => {
                let names =
                    fleet::profiles_to_poll(&self.session.loaded.config, &st.fleet_profiles);
                if self.fleet.is_none() {
                    let loaded = self.session.loaded.clone();
                    self.fleet = Some(fleet::spawn(
                        move |n| loaded.options_for(n),
                        &names,
                        self.fleet_tx.clone(),
                    ));
                }
                st.fleet = Some(FleetState::new(&names));
                // `:fire` asked for the on-fire view over the fleet.
                st.stack = if st.view() == View::Fire {
                    vec![View::Fleet, View::Fire]
                } else {
                    vec![View::Fleet]
                };
                st.dirty = true;
            }
            Effect::AddWorker | Effect::RemoveWorker => {
                if let Some(d) = &self.demo {
                    if e == Effect::AddWorker {
                        d.add_worker();
                    } else {
                        d.remove_worker();
                    }
                    let n = d.workers();
                    let _ = update(st, Action::DemoWorkers(n));
                }
            }
        }
    }

    /// Replace the session (after `:profile NAME`): new poller, fresh state, same look.
    fn switch(&mut self, session: Session, old: &State) -> State {
        self.poller.stop();
        let demo = match (&self.demo, session.backend.kind()) {
            (Some(d), crate::domain::BrokerKind::Local) => Some(d.workers()),
            _ => None,
        };
        let mut st = initial_state(&session, demo);
        st.theme = old.theme.clone();
        st.size = old.size;
        // With the fleet view open, the new profile's queue table sits on it (Esc returns).
        st.fleet = old.fleet.clone();
        st.fleet_profiles = old.fleet_profiles.clone();
        if st.fleet.is_some() {
            st.stack = vec![View::Fleet, View::Queues];
        }
        self.poller = poller::spawn(
            session.backend.clone(),
            PollConfig::with_refresh(st.refresh_secs).with_budget(st.call_budget),
            self.poll_tx.clone(),
        );
        let msg = format!("profile {} ({})", st.profile, st.broker);
        self.session = session;
        self.op = None;
        set_status(&mut st, Level::Info, msg);
        st
    }

    fn start_op(&mut self) -> OpProgress {
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

/// Copy through the terminal (works over SSH): OSC 52 with base64, so nothing from the body
/// reaches the terminal raw.
fn osc52(text: &str) -> Result<String, String> {
    if text.len() > COPY_LIMIT {
        return Err(format!(
            "body is {} bytes; terminals take at most {COPY_LIMIT} through OSC 52 — save it instead",
            text.len()
        ));
    }
    let b64 = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    let mut out = std::io::stdout();
    out.write_all(format!("\x1b]52;c;{b64}\x07").as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| format!("copy failed: {e}"))?;
    Ok(format!("copied {} bytes (OSC 52)", text.len()))
}

/// File-system-safe form of a queue name.
fn file_part(q: &QueueId) -> String {
    let s: String = q
        .as_str()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    if s.is_empty() {
        "queue".into()
    } else {
        s
    }
}

/// Save messages in the `qdeck export` format (`triage::transfer::Record` lines), so a saved
/// file imports exactly as an exported one.
pub fn save_jsonl(
    dir: &std::path::Path,
    kind: crate::domain::BrokerKind,
    queue: &QueueId,
    msgs: &[Message],
) -> Result<String, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let ts = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
    let path = dir.join(format!("{}-{ts}.jsonl", file_part(queue)));
    let mut buf = Vec::new();
    for m in msgs {
        let rec = crate::triage::transfer::Record::from_message(m, kind, queue.as_str());
        serde_json::to_writer(&mut buf, &rec).map_err(|e| format!("cannot encode: {e}"))?;
        buf.push(b'\n');
    }
    std::fs::write(&path, buf).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(format!(
        "saved {} messages to {}",
        msgs.len(),
        path.display()
    ))
}
