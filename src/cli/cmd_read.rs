//! Read-only commands: ls, stats, peek, consumers.

use std::time::Duration;

use super::args::Format;
use super::exit::{CliError, CliResult, OK, UNAVAILABLE};
use super::fetch::{self, QueueRow};
use super::output::{self, age_in, name, opt, Table};
use qdeck_engine::gate::Mutation;
use qdeck_engine::session::Session;
use qdeck_model::domain::{BrowseRequest, Capabilities, QueueId, QueueSettings};
use qdeck_model::sanitize;

fn drain_target(s: &Session) -> f64 {
    s.loaded.config.ui.drain_target_secs
}

/// The columns of `ls`; NOTE last, where a profile's error goes in a multi-profile table.
pub(super) const LS_HEADERS: [&str; 9] = [
    "NAME",
    "DEPTH",
    "IN_FLIGHT",
    "DELAYED",
    "AGE",
    "DLQ",
    "DLQ_DEPTH",
    "CONSUMERS",
    "NOTE",
];
pub(super) const DERIVED_HEADERS: [&str; 5] = ["IN/S", "OUT/S", "TREND", "DRAIN", "NEEDED"];

pub async fn ls(
    s: &Session,
    pattern: Option<&str>,
    sample: Option<Duration>,
    f: Format,
) -> CliResult {
    let re = fetch::compile_pattern(pattern)?;
    let rows = match sample {
        Some(gap) => {
            fetch::rows_sampled(s.backend.as_ref(), re.as_ref(), gap, drain_target(s)).await?
        }
        None => fetch::rows_matching(s.backend.as_ref(), re.as_ref()).await?,
    };
    if f == Format::Json {
        output::print_json(&rows).ok();
        return Ok(OK);
    }
    let mut t = Table::new(LS_HEADERS.to_vec());
    if sample.is_some() {
        t.headers.extend(DERIVED_HEADERS);
    }
    for r in &rows {
        let mut cells = row_cells(r, f);
        if let Some(d) = &r.derived {
            cells.extend(derived_cells(d, f));
        }
        t.push(cells);
    }
    output::print(&t.render(f));
    Ok(OK)
}

pub(super) fn row_cells(r: &QueueRow, f: Format) -> Vec<String> {
    let note = match (&r.error, r.is_dlq) {
        (Some(e), _) => format!("error: {}", name(e)),
        (None, true) => format!("DLQ of {}", name(r.dlq_of.as_deref().unwrap_or("?"))),
        (None, false) => match (r.lost, r.retained) {
            (Some(n), _) if n > 0 => format!("retention breach: {n} lost"),
            (_, Some(n)) => format!("retains {n} (not backlog)"),
            _ => String::new(),
        },
    };
    vec![
        name(&r.name),
        opt(r.depth),
        opt(r.in_flight),
        opt(r.delayed),
        age_in(r.oldest_age_secs, f),
        r.dlq.as_deref().map_or_else(|| "—".into(), name),
        opt(r.dlq_depth),
        opt(r.consumers),
        note,
    ]
}

/// Rate, trend, time to drain and workers needed, as the console derives them.
pub(super) fn derived_cells(d: &qdeck_engine::derive::Derived, f: Format) -> Vec<String> {
    let rate = |r: Option<f64>| r.map_or_else(|| "—".into(), |x| format!("{x:.1}"));
    vec![
        rate(d.in_rate),
        rate(d.out_rate),
        format!("{:?}", d.trend).to_lowercase(),
        age_in(d.drain_secs, f),
        // As the console says it; scripts read `measuring` in JSON and get an empty cell.
        match d.workers_needed {
            None if d.measuring && !f.is_machine() => "measuring".into(),
            n => opt(n),
        },
    ]
}

