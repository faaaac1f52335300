//! Command-line arguments. No subcommand opens the console.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use qdeck_model::rate::{parse_rate, Rate};

#[derive(Debug, Parser)]
#[command(
    name = "qdeck",
    version,
    // The package's description, which names every system qdeck reads (one text, not two).
    about,
    long_about = None,
    after_help = "Run without a command to open the console. Exit codes are listed in the README."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Args, Clone)]
pub struct Global {
    /// Profile to use (default: `default_profile`, else the first profile, else the local broker).
    /// `ls`, `stats` and `check` take a comma list (`-p prod,staging`) and poll them at once.
    #[arg(long, short = 'p', global = true, env = "QDECK_PROFILE")]
    pub profile: Option<String>,
    /// `ls`, `stats` and `check` over every configured profile at once.
    #[arg(long, global = true)]
    pub all_profiles: bool,
    /// With several profiles: how long one profile may take before it is reported as
    /// unavailable (the others never wait for it).
    #[arg(long, global = true, value_parser = parse_duration, default_value = "15s")]
    pub profile_timeout: std::time::Duration,
    /// Config file (default: $XDG_CONFIG_HOME/qdeck/config.toml).
    #[arg(long, global = true, env = "QDECK_CONFIG")]
    pub config: Option<PathBuf>,
    /// Output format (default: table on a terminal, plain lines otherwise).
    #[arg(long, short = 'o', global = true, value_enum)]
    pub output: Option<Format>,
    /// Refuse every mutating action, whatever the profile says (caps `access` at `browse`).
    #[arg(long, global = true)]
    pub read_only: bool,
    /// Open the console on the fleet view: one row per configured profile (with no command,
    /// `-p a,b` opens it on the listed profiles only).
    #[arg(long)]
    pub fleet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
    Plain,
}

