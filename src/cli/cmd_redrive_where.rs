//! `qdeck redrive DLQ --where PRED`. Where the backend can test messages as it consumes
//! (`Backend::filtered_redrive`: RabbitMQ, Pub/Sub), the real run reads the DLQ once and moves the
//! matching messages as it meets them. Elsewhere, and for `--dry-run` and `--scan-time`, it
//! scans the DLQ, matches, collects ids, then redrives only those (`RedriveRequest::only_ids`,
//! honoured by every backend). `--dry-run` prints the count and a sample of matching ids and
//! changes nothing.

use serde_json::json;

use super::args::{Format, ScanArgs};
use super::cmd_mutate::run_planned;
use super::exit::{CliError, CliResult, OK};
use super::fetch;
use super::output::{self, name};
use super::scan;
use qdeck_backend::MessageFilter;
use qdeck_engine::gate::Mutation;
use qdeck_engine::ops::{self, Planned};
use qdeck_engine::session::Session;
use qdeck_model::domain::{RedriveRequest, RedriveTarget};

pub async fn redrive_where(
    s: &Session,
    mut req: RedriveRequest,
    pred: &str,
    a: &ScanArgs,
    dry_run: bool,
    yes: bool,
    f: Format,
) -> CliResult {
    let pred = scan::predicate(pred)?;
    let limits = scan::limits(s, a, true)?;
    if req.max == Some(0) {
        return Err(CliError::usage("--max must be at least 1"));
    }
    // Matching a predicate reads bodies, so even a dry run needs tier `browse`.
    s.gate.require(
        if dry_run {
            Mutation::Browse
        } else {
            Mutation::Redrive
        },
        &req.source,
    )?;
    let b = s.backend.as_ref();
    // Unknown source or target: exit 4 before a single message is browsed.
    let info = fetch::find(b, req.source.as_str()).await?;
    if let RedriveTarget::Queue(t) = &req.target {
        fetch::find(b, t.as_str()).await?;
    }
    let ctx = scan::eval_context(s);
    // `--scan-time` bounds a scan by time, which a pass that must end on a known message count
    // does not honour: that request keeps the scan-then-move path.
    if !dry_run && a.scan_time.is_none() && qdeck_backend::filtered_redrive_for(b, &info).is_some()
    {
        let text = pred.source().to_string();
        let mut filter = MessageFilter::new(text, move |m| pred.matches(m, &ctx));
        filter.max_examined = a.limit;
        filter.force = a.force;
        // The gate's audit line carries the predicate and the pass's examined/matched counts.
        let planned = ops::plan_redrive_matching(&s.gate, req, filter).await?;
        return run_planned(s, planned, false, yes, f, "nothing to move").await;
    }
    let sel = scan::select(b, &info.id, &pred, &limits, &ctx).await?;
    let mut ids = sel.ids.clone();
    if let Some(m) = req.max {
        ids.truncate(usize::try_from(m).unwrap_or(usize::MAX));
    }
    let selection = json!({
        "predicate": pred.source(),
        "scanned": sel.scan.scanned,
        "matched": sel.matched,
        "selected": ids.len(),
        "complete": sel.scan.complete(),
    });
    if ids.is_empty() {
        if f == Format::Json {
            output::print_json(&json!({
                "dry_run": dry_run,
                "action": "redrive",
                "source": info.id,
                "count": 0,
                "selection": selection,
            }))
            .ok();
        } else {
            output::print(&format!("{}; nothing to move\n", name(&sel.describe())));
        }
        return Ok(OK);
    }
    req.only_ids = Some(ids);
    let mut planned = ops::plan_redrive(&s.gate, req).await?;
    if let Planned::Redrive {
        selection: sel_note,
        ..
    } = &mut planned
    {
        *sel_note = Some(selection.clone());
    }
    if dry_run {
        if f == Format::Json {
            let mut v = planned.to_json();
            if let Some(o) = v.as_object_mut() {
                o.insert("selection".into(), selection);
                o.insert("sample_note".into(), sel.scan.sample_note("checked").into());
                o.insert(
                    "samples".into(),
                    serde_json::to_value(&sel.samples).unwrap_or_default(),
                );
            }
            output::print_json(&v).ok();
        } else {
            let mut out = format!(
                "dry run: {}\nwould {}; nothing changed\n",
                name(&sel.describe()),
                planned.describe()
            );
            for r in &sel.samples {
                out.push_str(&format!("  {}  {}\n", name(&r.id), name(&r.signature)));
            }
            if sel.matched as usize > sel.samples.len() {
                out.push_str(&format!(
                    "  … and {} more\n",
                    sel.matched as usize - sel.samples.len()
                ));
            }
            output::print(&out);
        }
        return Ok(OK);
    }
    eprintln!("qdeck: {}", name(&sel.describe()));
    run_planned(s, planned, false, yes, f, "nothing to move").await
}
