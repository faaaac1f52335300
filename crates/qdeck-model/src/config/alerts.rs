//! `[[alerts]]` rules and `[notify]`, as the file spells them; `engine::alerts::Rule` is
//! the checked form.

use serde::{Deserialize, Serialize};

/// One `[[alerts]]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertRuleConfig {
    pub name: String,
    /// Regular expression on the queue name (unanchored); every queue when absent.
    #[serde(default)]
    pub queues: Option<String>,
    /// Profiles the rule watches; every profile when empty.
    #[serde(default)]
    pub profiles: Vec<String>,
    /// Queue kinds (`standard`, `fifo`, `classic`, `quorum`, `stream`, `subscription`,
    /// `topic`, `consumer`, and `dlq` for any dead-letter queue); every kind when empty.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// The condition, over the figures qdeck derives (`engine::alerts::condition`).
    pub when: String,
    /// How long `when` must hold before the rule fires (`30s`, `5m`); at once when absent.
    #[serde(default, rename = "for")]
    pub for_: Option<String>,
    /// `info`, `warning` (the default) or `critical`.
    #[serde(default)]
    pub severity: Option<String>,
    /// One line with `{queue}`, `{profile}`, `{rule}`, `{severity}` and any figure of
    /// `when`'s vocabulary (`{depth}`, `{age}`…).
    #[serde(default)]
    pub summary: Option<String>,
}

/// `[notify]`: what the console does when a rule starts firing. Both off by default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NotifyConfig {
    /// Ring the terminal bell.
    pub bell: bool,
    /// Send a desktop notification (OSC 9 and OSC 777), which travels through SSH to the
    /// local terminal.
    pub desktop: bool,
}
