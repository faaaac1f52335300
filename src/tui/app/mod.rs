//! The event loop and the effect executor (`exec.rs`, `jobs.rs`). The loop never awaits the network: backends run
//! on tasks and report back over channels; a dead broker makes panels stale, never the keys.

mod exec;
mod export;
mod jobs;
mod prompt_files;
mod triage_scan;

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crossterm::event::{Event, EventStream};
use futures::StreamExt;
use ratatui::backend::Backend as TermBackend;
use ratatui::Terminal;

use super::frame_stats::FrameStats;
use super::keymap::KeyMap;
use super::state::{Level, OpSummary, Setup, State};
use super::theme::Theme;
use super::update::{drawn, set_status, update, Action, Effect};
use super::views;
use crate::demo::DemoHandle;
use exec::{Exec, Inbox};
use qdeck_engine::edit::{self, EditorOutcome};
use qdeck_engine::ops::Outcome;
use qdeck_engine::poller::PollEvent;
use qdeck_engine::session::Session;
use qdeck_engine::store::Store;
use qdeck_model::config::paths;
use qdeck_model::domain::{now_ms, QueueId};
use qdeck_model::sanitize::one_line;

pub use export::save_jsonl;

/// Messages per browse page.
pub const PAGE_SIZE: usize = 200;
/// At most this many frames per second.
const FRAME: Duration = Duration::from_millis(33);

pub fn refresh_secs(session: &Session) -> f64 {
    session
        .profile()
        .refresh_secs
        .unwrap_or(session.loaded.config.ui.refresh_secs)
}

/// The console's state for a session, before any figures arrive.
/// Audit entries `:ops` shows from before the console started.
const OPS_PAST: usize = 50;