pub async fn stats(s: &Session, queue: &str, sample: Option<Duration>, f: Format) -> CliResult {
    let b = s.backend.as_ref();
    let info = fetch::find(b, queue).await?;
    let batch = b.stats(std::slice::from_ref(&info.id)).await?;
    let st = batch.stats.iter().find(|x| x.id == info.id);
    let err = batch.errors.iter().find(|x| x.0 == info.id).map(|x| &x.1);
    let derived = match sample {
        Some(gap) => fetch::sampled(b, vec![info.clone()], gap, drain_target(s))
            .await?
            .into_iter()
            .next()
            .and_then(|r| r.derived),
        None => None,
    };
    let caps = b.capabilities_for(&info);
    let abilities = qdeck_backend::facets::abilities(b, &info);
    let calls = b.api_calls().snapshot();
    // Printed as far as it goes, but a script must not take missing figures for an answer.
    let unread = match (st, &err) {
        (None, Some(e)) => Some(CliError::after_report(
            UNAVAILABLE,
            format!("the figures of {} could not be read: {e}", name(queue)),
        )),
        _ => None,
    };
    if f == Format::Json {
        let mut row = QueueRow::new(&info, st, err);
        row.derived = derived;
        let v = serde_json::json!({
            "queue": row,
            "settings": info.settings,
            "capabilities": caps,
            "abilities": abilities,
            "api_calls": calls,
        });
        output::print_json(&v).ok();
        return unread.map_or(Ok(OK), Err);
    }
    let row = QueueRow::new(&info, st, err);
    let mut pairs = Pairs::default();
    pairs.queue(&row, &info.settings, f);
    if let Some(d) = &derived {
        pairs.derived(d, f);
    }
    pairs.capabilities(&caps);
    pairs.kv("abilities", abilities.join(", "));
    let total = b.api_calls().total();
    pairs.kv("api calls", format!("{total} this run"));
    // Only SQS bills per request: its cost line, as `budget.rs` prices it.
    #[cfg(feature = "sqs")]
    if b.kind() == qdeck_model::domain::BrokerKind::Sqs {
        pairs.sqs_cost(s, &calls);
    }
    output::print(&key_values(&pairs.0, f));
    unread.map_or(Ok(OK), Err)
}

/// The `label  value` lines of `stats`, labels made safe to print.
#[derive(Default)]
struct Pairs(Vec<(String, String)>);

impl Pairs {
    fn kv(&mut self, k: &str, v: String) {
        self.0.push((name(k), v));
    }

    /// The queue's figures, DLQ links and settings.
    fn queue(&mut self, row: &QueueRow, settings: &QueueSettings, f: Format) {
        self.kv("queue", name(&row.name));
        self.kv("kind", format!("{:?}", row.kind).to_lowercase());
        self.kv("depth", opt(row.depth));
        self.kv("in flight", opt(row.in_flight));
        self.kv("delayed", opt(row.delayed));
        if f.is_machine() {
            // A figure and its note apart: scripts read seconds or an empty cell, as `ls`.
            self.kv("oldest age", age_in(row.oldest_age_secs, f));
            if let Some(n) = &row.age_note {
                self.kv("age note", name(n));
            }
        } else {
            self.kv(
                "oldest age",
                match &row.age_note {
                    Some(n) => format!("{} ({})", age_in(row.oldest_age_secs, f), name(n)),
                    None => age_in(row.oldest_age_secs, f),
                },
            );
        }
        self.kv("consumers", opt(row.consumers));
        if row.lost.is_some() {
            self.kv("lost to retention", opt(row.lost));
        }
        if row.retained.is_some() {
            self.kv("retained", opt(row.retained));
            self.kv("retained age", age_in(row.retained_age_secs, f));
        }
        self.kv("dlq", row.dlq.as_deref().map_or_else(|| "—".into(), name));
        self.kv("dlq depth", opt(row.dlq_depth));
        if !row.dlq_sources.is_empty() {
            self.kv("dlq of", name(&row.dlq_sources.join(", ")));
        }
        self.kv(
            "lease",
            settings
                .lease_secs
                .map_or_else(|| "—".into(), |l| age_in(Some(l), f)),
        );
        self.kv("max receives", opt(settings.max_receives));
        if let Some(p) = &settings.key_policy {
            self.kv("key policy", name(p));
        }
        for (k, v) in &settings.extra {
            self.kv(k, name(v));
        }
        if let Some(e) = &row.error {
            self.kv("error", name(e));
        }
    }

