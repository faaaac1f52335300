//! Full-frame render of the queue table at 200×50 with 10 to 100,000 queues. The cost must
//! depend on the rows visible, not on the number of queues (issue 14: < 2 ms at 100,000).
//!
//! cargo bench --bench render

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

use criterion::{criterion_group, criterion_main, Criterion};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use qdeck::tui::state::{SortCol, State, View};
use qdeck::tui::{update, Action};
use qdeck_engine::poller::PollEvent;
use qdeck_engine::store::Store;
use qdeck_model::domain::{QueueId, QueueInfo, QueueStats, StatsBatch};

fn state(n: usize) -> State {
    let mut st = State::new(
        Store::new(600, 240, 600.0),
        qdeck_backend::local::capabilities(),
        "bench",
        "local",
    );
    let infos: Vec<QueueInfo> = (0..n)
        .map(|i| QueueInfo {
            id: QueueId::new(format!("queue-{i:05}")),
            dlq: Some(QueueId::new(format!("queue-{i:05}-dlq"))),
            ..Default::default()
        })
        .collect();
    update(&mut st, Action::Poll(PollEvent::Queues(infos)));
    let epoch = st.store.epoch_ms();
    // 120 history points per queue (4 minutes at a 2 s refresh).
    for p in 0..120i64 {
        let t = p as u64;
        let stats = (0..n)
            .map(|i| QueueStats {
                id: QueueId::new(format!("queue-{i:05}")),
                at_ms: epoch + p * 2500,
                depth: Some((i as u64 * 7 + t * 3) % 1000),
                in_flight: Some(i as u64 % 5),
                delayed: Some(0),
                dlq_depth: Some(i as u64 % 3),
                oldest_age_secs: Some(p as f64),
                consumers: Some(2),
                enqueued_total: Some(t * 10),
                completed_total: Some(t * 8),
                ..Default::default()
            })
            .collect();
        let batch = StatsBatch {
            stats,
            errors: vec![],
        };
        update(&mut st, Action::Poll(PollEvent::Stats(batch)));
    }
    let last = st.store.last_ok_ms.unwrap_or(0);
    update(&mut st, Action::Tick(last));
    update(&mut st, Action::Resize(200, 50));
    // Somewhere in the middle, so the visible slice is not the first rows.
    let page = st.page_rows();
    while st.queues.cursor.sel + page <= n / 2 {
        update(&mut st, press(KeyCode::PageDown));
    }
    while st.queues.cursor.sel < n / 2 {
        update(&mut st, press(KeyCode::Down));
    }
    assert_eq!(st.view(), View::Queues);
    st
}

fn press(code: KeyCode) -> Action {
    Action::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

/// `:sort NAME` typed, as the user sorts.
fn sort_by(st: &mut State, col: SortCol) {
    update(st, press(KeyCode::Char(':')));
    for c in format!("sort {}", col.name()).chars() {
        update(st, press(KeyCode::Char(c)));
    }
    update(st, press(KeyCode::Enter));
    assert_eq!(st.queues.sort, col);
}

fn rss_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let l = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    l.split_whitespace().nth(1)?.parse().ok()
}

/// Resident memory of a store with 10,000 queues and full 10-minute histories (printed).
fn memory_report() {
    let before = rss_kb();
    let mut store = Store::new(600, 240, 600.0);
    let n = 10_000;
    store.set_queues(
        (0..n)
            .map(|i| QueueInfo {
                id: QueueId::new(format!("queue-{i:05}")),
                ..Default::default()
            })
            .collect(),
        qdeck_model::domain::now_ms(),
    );
    let epoch = store.epoch_ms();
    for p in 0..240i64 {
        store.apply(
            StatsBatch {
                stats: (0..n)
                    .map(|i| QueueStats {
                        id: QueueId::new(format!("queue-{i:05}")),
                        at_ms: epoch + p * 2500,
                        depth: Some(i as u64),
                        in_flight: Some(1),
                        enqueued_total: Some(p as u64 * 10),
                        completed_total: Some(p as u64 * 9),
                        ..Default::default()
                    })
                    .collect(),
                errors: vec![],
            },
            qdeck_model::domain::now_ms(),
        );
    }
    let after = rss_kb();
    if let (Some(a), Some(b)) = (before, after) {
        println!(
            "memory: 10,000 queues x 240 points: RSS grew {:.1} MB (history bound {:.1} MB)",
            (b.saturating_sub(a)) as f64 / 1024.0,
            store.history_bytes_max() as f64 / (1024.0 * 1024.0)
        );
    }
    drop(store);
}

/// CPU time this thread has run, in ns (Linux schedstat). Unlike wall time it does not grow
/// while other processes hold the cores, so figures from a busy machine still compare.
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Mean CPU time of `f` over `times` runs, in µs.
fn cpu_us(times: u32, mut f: impl FnMut()) -> Option<f64> {
    let start = thread_cpu_ns()?;
    for _ in 0..times {
        f();
    }
    Some((thread_cpu_ns()? - start) as f64 / 1e3 / times as f64)
}

/// CPU per full frame at 100 queues (a full table, the reference) and at 100,000, and per
/// re-sort of 100,000 by ETA (printed, with the 100,000 / 100 frame ratio of the same run).
fn cpu_report() {
    let frame = |st: &State| {
        let mut term = Terminal::new(TestBackend::new(200, 50)).expect("terminal");
        cpu_us(2000, || {
            term.clear().expect("clear");
            term.draw(|f| qdeck::tui::views::render(f, st))
                .expect("draw");
        })
    };
    let small = frame(&state(100));
    let mut big = state(100_000);
    let large = frame(&big);
    sort_by(&mut big, SortCol::Eta);
    let resort = cpu_us(5, || qdeck::tui::update::rebuild_rows(&mut big));
    if let (Some(s), Some(l), Some(r)) = (small, large, resort) {
        println!(
            "cpu per frame at 200x50: 100 queues {s:.0} us, 100,000 queues {l:.0} us ({:.2}x); \
             re-sort of 100,000 by ETA {:.1} ms",
            l / s,
            r / 1e3
        );
    }
}

fn bench(c: &mut Criterion) {
    memory_report();
    cpu_report();
    let mut g = c.benchmark_group("render_200x50");
    for n in [10usize, 100, 10_000, 100_000] {
        let st = state(n);
        let mut term = Terminal::new(TestBackend::new(200, 50)).expect("terminal");
        g.bench_function(format!("queues_{n}"), |b| {
            b.iter(|| {
                // Force a full redraw each time, as after a resize.
                term.clear().expect("clear");
                term.draw(|f| qdeck::tui::views::render(f, &st))
                    .expect("draw");
            });
        });
    }
    // The detail view with 240-point histories.
    let mut st = state(10_000);
    update(&mut st, press(KeyCode::Enter));
    let mut term = Terminal::new(TestBackend::new(200, 50)).expect("terminal");
    g.bench_function("detail_10000", |b| {
        b.iter(|| {
            term.clear().expect("clear");
            term.draw(|f| qdeck::tui::views::render(f, &st))
                .expect("draw");
        });
    });
    g.finish();

    // Sorted by a live figure, the rows are re-sorted over every queue once a tick (not per
    // frame): what that tick costs the UI thread at 100,000 queues.
    let mut g = c.benchmark_group("resort");
    g.sample_size(20);
    let mut st = state(100_000);
    for sort in [SortCol::Depth, SortCol::Eta] {
        sort_by(&mut st, sort);
        g.bench_function(format!("{}_100000", sort.name()), |b| {
            b.iter(|| qdeck::tui::update::rebuild_rows(&mut st));
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