pub fn initial_state(session: &Session, demo_workers: Option<usize>) -> State {
    let cfg = &session.loaded.config;
    let mut store = Store::new(cfg.ui.history_secs.max(60), 240, cfg.ui.drain_target_secs);
    store.alert_age_secs = cfg.fire.max_age_secs;
    let mut setup = Setup::new(&session.profile().name, session.backend.kind().as_str());
    let (keymap, problems) = KeyMap::new(&cfg.keys);
    setup.keymap = keymap;
    let backend = session.backend.clone();
    setup.caps_of = Some(std::sync::Arc::new(move |info| {
        backend.capabilities_for(info)
    }));
    let dir = paths::config_dir().join("themes");
    let (theme, theme_err) = Theme::startup(&cfg.ui.theme, Some(&dir));
    setup.theme = theme;
    setup.history = prompt_files::load_history(&prompt_files::history_file());
    setup.theme_files = prompt_files::theme_files(&dir);
    setup.demo_workers = demo_workers;
    let info = &mut setup.session;
    info.theme_dir = Some(dir);
    info.access = session.gate.access();
    info.protected = session.gate.protected();
    info.profiles = qdeck_model::config::profile_names(cfg);
    info.refresh_secs = refresh_secs(session);
    info.call_budget = session.profile().calls_per_minute();
    info.export_dir = Some(paths::state_dir().join("exports"));
    info.reasons = qdeck_engine::triage::SignatureConfig::for_session(&session.loaded);
    // Read from the facets themselves, so the footer offers exactly what the keys can do.
    info.deletes_by_id = session.backend.deleter().is_some();
    info.sends = session.backend.sender().is_some();
    // The file was checked when it was loaded: a rule that fails here cannot occur.
    setup.alert_rules = qdeck_engine::alerts::rules(cfg).unwrap_or_default();
    // `:ops` opens on the recent past, from the record every qdeck writes.
    setup.ops_log = crate::tui::state::OpsLog::from_audit(
        qdeck_engine::audit::AuditLog::new(session.loaded.audit_log_path()).recent(OPS_PAST),
    );
    setup.notify = session
        .profile()
        .notify
        .clone()
        .unwrap_or_else(|| cfg.notify.clone());
    let mut st = State::with(store, session.backend.capabilities(), setup);
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

/// Runs until the user quits; returns the summary of the operation the user quit after.
/// `fleet` opens on the fleet view (`qdeck --fleet`, `qdeck -p a,b`) over those profiles
/// (empty: every configured one).
pub async fn run(
    session: Session,
    demo: Option<DemoHandle>,
    fleet: Option<Vec<String>>,
    note: Option<String>,
) -> anyhow::Result<Option<OpSummary>> {
    let mut st = initial_state(&session, demo.as_ref().map(DemoHandle::workers));
    if let Some(n) = note {
        crate::tui::update::notice(&mut st, n);
    }
    let mut terminal = ratatui::try_init()?;
    let _guard = RestoreGuard;
    if let Ok(sz) = terminal.size() {
        tracing::info!("console started at {}x{}", sz.width, sz.height);
    }
    let r = event_loop(&mut terminal, st, session, demo, fleet).await;
    if let Err(e) = &r {
        tracing::error!("console stopped: {e}");
    }
    r
}

/// When the screen was last drawn, and the frame figures for the log.
#[derive(Default)]
struct Screen {
    last_draw: Option<Instant>,
    frames: FrameStats,
}

impl Screen {
    /// Draw when the state changed, at most once per `FRAME`.
    fn draw<B: TermBackend>(
        &mut self,
        terminal: &mut Terminal<B>,
        st: &mut State,
    ) -> anyhow::Result<()>
    where
        B::Error: Send + Sync + 'static,
    {
        if st.dirty && self.last_draw.is_none_or(|t| t.elapsed() >= FRAME) {
            let t = Instant::now();
            terminal.draw(|f| views::render(f, st))?;
            self.frames.drawn(t.elapsed(), st.size);
            drawn(st);
            self.last_draw = Some(Instant::now());
        }
        Ok(())
    }

    /// When a frame held back by the rate limit is due.
    fn deadline(&self, st: &State) -> Option<tokio::time::Instant> {
        match (st.dirty, self.last_draw) {
            (true, Some(t)) => Some(tokio::time::Instant::from_std(t + FRAME)),
            _ => None,
        }
    }
}

/// What woke the event loop.
// One lives for one turn of the loop, moved straight out: boxing would allocate per event.
#[allow(clippy::large_enum_variant)]
enum Wake {
    Act(Action),
    /// A profile opened by `:profile NAME` (or why it did not), with its request's number.
    Switched(exec::Switched),
    /// Nothing to update: draw if due, and wait again.
    Again,
    /// The terminal's event stream ended.
    Closed,
}

async fn next_wake(
    events: &mut EventStream,
    inbox: &mut Inbox,
    tick: &mut tokio::time::Interval,
    deadline: Option<tokio::time::Instant>,
    frames: &mut FrameStats,
) -> anyhow::Result<Wake> {
    Ok(tokio::select! {
        ev = events.next() => match ev {
            Some(Ok(Event::Key(k))) => Wake::Act(Action::Key(k)),
            Some(Ok(Event::Resize(w, h))) => Wake::Act(Action::Resize(w, h)),
            Some(Ok(_)) => Wake::Again,
            Some(Err(e)) => return Err(e.into()),
            None => Wake::Closed,
        },
        Some(a) = inbox.rx.recv() => Wake::Act(a),
        Some(p) = inbox.poll.recv() => {
            if let PollEvent::Queues(q) = &p {
                frames.list_arrived(Instant::now(), q.len());
            }
            Wake::Act(Action::Poll(p))
        }
        Some(r) = inbox.fleet.recv() => Wake::Act(Action::Fleet(r)),
        Some(r) = inbox.switch.recv() => Wake::Switched(r),
        _ = tick.tick() => Wake::Act(Action::Tick(now_ms())),
        _ = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        } => Wake::Again,
    })
}

