//! `ls`, `stats` and `check` over several profiles at once (`--profile a,b`, `--all-profiles`).
//!
//! One round of the multi-profile poller the fleet view runs continuously: every profile is
//! opened and polled on its own task under its own timeout, so a dead broker costs the others
//! nothing: it becomes that profile's error row (or an UNKNOWN problem in a check) while the
//! rest answer as usual.

use std::future::Future;
use std::time::Duration;

use serde::Serialize;

use super::args::{CheckArgs, Command, Format, Global};
use super::cmd_check;
use super::exit::{CliError, CliResult, FAILED, OK, PARTIAL, UNAVAILABLE, USAGE};
use super::fetch::{self, QueueRow};
use super::output::{self, name, Table};
use qdeck_engine::fleet;
use qdeck_engine::multi_poller::{self, PollError, Timeout};
use qdeck_engine::session::Session;
use qdeck_model::config::{self, LoadOptions, Loaded};

/// Which profiles the user asked for, when it is more than the one-profile form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    All,
    Named(Vec<String>),
}

/// `--all-profiles`, or `--profile` holding a comma. A single name keeps the one-profile
/// commands (and their output without a `profile` field).
pub fn selection(g: &Global) -> Option<Selection> {
    if g.all_profiles {
        return Some(Selection::All);
    }
    let p = g.profile.as_deref()?;
    p.contains(',')
        .then(|| Selection::Named(p.split(',').map(|n| n.trim().to_string()).collect()))
}

/// The profile names to poll, in the order given (configured order for `--all-profiles`).
pub(crate) fn resolve(c: &config::AppConfig, sel: &Selection) -> Result<Vec<String>, CliError> {
    let known = config::profile_names(c);
    match sel {
        Selection::All => Ok(fleet::profiles_to_poll(c, &[])),
        Selection::Named(names) => {
            for n in names {
                if n.is_empty() {
                    return Err(CliError::usage(
                        "empty profile name in --profile (write a,b with no empty entry)",
                    ));
                }
                if !known.contains(n) {
                    return Err(CliError::usage(format!(
                        "unknown profile {:?}; known: {}",
                        name(n),
                        known.join(", ")
                    )));
                }
            }
            Ok(fleet::profiles_to_poll(c, names))
        }
    }
}

/// One profile's answer: what the command produced there, or why it could not.
struct Answer<T> {
    profile: String,
    result: Result<T, CliError>,
}

/// One round of the multi-profile poller: `work` against every profile concurrently, each
/// under `timeout`.
async fn each<T, F, Fut>(
    base: &Loaded,
    names: &[String],
    timeout: Duration,
    work: F,
) -> Vec<Answer<T>>
where
    F: Fn(Session) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<T, CliError>> + Send + 'static,
    T: Send + 'static,
{
    multi_poller::round(
        |n| base.options_for(n),
        names,
        Timeout::Fixed(timeout),
        work,
    )
    .await
    .into_iter()
    .map(|a| Answer {
        profile: a.profile,
        result: a.result.map_err(cli_error),
    })
    .collect()
}

/// The exit code a profile's failure maps to; the text is the poller's, the one the fleet view
/// shows for the same profile.
fn cli_error(e: PollError<CliError>) -> CliError {
    match e {
        PollError::Work(e) => e,
        PollError::Timeout(d) => CliError::new(
            UNAVAILABLE,
            format!(
                "no answer within {} (--profile-timeout)",
                humantime::format_duration(d)
            ),
        ),
        e => {
            let code = match &e {
                PollError::Open(b) => CliError::from(b.clone()).code,
                PollError::Config(_) => USAGE,
                _ => FAILED,
            };
            CliError::new(code, e.message())
        }
    }
}