    /// Rates, trend and drain from `--sample`.
    fn derived(&mut self, d: &qdeck_engine::derive::Derived, f: Format) {
        let c = derived_cells(d, f);
        if f.is_machine() {
            self.kv("in per s", c[0].clone());
            self.kv("out per s", c[1].clone());
        } else {
            self.kv("in / out per s", format!("{} / {}", c[0], c[1]));
        }
        self.kv("trend", c[2].clone());
        self.kv("time to drain", c[3].clone());
        self.kv("workers needed", c[4].clone());
        if let Some(a) = &d.arithmetic {
            self.kv("arithmetic", name(a));
        }
        if d.stuck {
            self.kv("stuck", "age rising while depth stays flat".into());
        }
    }

    /// What the backend can do with this queue.
    fn capabilities(&mut self, caps: &Capabilities) {
        self.kv(
            "browse",
            describe(&serde_json::to_value(&caps.browse).unwrap_or_default()),
        );
        self.kv(
            "redrive",
            describe(&serde_json::to_value(&caps.redrive).unwrap_or_default()),
        );
        self.kv(
            "age source",
            describe(&serde_json::to_value(&caps.age).unwrap_or_default()),
        );
        if let Some(c) = caps.purge_cooldown_secs {
            self.kv("purge cooldown", format!("{c}s"));
        }
        for n in &caps.notes {
            self.kv("note", n.clone());
        }
    }

    /// What it costs to keep this one queue's figures fresh at the profile's refresh rate.
    #[cfg(feature = "sqs")]
    fn sqs_cost(&mut self, s: &Session, calls: &std::collections::BTreeMap<String, u64>) {
        let refresh = s
            .profile()
            .refresh_secs
            .unwrap_or(s.loaded.config.ui.refresh_secs);
        let per_run = qdeck_backend::sqs::estimated_cost_usd(calls);
        self.kv(
            "est. cost",
            format!(
                "${per_run:.7} this run; ≈ ${:.4}/hour refreshing every {refresh} s (list prices)",
                per_run * 3600.0 / refresh.max(0.1)
            ),
        );
    }
}

/// `label  value` lines aligned on the longest label (a long setting name never runs into its
/// value); for scripts, `FIELD,VALUE` rows in CSV and `label<TAB>value` plain lines, a
/// missing figure an empty value in both.
fn key_values(pairs: &[(String, String)], f: Format) -> String {
    use unicode_width::UnicodeWidthStr;
    if f.is_machine() {
        let mut t = Table::new(vec!["FIELD", "VALUE"]);
        for (k, v) in pairs {
            t.push(vec![k.clone(), v.clone()]);
        }
        return t.render(f);
    }
    let w = pairs.iter().map(|(k, _)| k.width()).max().unwrap_or(0) + 2;
    let mut out = String::new();
    for (k, v) in pairs {
        out.push_str(&format!("{k}{}{v}\n", " ".repeat(w - k.width())));
    }
    out
}

fn describe(v: &serde_json::Value) -> String {
    let kind = v
        .get("kind")
        .and_then(|k| k.as_str())
        .unwrap_or("?")
        .replace('_', " ");
    match v.get("detail").and_then(|d| d.as_str()) {
        Some(d) => format!("{kind}: {d}"),
        None => kind,
    }
}