/// `first` and whatever else is ready, coalesced into one frame.
fn batch(first: Action, inbox: &mut Inbox, frames: &mut FrameStats) -> Vec<Action> {
    let mut batch = vec![first];
    while let Ok(p) = inbox.poll.try_recv() {
        if let PollEvent::Queues(q) = &p {
            frames.list_arrived(Instant::now(), q.len());
        }
        batch.push(Action::Poll(p));
    }
    while let Ok(a) = inbox.rx.try_recv() {
        batch.push(a);
    }
    while let Ok(r) = inbox.fleet.try_recv() {
        batch.push(Action::Fleet(r));
    }
    batch
}

/// Update the state with `a`, then carry out its effects; what an effect answers at once (the
/// fleet started, the demo's worker count) is applied in turn. Only `update` writes the state.
fn apply(ex: &mut Exec, st: &mut State, a: Action) {
    let mut pending = VecDeque::from([a]);
    while let Some(a) = pending.pop_front() {
        for e in update(st, a) {
            pending.extend(ex.run(e));
        }
    }
}

async fn event_loop<B: TermBackend>(
    terminal: &mut Terminal<B>,
    mut st: State,
    session: Session,
    demo: Option<DemoHandle>,
    fleet: Option<Vec<String>>,
) -> anyhow::Result<Option<OpSummary>>
where
    B::Error: Send + Sync + 'static,
{
    let start_fleet = fleet.is_some();
    let (mut ex, mut inbox) = Exec::start(session, demo, fleet.unwrap_or_default(), &st);
    if let Ok(sz) = terminal.size() {
        apply(&mut ex, &mut st, Action::Resize(sz.width, sz.height));
    }
    if start_fleet {
        if let Some(a) = ex.run(Effect::StartFleet(st.alerts.book.clone())) {
            apply(&mut ex, &mut st, a);
        }
    }
    let mut events = EventStream::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut screen = Screen::default();
    loop {
        screen.draw(terminal, &mut st)?;
        let deadline = screen.deadline(&st);
        let wake = next_wake(
            &mut events,
            &mut inbox,
            &mut tick,
            deadline,
            &mut screen.frames,
        );
        let first = match wake.await? {
            Wake::Act(a) => a,
            // Only the latest request switches: an earlier one answering late is dropped.
            Wake::Switched((seq, _)) if seq != ex.switch_seq => continue,
            Wake::Switched((_, Ok(session))) => {
                let (fresh, poll) = ex.switch(session);
                inbox.poll = poll;
                super::update::switched(&mut st, fresh);
                continue;
            }
            Wake::Switched((_, Err(e))) => Action::Notice(Err(e)),
            Wake::Again => continue,
            Wake::Closed => break,
        };
        for a in batch(first, &mut inbox, &mut screen.frames) {
            apply(&mut ex, &mut st, a);
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
            let a = match result {
                // The header block did not parse: the text is kept for another try.
                Err((why, Some(text))) => Action::EditUnreadable {
                    queue: job.queue,
                    original: job.message,
                    text,
                    why,
                },
                result => Action::Edited {
                    queue: job.queue,
                    original: job.message,
                    result: result.map_err(|(e, _)| e),
                },
            };
            apply(&mut ex, &mut st, a);
        }
        if st.exit.quit {
            break;
        }
    }
    screen.frames.flush();
    ex.poller.stop();
    if let Some(op) = &ex.op {
        op.cancel();
    }
    Ok(st.exit.summary.clone())
}

/// Leave the alternate screen and raw mode, run the editor, come back. The terminal is
/// restored even when the editor cannot start.
async fn edit_suspended(draft: String) -> Result<EditorOutcome, (String, Option<String>)> {
    use crossterm::terminal::{
        disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
    };
    let mut out = std::io::stdout();
    let _ = crossterm::execute!(out, LeaveAlternateScreen, crossterm::cursor::Show);
    let _ = disable_raw_mode();
    let r = tokio::task::spawn_blocking(move || edit::run_editor_keeping(&draft))
        .await
        .map_err(|e| (e.to_string(), None))
        .and_then(|r| r.map_err(|(e, text)| (e.to_string(), text)));
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