/// 0 when every profile answered, 3 (partial) when some did, else the first profile's code.
/// Each failure is also one line on stderr.
fn exit_code<T>(answers: &[Answer<T>]) -> u8 {
    let mut first = None;
    for a in answers {
        if let Err(e) = &a.result {
            eprintln!("qdeck: profile {}: {}", name(&a.profile), name(&e.message));
            first = first.or(Some(e.code));
        }
    }
    match first {
        None => OK,
        Some(_) if answers.iter().any(|a| a.result.is_ok()) => PARTIAL,
        Some(code) => code,
    }
}

/// A queue row with the profile it came from (JSON: `profile` first, then the usual fields).
#[derive(Serialize)]
struct ProfiledRow<'a> {
    profile: &'a str,
    #[serde(flatten)]
    row: &'a QueueRow,
}

/// The JSON row of a profile that did not answer.
#[derive(Serialize)]
struct ProfileError {
    profile: String,
    error: String,
    exit_code: u8,
}

impl ProfileError {
    fn new(profile: &str, e: &CliError) -> Self {
        ProfileError {
            profile: profile.to_string(),
            error: name(&config::redact::redact(&e.message)),
            exit_code: e.code,
        }
    }
}

pub async fn run(
    cmd: Command,
    sel: Selection,
    g: &Global,
    opts: &LoadOptions,
    f: Format,
) -> CliResult {
    let is_check = matches!(cmd, Command::Check(_));
    // The base load only reads the file: the profile list is resolved from it.
    let base_opts = LoadOptions {
        profile: None,
        ..opts.clone()
    };
    let names = qdeck_engine::config_check::load(&base_opts)
        .map_err(CliError::from)
        .and_then(|base| resolve(&base.config, &sel).map(|n| (base, n)));
    let (base, names) = match names {
        Ok(x) => x,
        Err(e) if is_check => {
            output::print(&format!("QDECK UNKNOWN - {}\n", e.message));
            return Ok(cmd_check::UNKNOWN);
        }
        Err(e) => return Err(e),
    };
    let timeout = g.profile_timeout;
    match cmd {
        Command::Ls { pattern, sample } => ls(&base, &names, timeout, pattern, sample, f).await,
        Command::Stats { queue, sample } => stats(&base, &names, timeout, queue, sample, f).await,
        Command::Check(a) => check(&base, &names, timeout, a).await,
        _ => Err(CliError::usage(
            "a profile list (--profile a,b or --all-profiles) works with ls, stats and check only",
        )),
    }
}

fn headers(profile_column: bool, sample: bool) -> Vec<&'static str> {
    let mut h = Vec::new();
    if profile_column {
        h.push("PROFILE");
    }
    h.extend(super::cmd_read::LS_HEADERS);
    if sample {
        h.extend(super::cmd_read::DERIVED_HEADERS);
    }
    h
}

/// Table cells of a profile that did not answer: its name, empty figures, the reason in NOTE.
fn error_cells(profile: &str, sample: bool, e: &CliError) -> Vec<String> {
    let dash = || "—".to_string();
    let mut cells = vec![name(profile)];
    cells.extend(std::iter::repeat_with(dash).take(super::cmd_read::LS_HEADERS.len() - 1));
    cells.push(format!("error: {}", name(&e.message)));
    if sample {
        cells.extend(std::iter::repeat_with(dash).take(super::cmd_read::DERIVED_HEADERS.len()));
    }
    cells
}

