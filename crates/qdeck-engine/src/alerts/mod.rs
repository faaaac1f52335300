//! Alert rules (`[[alerts]]`): a condition over the figures qdeck derives, held for a while,
//! fires; the console, `qdeck watch` and `qdeck serve` read the same rules and states.

pub mod book;
pub mod condition;
pub mod figures;
pub mod monitor;
pub mod rule;
pub mod tracker;

pub use book::{AlertBook, Evaluator};
pub use condition::Condition;
pub use figures::Figures;
pub use monitor::{evaluate, watched_for_history, Health, Monitor, ProfileView};
pub use rule::{Rule, Severity};
pub use tracker::{Change, Firing, Key, Phase, Tracker, Transition};

use qdeck_model::config::AppConfig;

/// The configuration's rules, checked; the first bad one is an error naming its key.
pub fn rules(c: &AppConfig) -> Result<Vec<Rule>, String> {
    let mut out: Vec<Rule> = Vec::with_capacity(c.alerts.len());
    for (i, r) in c.alerts.iter().enumerate() {
        let rule = Rule::compile(r, i)?;
        if out.iter().any(|o| o.name == rule.name) {
            return Err(format!("alerts[{i}].name {:?} is used twice", rule.name));
        }
        out.push(rule);
    }
    Ok(out)
}