pub async fn peek(s: &Session, queue: &str, n: usize, force: bool, f: Format) -> CliResult {
    if n == 0 {
        return Err(super::exit::CliError::usage("-n must be at least 1"));
    }
    let b = s.backend.as_ref();
    // The tier is checked before the queue is looked up: a `stats` profile learns nothing
    // from peek, not even whether the name exists.
    s.gate.require(Mutation::Browse, &QueueId::new(queue))?;
    let info = fetch::find(b, queue).await?;
    let mut messages = Vec::new();
    let mut cursor = None;
    let mut note = None;
    while messages.len() < n {
        let page = s
            .gate
            .browse(
                &info.id,
                &BrowseRequest {
                    cursor: cursor.clone(),
                    max: n - messages.len(),
                    force,
                },
            )
            .await?;
        note = note.or(page.effect_note);
        let got = page.messages.len();
        messages.extend(page.messages);
        match page.next {
            Some(c) if got > 0 => cursor = Some(c),
            _ => break,
        }
    }
    if let Some(n) = &note {
        eprintln!("qdeck: note: {}", sanitize::clean(n));
    }
    let tasks: Vec<Option<qdeck_backend::celery::CeleryTask>> =
        messages.iter().map(qdeck_backend::celery::decode).collect();
    if f == Format::Json {
        output::print_json(&with_celery(&messages, &tasks)).ok();
        return Ok(OK);
    }
    if tasks.iter().any(Option::is_some) {
        output::print(&celery_table(&messages, &tasks, f).render(f));
        return Ok(OK);
    }
    let mut t = Table::new(vec![
        "ID",
        "ENQUEUED",
        "RECEIVES",
        "KEY",
        "DL_REASON",
        "ORIGIN",
        "SIZE",
        "BODY",
    ]);
    for m in &messages {
        let dl = m.dead_letter.as_ref();
        t.push(vec![
            name(&m.id),
            output::time_in(m.enqueued_ms, f),
            opt(m.receive_count),
            m.key.as_deref().map(name).unwrap_or_default(),
            dl.and_then(|d| d.reason.as_deref())
                .map(name)
                .unwrap_or_default(),
            dl.and_then(|d| d.origin.as_ref())
                .map(|o| name(o.as_str()))
                .unwrap_or_default(),
            m.body.len().to_string(),
            output::body_cell(&m.body, f),
        ]);
    }
    output::print(&t.render(f));
    Ok(OK)
}

/// Each message as JSON, with a `celery` object beside the broker's fields where it is a
/// Celery task message.
fn with_celery(
    messages: &[qdeck_model::domain::Message],
    tasks: &[Option<qdeck_backend::celery::CeleryTask>],
) -> Vec<serde_json::Value> {
    messages
        .iter()
        .zip(tasks)
        .map(|(m, t)| {
            let mut v = serde_json::to_value(m).unwrap_or(serde_json::Value::Null);
            if let (Some(t), serde_json::Value::Object(o)) = (t, &mut v) {
                o.insert(
                    "celery".into(),
                    serde_json::to_value(t).unwrap_or(serde_json::Value::Null),
                );
            }
            v
        })
        .collect()
}

/// Celery task messages by their task: name, arguments, retries, eta.
fn celery_table(
    messages: &[qdeck_model::domain::Message],
    tasks: &[Option<qdeck_backend::celery::CeleryTask>],
    f: Format,
) -> Table {
    let mut t = Table::new(vec![
        "ID",
        "ENQUEUED",
        "RECEIVES",
        "TASK",
        "ARGS",
        "KWARGS",
        "RETRIES",
        "ETA",
        "DL_REASON",
    ]);
    for (m, task) in messages.iter().zip(tasks) {
        let dl = m
            .dead_letter
            .as_ref()
            .and_then(|d| d.reason.as_deref())
            .map(name)
            .unwrap_or_default();
        let row = match task {
            Some(c) => vec![
                name(&m.id),
                output::time_in(m.enqueued_ms, f),
                opt(m.receive_count),
                name(&c.task),
                c.args.as_deref().map(name).unwrap_or_default(),
                c.kwargs.as_deref().map(name).unwrap_or_default(),
                opt(c.retries),
                c.eta.as_deref().map(name).unwrap_or_default(),
                dl,
            ],
            None => vec![
                name(&m.id),
                output::time_in(m.enqueued_ms, f),
                opt(m.receive_count),
                String::new(),
                output::body_cell(&m.body, f),
                String::new(),
                String::new(),
                String::new(),
                dl,
            ],
        };
        t.push(row);
    }
    t
}