fn print_rows(answers: &[Answer<Vec<QueueRow>>], sample: bool, f: Format) {
    if f == Format::Json {
        let mut out: Vec<serde_json::Value> = Vec::new();
        for a in answers {
            match &a.result {
                Ok(rows) => out.extend(rows.iter().map(|row| {
                    serde_json::to_value(ProfiledRow {
                        profile: &a.profile,
                        row,
                    })
                    .unwrap_or_default()
                })),
                Err(e) => out.push(
                    serde_json::to_value(ProfileError::new(&a.profile, e)).unwrap_or_default(),
                ),
            }
        }
        output::print_json(&out).ok();
        return;
    }
    let several = answers.len() > 1;
    let mut t = Table::new(headers(several, sample));
    for a in answers {
        match &a.result {
            Ok(rows) => {
                for r in rows {
                    let mut cells = Vec::new();
                    if several {
                        cells.push(name(&a.profile));
                    }
                    cells.extend(super::cmd_read::row_cells(r, f));
                    if let Some(d) = &r.derived {
                        cells.extend(super::cmd_read::derived_cells(d, f));
                    }
                    t.push(cells);
                }
            }
            // With one profile the error is on stderr only: there is no column to name it.
            Err(e) if several => t.push(error_cells(&a.profile, sample, e)),
            Err(_) => {}
        }
    }
    output::print(&t.render(f));
}

async fn ls(
    base: &Loaded,
    names: &[String],
    timeout: Duration,
    pattern: Option<String>,
    sample: Option<Duration>,
    f: Format,
) -> CliResult {
    let re = fetch::compile_pattern(pattern.as_deref())?;
    let answers = ls_rows(base, names, timeout, re, sample).await;
    print_rows(&answers, sample.is_some(), f);
    Ok(exit_code(&answers))
}

/// Every profile's queue rows, or its error.
async fn ls_rows(
    base: &Loaded,
    names: &[String],
    timeout: Duration,
    re: Option<regex::Regex>,
    sample: Option<Duration>,
) -> Vec<Answer<Vec<QueueRow>>> {
    each(base, names, timeout, move |s: Session| {
        let re = re.clone();
        async move {
            let b = s.backend.as_ref();
            match sample {
                Some(gap) => {
                    let target = s.loaded.config.ui.drain_target_secs;
                    fetch::rows_sampled(b, re.as_ref(), gap, target).await
                }
                None => fetch::rows_matching(b, re.as_ref()).await,
            }
        }
    })
    .await
}

/// One queue's row in one profile, plus what `stats -o json` says besides the figures.
struct StatsAnswer {
    row: QueueRow,
    extra: serde_json::Value,
}

async fn stats(
    base: &Loaded,
    names: &[String],
    timeout: Duration,
    queue: String,
    sample: Option<Duration>,
    f: Format,
) -> CliResult {
    let answers = each(base, names, timeout, move |s: Session| {
        let queue = queue.clone();
        async move {
            let b = s.backend.as_ref();
            let info = fetch::find(b, &queue).await?;
            let mut row = match sample {
                Some(gap) => {
                    let target = s.loaded.config.ui.drain_target_secs;
                    fetch::sampled(b, vec![info.clone()], gap, target).await?
                }
                None => fetch::rows_of(b, vec![info.clone()]).await?,
            }
            .into_iter()
            .next()
            .ok_or_else(|| CliError::new(FAILED, "the broker returned no figures"))?;
            if sample.is_none() {
                row.derived = None;
            }
            let extra = serde_json::json!({
                "settings": info.settings,
                "capabilities": b.capabilities_for(&info),
                "api_calls": b.api_calls().snapshot(),
            });
            Ok(StatsAnswer { row, extra })
        }
    })
    .await;
    if f == Format::Json {
        let out: Vec<serde_json::Value> = answers
            .iter()
            .map(|a| match &a.result {
                Ok(s) => {
                    let mut v = serde_json::json!({ "profile": a.profile, "queue": s.row });
                    if let (Some(o), Some(extra)) = (v.as_object_mut(), s.extra.as_object()) {
                        o.extend(extra.clone());
                    }
                    v
                }
                Err(e) => {
                    serde_json::to_value(ProfileError::new(&a.profile, e)).unwrap_or_default()
                }
            })
            .collect();
        output::print_json(&out).ok();
        return Ok(exit_code(&answers));
    }
    // In a table, one queue across profiles reads best as the `ls` rows side by side.
    let rows: Vec<Answer<Vec<QueueRow>>> = answers
        .into_iter()
        .map(|a| Answer {
            profile: a.profile,
            result: a.result.map(|s| vec![s.row]),
        })
        .collect();
    print_rows(&rows, sample.is_some(), f);
    Ok(exit_code(&rows))
}

