//! What `qdeck serve` exposes: per-queue gauges, the alerts firing, and each profile's
//! health and cost, read from the poller's last answers (a scrape never calls a broker).

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use qdeck_engine::alerts::{rule::kind_name, Monitor};

type Labels = Vec<(&'static str, String)>;
type Gauges = Family<Labels, Gauge<f64, AtomicU64>>;

/// The per-queue gauges: name, help, and the figure (`None`: not exported for that queue).
type Figure = fn(&qdeck_engine::alerts::Figures) -> Option<f64>;
const QUEUE_GAUGES: &[(&str, &str, Figure)] = &[
    ("queue_depth", "Ready (visible) messages", |f| f.depth),
    (
        "queue_in_flight",
        "Messages leased, unacknowledged or locked",
        |f| f.in_flight,
    ),
    ("queue_delayed", "Delayed or scheduled messages", |f| {
        f.delayed
    }),
    (
        "queue_oldest_age_seconds",
        "Age of the oldest message",
        |f| f.age,
    ),
    (
        "queue_dlq_depth",
        "Messages in the queue's dead-letter queue",
        |f| f.dlq_depth,
    ),
    ("queue_consumers", "Consumers or workers attached", |f| {
        f.consumers
    }),
    ("queue_in_rate", "Arrivals per second", |f| f.in_rate),
    ("queue_out_rate", "Completions per second", |f| f.out_rate),
    (
        "queue_lost",
        "Records deleted before the reader read them (Kafka: committed offset below the log start)",
        |f| f.lost,
    ),
    (
        "queue_retained",
        "Messages a log keeps after its readers read them (retention, not backlog)",
        |f| f.retained,
    ),
    (
        "queue_dlq_forwarded_recent",
        "Messages the broker forwarded to the dead-letter queue over its own recent window (Pub/Sub: dead_letter_message_count over 10 minutes)",
        |f| f.forwarded,
    ),
    (
        "queue_workers_needed",
        "Workers needed to drain within the drain target",
        |f| f.workers_needed,
    ),
    (
        "queue_drain_eta_seconds",
        "Seconds until empty at the current net rate",
        |f| f.eta,
    ),
];

/// The scrape body (OpenMetrics text, which Prometheus also reads as its text format).
pub fn render(m: &Monitor, now_ms: i64) -> Result<String, std::fmt::Error> {
    let mut reg = Registry::with_prefix("qdeck");
    let queue: Vec<Gauges> = QUEUE_GAUGES
        .iter()
        .map(|(name, help, _)| {
            let g = Gauges::default();
            reg.register(*name, *help, g.clone());
            g
        })
        .collect();
    let firing = Gauges::default();
    reg.register(
        "alert_firing",
        "1 for each alert rule firing on a queue (queue empty: on the profile)",
        firing.clone(),
    );
    let up = Gauges::default();
    reg.register("up", "1 when the profile's last poll succeeded", up.clone());
    let poll = Gauges::default();
    reg.register(
        "poll_seconds",
        "How long the profile's last poll took",
        poll.clone(),
    );
    let calls = Family::<Labels, Counter>::default();
    reg.register(
        "api_calls",
        "Broker API calls made since start",
        calls.clone(),
    );
    let cost = Gauges::default();
    reg.register(
        "cost_usd_per_hour",
        "Estimated broker API cost per hour at the current call rate (SQS)",
        cost.clone(),
    );

    for (profile, view) in &m.profiles {
        let p = || vec![("profile", profile.clone())];
        up.get_or_create(&p())
            .set(if view.up() { 1.0 } else { 0.0 });
        if let Some(s) = view.poll_secs {
            poll.get_or_create(&p()).set(s);
        }
        calls.get_or_create(&p()).inc_by(view.calls_total);
        if let Some(usd) = view.budget.and_then(|b| b.usd_per_hour) {
            cost.get_or_create(&p()).set(usd);
        }
        for e in view.store.entries() {
            if e.latest.is_none() {
                continue;
            }
            let kind = if e.info.is_dlq {
                "dlq"
            } else {
                kind_name(e.info.kind)
            };
            let labels = vec![
                ("profile", profile.clone()),
                ("kind", kind.to_string()),
                ("queue", e.info.id.as_str().to_string()),
            ];
            let f = view.figures(e, now_ms);
            for ((_, _, read), g) in QUEUE_GAUGES.iter().zip(&queue) {
                if let Some(v) = read(&f) {
                    g.get_or_create(&labels).set(v);
                }
            }
        }
    }
    for f in m.book.firing_alerts(&m.rules) {
        let k = f.key;
        firing
            .get_or_create(&vec![
                ("rule", k.rule),
                ("profile", k.profile),
                ("queue", k.queue),
                ("severity", f.severity.as_str().to_string()),
            ])
            .set(1.0);
    }
    let mut out = String::new();
    encode(&mut out, &reg)?;
    Ok(out)
}

/// OpenMetrics text as Prometheus's older text format (0.0.4) spells it, for scrapers that do
/// not ask for OpenMetrics: a counter's HELP and TYPE name the `_total` series, and there is
/// no `# EOF` or `# UNIT`.
pub fn as_text_format(open_metrics: &str) -> String {
    let counters: Vec<&str> = open_metrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(open_metrics.len());
    for line in open_metrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|tag| {
            let rest = line.strip_prefix(tag)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(&name)
                .then(|| format!("{tag}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::as_text_format;

    #[test]
    fn counters_are_named_by_their_series_in_the_text_format() {
        let om = "# HELP a_calls Calls.\n# TYPE a_calls counter\na_calls_total{p=\"x\"} 4\n\
                  # HELP a_depth Depth.\n# TYPE a_depth gauge\na_depth 1.0\n# EOF\n";
        assert_eq!(
            as_text_format(om),
            "# HELP a_calls_total Calls.\n# TYPE a_calls_total counter\na_calls_total{p=\"x\"} 4\n\
             # HELP a_depth Depth.\n# TYPE a_depth gauge\na_depth 1.0\n"
        );
    }
}