impl Format {
    /// CSV and plain lines are read by scripts: a missing figure is an empty cell and a
    /// duration is a number of seconds, as JSON has `null` and seconds.
    pub fn is_machine(self) -> bool {
        matches!(self, Format::Csv | Format::Plain | Format::Json)
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List queues with their live figures.
    #[command(alias = "list")]
    Ls {
        /// Only queues whose name matches this regex.
        pattern: Option<String>,
        /// Poll twice, this far apart, and add the console's derived figures (rates, trend,
        /// time to drain, workers needed, stuck) under `derived`, e.g. `--sample 10s`.
        #[arg(long, value_parser = parse_duration)]
        sample: Option<std::time::Duration>,
    },
    /// Figures, settings, DLQ links and broker notes for one queue.
    Stats {
        queue: String,
        /// Poll twice, this far apart, and add the derived figures (see `ls --sample`).
        #[arg(long, value_parser = parse_duration)]
        sample: Option<std::time::Duration>,
    },
    /// Show messages without removing them.
    #[command(alias = "browse")]
    Peek {
        queue: String,
        /// How many messages.
        #[arg(short = 'n', long, default_value_t = 10)]
        count: usize,
        /// Browse even where it could push messages toward the DLQ.
        #[arg(long)]
        force: bool,
        /// Delayed / scheduled messages (not yet due) instead, soonest first, with their due
        /// time. Brokers that cannot list them say so (exit 1).
        #[arg(long, conflicts_with = "force")]
        scheduled: bool,
    },
    /// Who consumes a queue (consumers, or workers holding leases).
    #[command(alias = "workers")]
    Consumers { queue: String },
    /// Publish one message (BODY, or standard input when BODY is `-` or absent).
    Send {
        queue: String,
        body: Option<String>,
        /// Message key (ordering key / group).
        #[arg(long)]
        key: Option<String>,
        /// Delay before the message becomes visible, e.g. 30s, 5m.
        #[arg(long, value_parser = parse_duration)]
        delay: Option<std::time::Duration>,
        /// Header as NAME=VALUE (repeatable).
        #[arg(long = "header", short = 'H', value_parser = parse_header)]
        headers: Vec<(String, String)>,
        /// Standard property as NAME=VALUE, named as the broker names it (repeatable):
        /// RabbitMQ content_type, correlation_id, …; SQS MessageGroupId; Service Bus
        /// ContentType, CorrelationId, Label, …
        #[arg(long = "property", short = 'P', value_parser = parse_header)]
        properties: Vec<(String, String)>,
    },
    /// Move messages from a dead-letter queue back to their origin or to --to.
    Redrive {
        dlq: String,
        /// Target queue (default: each message's origin).
        #[arg(long)]
        to: Option<String>,
        /// Move at most this many.
        #[arg(long)]
        max: Option<u64>,
        /// At most this many messages per second (above 0; fractions allowed).
        #[arg(long, value_parser = parse_rate)]
        rate: Option<Rate>,
        /// At most this many messages copied but not yet deleted at once. A crash (kill -9,
        /// lost connection) may duplicate up to this many, never lose any. Default: RabbitMQ
        /// 500, SQS 10 per batch, Service Bus 100 over AMQP (16 over REST), local broker 0 (one
        /// transaction per batch).
        #[arg(long)]
        window: Option<u32>,
        /// Say what would happen and change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
        /// Only messages matching this predicate (README "Predicates"), e.g.
        /// 'reason = "rejected" and header.x-tenant = "acme"'. RabbitMQ reads the DLQ once and
        /// moves matching messages as it meets them (--limit: examine the first N; the others
        /// return with the redelivered flag). Elsewhere, and with --scan-time, the DLQ is
        /// scanned first (bounded by --limit / --scan-time) and only the matching messages
        /// seen move; any of them not moved count as failed: exit 3, or 1 if none moved.
        #[arg(long = "where", value_name = "PRED")]
        filter: Option<String>,
        #[command(flatten)]
        scan: ScanArgs,
    },
    /// Group a dead-letter queue's messages by failure signature (reason, error text with
    /// numbers and ids normalised, origin), over a bounded scan. A queue that has a DLQ is
    /// read through its DLQ (as the console's `F`), unless --live.
    Reasons {
        /// A DLQ, or a queue whose DLQ to read.
        dlq: String,
        /// Group the named queue's own (live) messages, not its DLQ's.
        #[arg(long)]
        live: bool,
        /// Group by the text of this header or attribute (before the profile's
        /// `reason_headers`); repeat for fallbacks. For brokers that record no failure reason
        /// (Pub/Sub), where the application writes its own.
        #[arg(long = "by", value_name = "HEADER")]
        by: Vec<String>,
        #[command(flatten)]
        scan: ScanArgs,
    },
    /// Write a queue's messages to a JSON Lines file, one object per message. A browse:
    /// nothing is removed.
    Export {
        queue: String,
        /// File to write (replaced when it exists).
        #[arg(long, short = 'f')]
        file: PathBuf,
        /// Only messages matching this predicate (README "Predicates").
        #[arg(long = "where", value_name = "PRED")]
        filter: Option<String>,
        /// Export at most this many messages.
        #[arg(short = 'n', long = "count")]
        count: Option<u64>,
        #[command(flatten)]
        scan: ScanArgs,
    },
    /// Send the messages of an export file (JSON Lines) to a queue. The whole file is checked
    /// before anything is sent.
    Import {
        queue: String,
        #[arg(long, short = 'f')]
        file: PathBuf,
        /// At most this many messages per second (above 0; fractions allowed).
        #[arg(long, value_parser = parse_rate)]
        rate: Option<Rate>,
        /// Check the file and the queue, say what would be sent, send nothing.
        #[arg(long)]
        dry_run: bool,
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Cancel one delayed message (local broker, Sidekiq's scheduled set, Service Bus over
    /// AMQP by sequence number): delete it before it is due. Needs access = "full"; confirmed
    /// and audited. An id that is not a delayed message of QUEUE (already due, leased, gone)
    /// changes nothing (exit 4).
    CancelScheduled {
        queue: String,
        /// The message id (as `peek --scheduled` shows it).
        id: String,
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Edit one message in $VISUAL/$EDITOR (key, headers, body) and send the edited copy to
    /// its origin or --to; the original is deleted once the broker confirmed the copy.
    Edit {
        queue: String,
        /// The message id (as `peek` shows it).
        id: String,
        /// Send the copy here (default: the queue the message was dead-lettered from, else
        /// the queue it is in).
        #[arg(long)]
        to: Option<String>,
        /// Do not ask for confirmation after editing.
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Copy messages to another queue, on this profile or on --to-profile (e.g. a Service Bus
    /// DLQ into the local broker). The source is browsed, nothing is removed. Headers the
    /// source broker set arrive as x-qdeck-NAME; renamed and dropped headers are listed.
    Copy(TransferArgs),
    /// Move messages to another queue, on this profile or on --to-profile: copy, then delete
    /// each original once the target confirmed its copy (needs access = "full" on the source).
    Move(TransferArgs),
    /// Delete every message in a queue, or with --where only the matching ones.
    Purge {
        queue: String,
        #[arg(long)]
        dry_run: bool,
        #[arg(long, short = 'y')]
        yes: bool,
        /// Delete only messages matching this predicate (README "Predicates"), found by a
        /// bounded scan. Local broker, RabbitMQ and SQS (README "purge --where").
        #[arg(long = "where", value_name = "PRED")]
        filter: Option<String>,
        /// NATS JetStream: purge only the stream's messages on subjects this filter matches
        /// (`*` and `>` wildcards), in one server-side STREAM.PURGE; the others stay.
        #[arg(long, value_name = "FILTER", conflicts_with_all = ["filter", "seq"])]
        subject: Option<String>,
        /// NATS JetStream: delete exactly these stream sequences (comma-separated); on a DLQ
        /// stream, these dead letters (each original, then its advisory).
        #[arg(
            long,
            value_name = "SEQ,...",
            value_delimiter = ',',
            conflicts_with = "filter"
        )]
        seq: Vec<u64>,
        #[command(flatten)]
        scan: ScanArgs,
    },
    /// Send a Celery remote-control command that changes workers (RabbitMQ and Redis):
    /// revoke tasks, grow or shrink a worker's pool. Needs access = "full"; confirmed and
    /// audited. Reading workers (`consumers`) never sends these.
    WorkerControl {
        #[command(subcommand)]
        cmd: WorkerControlCmd,
        #[arg(long, short = 'y', global = true)]
        yes: bool,
    },
    /// Monitoring check: exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN, with a one-line summary.
    Check(CheckArgs),
    /// Poll every profile (or `-p a,b`) and print each alert rule's transitions (firing,
    /// resolved) as they happen, one line each (`-o json`: JSON lines); optionally run a hook
    /// per transition. Runs until interrupted. The rules are `[[alerts]]` in the config.
    Watch(WatchArgs),
    /// Prometheus exporter: per-queue gauges, firing alerts and each profile's health at
    /// http://LISTEN/metrics (and /healthz), from a background poller under the call budget.
    /// Profiles are opened read-only.
    Serve(ServeArgs),
    /// The sessions of a session-enabled Service Bus queue or subscription (AMQP transport):
    /// each session's id, the messages it holds and its session state. `--peek ID` shows the
    /// messages of one session instead (a peek: nothing is locked).
    Sessions {
        queue: String,
        /// Show this session's messages.
        #[arg(long, value_name = "SESSION")]
        peek: Option<String>,
        /// How many messages with --peek.
        #[arg(short = 'n', long, default_value_t = 10)]
        count: usize,
    },
    /// Kafka: move a consumer group's committed offsets on one topic, while the group is
    /// empty (as Kafka requires). The plan shows per partition the old offset → the new one
    /// and the lag before → after. Give one of --to, --to-time, --shift. Needs
    /// access = "full"; confirmed and audited (with every old and new offset).
    ResetOffsets {
        /// GROUP@TOPIC, the group's row
        row: String,
        /// `earliest`, `latest`, or an offset for every partition (kept within the log)
        #[arg(
            long,
            value_name = "earliest|latest|OFFSET",
            allow_hyphen_values = true
        )]
        to: Option<String>,
        /// The first record at or after this time (RFC 3339, e.g. 2026-12-06T10:00:00Z)
        #[arg(long, value_name = "RFC3339")]
        to_time: Option<String>,
        /// Move each committed offset by N records (negative: back), kept within the log
        #[arg(long, value_name = "N", allow_hyphen_values = true)]
        shift: Option<i64>,
        #[arg(long)]
        dry_run: bool,
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Pub/Sub: seek a subscription back to a time (replay). Messages published since become
    /// unacknowledged and are delivered again (acknowledged ones only where the subscription
    /// retains them); those published before are acknowledged. Needs access = "full";
    /// planned, confirmed and audited.
    Replay {
        /// PROJECT/SUBSCRIPTION
        queue: String,
        /// The time to seek back to (RFC 3339, e.g. 2026-12-06T10:00:00Z)
        #[arg(long, value_name = "RFC3339")]
        to_time: String,
        #[arg(long)]
        dry_run: bool,
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Kafka: delete a consumer group and its committed offsets, while it is empty (as Kafka
    /// requires). Needs access = "full"; confirmed and audited.
    DeleteGroup {
        /// The group id (GROUP@TOPIC names the group too)
        group: String,
        #[arg(long)]
        dry_run: bool,
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Start capturing a NATS JetStream consumer's dead letters: creates a stream of its
    /// MAX_DELIVERIES and MSG_TERMINATED advisories (kept 30 days, at most 1,000,000), which
    /// becomes the consumer's DLQ. Needs access = "full"; audited.
    CreateDlq {
        /// STREAM/CONSUMER
        queue: String,
    },
    /// Create a queue on the local broker.
    Create {
        queue: String,
        /// Dead-letter queue (created when missing).
        #[arg(long)]
        dlq: Option<String>,
        /// Receives after which a message is dead-lettered (needs --dlq).
        #[arg(long)]
        max_receives: Option<u32>,
        /// Lease (visibility timeout), e.g. 30s.
        #[arg(long, value_parser = parse_duration, default_value = "30s")]
        lease: std::time::Duration,
        /// parallel | exclusive | ordered
        #[arg(long, default_value = "parallel")]
        key_policy: String,
    },
    /// Run the demo workload on the local broker without the console.
    Demo {
        /// Messages per second produced.
        #[arg(long, default_value_t = 10.0)]
        rate: f64,
        /// Workers at start.
        #[arg(long, default_value_t = 1)]
        workers: usize,
        /// Messages per second one worker completes.
        #[arg(long, default_value_t = 4.0)]
        per_worker: f64,
        /// Stop after this long (default: until Ctrl-C).
        #[arg(long, value_parser = parse_duration)]
        duration: Option<std::time::Duration>,
    },
    /// Configuration: where it is, what it holds (secrets redacted), whether it is valid.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Shell completions.
    Completions { shell: clap_complete::Shell },
}

/// `copy` and `move`: source (QUEUE on --profile), target, selection and pace.
#[derive(Debug, Args, Clone)]
pub struct TransferArgs {
    pub queue: String,
    /// Target queue (must exist).
    #[arg(long)]
    pub to: String,
    /// Profile of the target queue (default: the source profile).
    #[arg(long)]
    pub to_profile: Option<String>,
    /// Only messages matching this predicate (README "Predicates").
    #[arg(long = "where", value_name = "PRED")]
    pub filter: Option<String>,
    /// At most this many messages.
    #[arg(short = 'n', long = "count")]
    pub count: Option<u64>,
    /// At most this many messages per second (above 0; fractions allowed).
    #[arg(long, value_parser = parse_rate)]
    pub rate: Option<Rate>,
    /// Say how many would go and how headers map; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    #[command(flatten)]
    pub scan: ScanArgs,
}

/// Bounds of the scan behind `reasons`, `export` and `--where`.
#[derive(Debug, Args, Clone, Default)]
pub struct ScanArgs {
    /// Scan at most this many messages (default: [triage] scan_limit, 5000; export: all).
    #[arg(long)]
    pub limit: Option<u64>,
    /// Scan for at most this long, e.g. 10s (default: [triage] scan_secs, 30 s; export: no limit).
    #[arg(long, value_parser = parse_duration)]
    pub scan_time: Option<std::time::Duration>,
    /// Browse even where it could push messages toward the DLQ (as `peek --force`).
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// Run this shell command for each transition, the transition as one JSON line on its
    /// standard input.
    #[arg(long, conflicts_with = "hook_url_env")]
    pub hook_cmd: Option<String>,
    /// POST each transition to the URL held in this environment variable (a webhook URL is a
    /// secret: it is never taken from the command line).
    #[arg(long)]
    pub hook_url_env: Option<String>,
    /// Body of the POST: the transition's JSON (generic) or a Slack-compatible `text`.
    #[arg(long, value_enum, default_value = "generic")]
    pub hook_format: HookFormat,
    /// How long one hook may take before it is abandoned (a command is killed).
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub hook_timeout: std::time::Duration,
    /// Tries per transition before the hook is given up (logged).
    #[arg(long, default_value_t = 3)]
    pub hook_tries: u32,
    /// Where the rules' states are kept across restarts (default:
    /// $XDG_STATE_HOME/qdeck/watch-state.json).
    #[arg(long)]
    pub state: Option<PathBuf>,
    /// Stop after this long (default: run until interrupted).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<std::time::Duration>,
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on (a loopback address unless --listen-any).
    #[arg(long, default_value = "127.0.0.1:9185")]
    pub listen: String,
    /// Allow a non-loopback --listen address (queue names and figures become visible to
    /// whoever reaches it).
    #[arg(long)]
    pub listen_any: bool,
    /// Connections served at once; more wait in the kernel's backlog until one closes. Far
    /// above what scrapers and dashboards open, low enough that a flood cannot take every
    /// file descriptor.
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// A client must send a whole request head within this long of connecting (or of its
    /// last answer), or it is disconnected.
    #[arg(long, value_parser = parse_duration, default_value = "10s")]
    pub header_timeout: std::time::Duration,
    /// Stop after this long (default: run until interrupted).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<std::time::Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HookFormat {
    Generic,
    Slack,
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Only queues whose name matches this regex.
    pub pattern: Option<String>,
    /// Poll twice, this far apart, so `--max-stuck` and rates can be judged.
    #[arg(long, value_parser = parse_duration)]
    pub sample: Option<std::time::Duration>,
    /// CRITICAL when a queue is stuck (age of oldest rising while depth stays flat; needs
    /// --sample).
    #[arg(long)]
    pub max_stuck: bool,
    /// CRITICAL when depth exceeds this.
    #[arg(long)]
    pub max_depth: Option<u64>,
    /// WARNING when depth exceeds this.
    #[arg(long)]
    pub warn_depth: Option<u64>,
    /// CRITICAL when the oldest message of a (non-DLQ) queue is older than this (e.g. 5m).
    #[arg(long, value_parser = parse_duration)]
    pub max_age: Option<std::time::Duration>,
    /// WARNING when the oldest message of a (non-DLQ) queue is older than this.
    #[arg(long, value_parser = parse_duration)]
    pub warn_age: Option<std::time::Duration>,
    /// CRITICAL when a DLQ holds more than this: the DLQ of every matched queue, and matched
    /// DLQs themselves.
    #[arg(long)]
    pub max_dlq: Option<u64>,
    /// WARNING when a DLQ holds more than this.
    #[arg(long)]
    pub warn_dlq: Option<u64>,
    /// CRITICAL when the oldest message in a DLQ is older than this.
    #[arg(long, value_parser = parse_duration)]
    pub max_dlq_age: Option<std::time::Duration>,
    /// WARNING when the oldest message in a DLQ is older than this.
    #[arg(long, value_parser = parse_duration)]
    pub warn_dlq_age: Option<std::time::Duration>,
    /// CRITICAL when a DLQ grew by more than this since the previous check (kept in the state
    /// directory between runs): catches new dead letters on a DLQ that is never empty.
    #[arg(long)]
    pub max_dlq_growth: Option<u64>,
    /// WARNING when a DLQ grew by more than this since the previous check.
    #[arg(long)]
    pub warn_dlq_growth: Option<u64>,
}

impl CheckArgs {
    pub fn has_threshold(&self) -> bool {
        self.max_depth.is_some()
            || self.warn_depth.is_some()
            || self.max_age.is_some()
            || self.warn_age.is_some()
            || self.max_dlq.is_some()
            || self.warn_dlq.is_some()
            || self.max_dlq_age.is_some()
            || self.warn_dlq_age.is_some()
            || self.max_dlq_growth.is_some()
            || self.warn_dlq_growth.is_some()
            || self.max_stuck
    }
}

#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Print the config file path qdeck reads.
    Path,
    /// Print the effective configuration, secrets redacted.
    Show,
    /// Check a config file (default: the one qdeck reads).
    Validate { file: Option<PathBuf> },
}

pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    if let Ok(secs) = t.parse::<f64>() {
        // `try_`: a figure too large for a Duration is bad input, not a panic.
        if let Ok(d) = std::time::Duration::try_from_secs_f64(secs) {
            return Ok(d);
        }
        return Err(format!("{s:?} is not a duration (e.g. 30s, 5m, 1h)"));
    }
    humantime::parse_duration(t).map_err(|_| format!("{s:?} is not a duration (e.g. 30s, 5m, 1h)"))
}

fn parse_header(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(format!("{s:?} is not NAME=VALUE")),
    }
}

/// The Celery remote-control commands `worker-control` sends.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum WorkerControlCmd {
    /// Every worker forgets these task ids: a worker skips a revoked task when its turn
    /// comes (Celery's `revoke`; without --terminate a running task runs on).
    Revoke {
        #[arg(required = true)]
        ids: Vec<String>,
        /// Also stop the task if it is running (Celery's terminate, SIGTERM to its process).
        #[arg(long)]
        terminate: bool,
    },
    /// Add N processes or threads to WORKER's pool (prefork pools; Celery's `pool_grow`).
    PoolGrow {
        worker: String,
        #[arg(default_value_t = 1)]
        n: u32,
    },
    /// Remove N from WORKER's pool (Celery's `pool_shrink`).
    PoolShrink {
        worker: String,
        #[arg(default_value_t = 1)]
        n: u32,
    },
}