/// One monitoring line for every profile: the worst status, problems named `profile: …`, and
/// perfdata labels prefixed `profile/`. A profile that cannot be checked is an UNKNOWN problem.
async fn check(base: &Loaded, names: &[String], timeout: Duration, a: CheckArgs) -> CliResult {
    if !a.has_threshold() {
        output::print(&format!("QDECK UNKNOWN - {}\n", cmd_check::NO_THRESHOLD));
        return Ok(cmd_check::UNKNOWN);
    }
    if let Err(e) = fetch::compile_pattern(a.pattern.as_deref()) {
        output::print(&format!("QDECK UNKNOWN - {}\n", e.message));
        return Ok(cmd_check::UNKNOWN);
    }
    let args = a.clone();
    let answers = each(base, names, timeout, move |s: Session| {
        let a = args.clone();
        async move {
            cmd_check::judge_profile(&s, &a)
                .await
                .map_err(|m| CliError::new(FAILED, m))
        }
    })
    .await;
    let mut problems: Vec<(u8, String)> = Vec::new();
    let mut perf: Vec<String> = Vec::new();
    let mut queues = 0;
    for ans in &answers {
        let p = name(&ans.profile);
        match &ans.result {
            Ok(j) => {
                queues += j.rows.len();
                problems.extend(j.problems.iter().map(|(c, m)| (*c, format!("{p}: {m}"))));
                let pd = cmd_check::perfdata(&j.rows, Some(&ans.profile), &a);
                if !pd.is_empty() {
                    perf.push(pd);
                }
            }
            Err(e) => problems.push((cmd_check::UNKNOWN, format!("{p}: {}", name(&e.message)))),
        }
    }
    if queues == 0 && problems.is_empty() {
        output::print("QDECK UNKNOWN - no queue matches in any profile\n");
        return Ok(cmd_check::UNKNOWN);
    }
    let code = cmd_check::worst(&problems);
    // The loudest news first, as the one-profile line orders it.
    problems.sort_by_key(|p| std::cmp::Reverse(cmd_check::rank(p.0)));
    let summary = format!(
        "{} profile(s), {}",
        answers.len(),
        cmd_check::summary(queues, &problems)
    );
    cmd_check::print_line(code, &summary, &perf.join(" "));
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::exit::USAGE;

    fn global(profile: Option<&str>, all: bool) -> Global {
        Global {
            profile: profile.map(String::from),
            all_profiles: all,
            profile_timeout: Duration::from_secs(1),
            config: None,
            output: None,
            read_only: false,
            fleet: false,
        }
    }

    #[test]
    fn a_single_name_is_not_a_list() {
        assert_eq!(selection(&global(Some("prod"), false)), None);
        assert_eq!(selection(&global(None, false)), None);
        assert_eq!(selection(&global(Some("x"), true)), Some(Selection::All));
        assert_eq!(
            selection(&global(Some("a, b"), false)),
            Some(Selection::Named(vec!["a".into(), "b".into()]))
        );
    }

    #[test]
    fn unknown_or_empty_names_are_usage_errors_and_duplicates_collapse() {
        let c = config::parse_str(
            "[[profiles]]\nname = \"a\"\nkind = \"local\"\n[[profiles]]\nname = \"b\"\nkind = \"local\"\n",
        )
        .unwrap();
        let named =
            |v: &[&str]| Selection::Named(v.iter().map(std::string::ToString::to_string).collect());
        assert_eq!(resolve(&c, &named(&["b", "a", "b"])).unwrap(), ["b", "a"]);
        assert_eq!(resolve(&c, &Selection::All).unwrap(), ["a", "b"]);
        assert_eq!(resolve(&c, &named(&["a", "zz"])).unwrap_err().code, USAGE);
        assert_eq!(resolve(&c, &named(&["a", ""])).unwrap_err().code, USAGE);
    }

    /// A dead broker and a live local one, through the fleet view's poller and through
    /// `ls -p gone,here`: the same error text for the dead one, the same queues and depths for
    /// the live one.
    #[tokio::test(flavor = "multi_thread")]
    async fn the_fleet_and_the_cli_answer_alike_for_the_same_profiles() {
        use qdeck_backend::local::{LocalHandle, QueueOptions};
        use qdeck_backend::Backend;
        use qdeck_model::domain::{OutgoingMessage, QueueId};

        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("here.db");
        let h = LocalHandle::open(&db).unwrap();
        for (q, n) in [("jobs", 3), ("mail", 1)] {
            h.0.create_queue(q, &QueueOptions::default()).unwrap();
            for i in 0..n {
                let m = OutgoingMessage {
                    body: format!("m{i}").into_bytes(),
                    ..Default::default()
                };
                h.sender()
                    .expect("this backend publishes")
                    .send(&QueueId::new(q), m)
                    .await
                    .unwrap();
            }
        }
        drop(h);
        let cfg = dir.path().join("config.toml");
        std::fs::write(
            &cfg,
            format!(
                "[[profiles]]\nname = \"gone\"\nkind = \"rabbitmq\"\n\
                 amqp_url = \"amqp://guest@127.0.0.1:1/%2f\"\n\
                 management_url = \"http://127.0.0.1:1\"\nrefresh_secs = 0.5\n\
                 [[profiles]]\nname = \"here\"\nkind = \"local\"\npath = {:?}\nrefresh_secs = 0.5\n",
                db.display().to_string()
            ),
        )
        .unwrap();
        let base = qdeck_engine::config_check::load(&LoadOptions {
            file: Some(cfg),
            profile: None,
            read_only: false,
        })
        .unwrap();
        let names = resolve(&base.config, &Selection::All).unwrap();
        assert_eq!(names, ["gone", "here"]);

        let cli = ls_rows(&base, &names, Duration::from_secs(10), None, None).await;
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let loaded = base.clone();
        let _fleet = fleet::spawn(
            move |n| loaded.options_for(n),
            &names,
            Vec::new(),
            Default::default(),
            tx,
        );
        let mut rows = std::collections::HashMap::new();
        tokio::time::timeout(Duration::from_secs(30), async {
            while rows.len() < 2 {
                let r: fleet::FleetRow = rx.recv().await.unwrap();
                rows.insert(r.profile.clone(), r);
            }
        })
        .await
        .unwrap();

        let by = |p: &str| cli.iter().find(|a| a.profile == p).unwrap();
        let Err(dead) = &by("gone").result else {
            panic!("the dead broker answered");
        };
        let fleet_error = rows["gone"].error.clone().unwrap();
        assert_eq!(dead.message, fleet_error);
        assert_eq!(ProfileError::new("gone", dead).error, fleet_error);
        assert_eq!(dead.code, UNAVAILABLE);

        let Ok(live) = &by("here").result else {
            panic!("the local broker failed");
        };
        let here = &rows["here"];
        assert!(here.error.is_none(), "{here:?}");
        let mut cli_rows: Vec<(String, Option<u64>)> =
            live.iter().map(|r| (r.name.clone(), r.depth)).collect();
        let mut fleet_rows: Vec<(String, Option<u64>)> = here
            .fire
            .iter()
            .map(|e| (e.queue.as_str().to_string(), e.depth))
            .collect();
        cli_rows.sort();
        fleet_rows.sort();
        assert_eq!(
            cli_rows,
            [("jobs".to_string(), Some(3)), ("mail".to_string(), Some(1))]
        );
        assert_eq!(fleet_rows, cli_rows);
        assert_eq!((here.queues, here.depth), (Some(2), Some(4)));
    }
}