/// Each consumer as JSON, with a `celery` object (the worker as Celery's remote control
/// described it: pool, totals, every task it holds) where it is a Celery worker. Celery
/// hostnames are `name@host`; the discovery behind the list is reused, not repeated.
async fn with_celery_workers(
    b: &dyn qdeck_backend::Backend,
    list: &[qdeck_model::domain::Consumer],
) -> serde_json::Value {
    let report = if list.iter().any(|c| c.tag.contains('@')) {
        match qdeck_backend::celery_of(b) {
            Ok(c) => c.workers().await.ok(),
            Err(_) => None,
        }
    } else {
        None
    };
    let rows = list
        .iter()
        .map(|c| {
            let mut v = serde_json::to_value(c).unwrap_or(serde_json::Value::Null);
            let w = report
                .as_ref()
                .and_then(|r| r.workers.iter().find(|w| w.hostname == c.tag));
            if let (serde_json::Value::Object(o), Some(w)) = (&mut v, w) {
                o.insert(
                    "celery".into(),
                    serde_json::to_value(w).unwrap_or(serde_json::Value::Null),
                );
            }
            v
        })
        .collect();
    serde_json::Value::Array(rows)
}

pub async fn consumers(s: &Session, queue: &str, f: Format) -> CliResult {
    let b = s.backend.as_ref();
    let info = fetch::find(b, queue).await?;
    let list = b.consumers(&QueueId::new(info.id.as_str())).await?;
    if f == Format::Json {
        output::print_json(&with_celery_workers(b, &list).await).ok();
        return Ok(OK);
    }
    let mut t = Table::new(vec![
        "TAG",
        "PEER",
        "PREFETCH",
        "ACK",
        "STATE",
        "HOLDING",
        "PROCESSED",
        "FAILED",
        "RATE",
    ]);
    for c in &list {
        t.push(vec![
            name(&c.tag),
            c.peer.as_deref().map_or_else(|| "—".into(), name),
            match c.prefetch {
                Some(0) if !f.is_machine() => "0 (unlimited!)".to_string(),
                p => opt(p),
            },
            match c.ack_mode {
                qdeck_model::domain::AckMode::Auto if !f.is_machine() => {
                    "auto (loses work on crash)".to_string()
                }
                qdeck_model::domain::AckMode::Auto => "auto".to_string(),
                qdeck_model::domain::AckMode::Manual => "manual".to_string(),
                qdeck_model::domain::AckMode::Unknown => "—".to_string(),
            },
            name(&c.state),
            opt(c.holding),
            opt(c.processed),
            opt(c.failed),
            c.rate.map_or_else(
                || "—".into(),
                |r| {
                    if f.is_machine() {
                        format!("{r:.3}")
                    } else {
                        format!("{r:.1}/s")
                    }
                },
            ),
        ]);
    }
    output::print(&t.render(f));
    Ok(OK)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test asserts by unwrapping
mod tests {
    use super::*;
    use qdeck_model::domain::{QueueId, QueueInfo, DLQ_OF};

    /// A DLQ whose sources the broker does not name still says what it is the DLQ of, in
    /// every format: never `DLQ of ` with nothing after it.
    #[test]
    fn a_dlq_row_always_names_what_it_is_the_dlq_of() {
        let mut unnamed = QueueInfo {
            id: QueueId::new("CAP"),
            is_dlq: true,
            ..Default::default()
        };
        let mut noted = unnamed.clone();
        noted.settings.extra.insert(
            DLQ_OF.into(),
            "every consumer of ORDERS (no such consumer listed)".into(),
        );
        let named = QueueInfo {
            dlq_sources: vec![QueueId::new("orders")],
            ..unnamed.clone()
        };
        for f in [Format::Table, Format::Plain, Format::Csv, Format::Json] {
            for (info, want) in [
                (&unnamed, "DLQ of ? ("),
                (&noted, "DLQ of every consumer of ORDERS"),
                (&named, "DLQ of orders"),
            ] {
                let row = QueueRow::new(info, None, None);
                let note = row_cells(&row, f).pop().unwrap();
                assert!(note.starts_with(want), "{f:?}: {note:?}");
                assert!(row.dlq_of.as_deref().is_some_and(|o| !o.trim().is_empty()));
            }
        }
        unnamed.is_dlq = false;
        assert_eq!(QueueRow::new(&unnamed, None, None).dlq_of, None);
    }
}
