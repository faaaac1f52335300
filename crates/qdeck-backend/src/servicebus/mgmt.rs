//! ATOM management API: the queue feed (`$Resources/Queues`, pages of 100) and single entries.
//! Counts come from `CountDetails`, whose children live in their own namespace
//! (`http://schemas.microsoft.com/netservices/2011/06/servicebus`); elements with the right
//! local name in any other namespace are ignored. Needs a key with Manage rights.

use std::collections::BTreeMap;

use quick_xml::events::Event;
use quick_xml::name::ResolveResult;
use quick_xml::NsReader;
use reqwest::Method;

use super::http::{entity_url_path, status_error, Rest};
use crate::{BackendError, Result};

pub const API_VERSION: &str = "2021-05";
pub const PAGE: usize = 100;
const NS_ATOM: &[u8] = b"http://www.w3.org/2005/Atom";
const NS_CONNECT: &[u8] = b"http://schemas.microsoft.com/netservices/2010/10/servicebus/connect";
const NS_COUNTS: &[u8] = b"http://schemas.microsoft.com/netservices/2011/06/servicebus";

/// Which description an entry carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EntryKind {
    #[default]
    Queue,
    Topic,
    Subscription,
}

/// One `<entry>` of the feed: the entity name, its `*Description` fields as text and the
/// `CountDetails` numbers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueEntry {
    pub name: String,
    pub kind: EntryKind,
    pub fields: BTreeMap<String, String>,
    pub counts: BTreeMap<String, u64>,
}

impl QueueEntry {
    pub fn field_u64(&self, k: &str) -> Option<u64> {
        self.fields.get(k).and_then(|v| v.trim().parse().ok())
    }
    pub fn count(&self, k: &str) -> Option<u64> {
        self.counts.get(k).copied()
    }
    pub fn flag(&self, k: &str) -> bool {
        self.fields
            .get(k)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
    }
    /// An entity-name field (`ForwardTo`, `ForwardDeadLetteredMessagesTo`) as an entity path:
    /// Azure may answer a full URI (`sb://ns.servicebus.windows.net/target`) or a bare name.
    pub fn entity_field(&self, k: &str) -> Option<String> {
        let v = self.fields.get(k)?.trim();
        let path = match v.split_once("://") {
            Some((_, rest)) => rest.split_once('/').map_or("", |x| x.1),
            None => v,
        };
        let path = path.split('?').next().unwrap_or("").trim_matches('/');
        (!path.is_empty()).then(|| {
            urlencoding::decode(path)
                .map_or_else(|_| path.to_string(), std::borrow::Cow::into_owned)
        })
    }
}

#[derive(Debug, Default)]
pub struct FeedPage {
    pub entries: Vec<QueueEntry>,
    pub next_href: Option<String>,
}

#[derive(Clone, Copy, PartialEq)]
enum Ns {
    Atom,
    Connect,
    Counts,
    Other,
}

fn ns_of(r: &ResolveResult) -> Ns {
    match r {
        ResolveResult::Bound(n) if n.0 == NS_ATOM => Ns::Atom,
        ResolveResult::Bound(n) if n.0 == NS_CONNECT => Ns::Connect,
        ResolveResult::Bound(n) if n.0 == NS_COUNTS => Ns::Counts,
        _ => Ns::Other,
    }
}

fn xml_err(e: impl std::fmt::Display) -> BackendError {
    BackendError::Protocol(format!("management API answered with malformed XML: {e}"))
}

/// Parse a feed (or a lone entry: a single queue GET answers with `<entry>` at the root).
pub fn parse_feed(xml: &str) -> Result<FeedPage> {
    let mut r = NsReader::from_str(xml);
    // Stack of open elements: (namespace, local name, text collected).
    let mut stack: Vec<(Ns, String, String)> = Vec::new();
    let mut page = FeedPage::default();
    let mut cur: Option<QueueEntry> = None;
    loop {
        let (res, ev) = r.read_resolved_event().map_err(xml_err)?;
        let ns = ns_of(&res);
        match ev {
            Event::Start(e) => {
                let local = String::from_utf8_lossy(e.local_name().as_ref()).into_owned();
                if ns == Ns::Atom && local == "entry" {
                    cur = Some(QueueEntry::default());
                }
                if ns == Ns::Atom && local == "link" {
                    link_next(&e, &stack, &mut page)?;
                }
                stack.push((ns, local, String::new()));
            }
            Event::Empty(e) => {
                let local = String::from_utf8_lossy(e.local_name().as_ref()).into_owned();
                if ns == Ns::Atom && local == "link" {
                    link_next(&e, &stack, &mut page)?;
                }
            }
            Event::Text(t) => {
                if let Some(top) = stack.last_mut() {
                    top.2.push_str(&t.decode().map_err(xml_err)?);
                }
            }
            Event::CData(t) => {
                if let Some(top) = stack.last_mut() {
                    top.2.push_str(&t.decode().map_err(xml_err)?);
                }
            }
            Event::GeneralRef(g) => {
                let ch = if g.is_char_ref() {
                    g.resolve_char_ref().map_err(xml_err)?
                } else {
                    match g.decode().map_err(xml_err)?.as_ref() {
                        "amp" => Some('&'),
                        "lt" => Some('<'),
                        "gt" => Some('>'),
                        "quot" => Some('"'),
                        "apos" => Some('\''),
                        _ => None,
                    }
                };
                if let (Some(c), Some(top)) = (ch, stack.last_mut()) {
                    top.2.push(c);
                }
            }
            Event::End(_) => {
                let Some((ns, local, text)) = stack.pop() else {
                    return Err(xml_err("unbalanced end tag"));
                };
                let parent = stack.last().map(|(n, l, _)| (*n, l.as_str()));
                if ns == Ns::Atom && local == "entry" {
                    if let Some(e) = cur.take() {
                        if !e.name.is_empty() {
                            page.entries.push(e);
                        }
                    }
                } else if let Some(e) = cur.as_mut() {
                    match (ns, local.as_str(), parent) {
                        (Ns::Atom, "title", Some((Ns::Atom, "entry"))) => {
                            e.name = text.trim().to_string();
                        }
                        (Ns::Counts, k, Some((Ns::Connect, "CountDetails"))) => {
                            if let Ok(n) = text.trim().parse::<u64>() {
                                e.counts.insert(k.to_string(), n);
                            }
                        }
                        (Ns::Connect, "TopicDescription", _) => e.kind = EntryKind::Topic,
                        (Ns::Connect, "SubscriptionDescription", _) => {
                            e.kind = EntryKind::Subscription;
                        }
                        // QueueDescription, SubscriptionDescription, TopicDescription.
                        (Ns::Connect, k, Some((Ns::Connect, p)))
                            if p.ends_with("Description") && k != "CountDetails" =>
                        {
                            e.fields.insert(k.to_string(), text.trim().to_string());
                        }
                        _ => {}
                    }
                }
            }
            Event::Eof => {
                // A cut answer would otherwise read as a shorter list (queues missing, no
                // error), since the reader does not require closed elements.
                if let Some((_, open, _)) = stack.last() {
                    return Err(xml_err(format!("the document ends inside <{open}>")));
                }
                break;
            }
            _ => {}
        }
    }
    Ok(page)
}

fn link_next(
    e: &quick_xml::events::BytesStart,
    stack: &[(Ns, String, String)],
    page: &mut FeedPage,
) -> Result<()> {
    // Only the feed's own links, not an entry's.
    if !matches!(stack.last(), Some((Ns::Atom, l, _)) if l == "feed") {
        return Ok(());
    }
    let mut rel = None;
    let mut href = None;
    for a in e.attributes().flatten() {
        let v = a.unescape_value().map_err(xml_err)?.into_owned();
        match a.key.as_ref() {
            b"rel" => rel = Some(v),
            b"href" => href = Some(v),
            _ => {}
        }
    }
    if rel.as_deref() == Some("next") {
        page.next_href = href;
    }
    Ok(())
}

/// `$skip` from a next link, if it has one.
fn skip_of(href: &str) -> Option<usize> {
    let q = href.split_once('?')?.1;
    q.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        let k = urlencoding::decode(k).ok()?;
        (k == "$skip").then(|| v.parse().ok()).flatten()
    })
}

/// A missing Manage right on the management API, said in full: what the key cannot read and
/// what it can still do. Other errors pass unchanged.
fn manage_hint(e: BackendError, rest: &Rest) -> BackendError {
    match e {
        BackendError::Forbidden {
            msg,
            right: Some(r),
        } if r == "Manage" => {
            let who = match &rest.info.credential {
                super::connstr::Credential::Key { name, .. } => {
                    format!("key '{}'", qdeck_model::sanitize::clean(name))
                }
                super::connstr::Credential::Token(_) => "this SAS token".to_string(),
                super::connstr::Credential::Entra(c) => {
                    format!("the Entra ID identity (auth = \"{}\")", c.kind())
                }
            };
            BackendError::forbidden(
                format!(
                    "{who} cannot read the management API (counts and settings need the Manage right; a Listen/Send key can still browse, resubmit and purge by name) — {msg}"
                ),
                Some("Manage"),
            )
        }
        other => other,
    }
}

/// All queues, one request per page of 100.
pub async fn list_all(rest: &Rest) -> Result<Vec<QueueEntry>> {
    list_feed(
        rest,
        "mgmt:list-queues",
        "$Resources/Queues",
        "listing queues",
    )
    .await
}

/// All topics, one request per page of 100.
pub async fn list_topics(rest: &Rest) -> Result<Vec<QueueEntry>> {
    list_feed(
        rest,
        "mgmt:list-topics",
        "$Resources/Topics",
        "listing topics",
    )
    .await
}

/// A topic's subscriptions, named `{topic}/Subscriptions/{name}`.
pub async fn list_subscriptions(rest: &Rest, topic: &str) -> Result<Vec<QueueEntry>> {
    let base = format!("{}/Subscriptions", entity_url_path(topic));
    let mut subs = list_feed(
        rest,
        "mgmt:list-subscriptions",
        &base,
        &format!("listing subscriptions of {topic}"),
    )
    .await?;
    for s in &mut subs {
        s.name = format!("{topic}/Subscriptions/{}", s.name);
    }
    Ok(subs)
}

async fn list_feed(rest: &Rest, op: &str, base: &str, what: &str) -> Result<Vec<QueueEntry>> {
    let mut out = Vec::new();
    let mut skip = 0usize;
    loop {
        let path = format!("{base}?$skip={skip}&$top={PAGE}&api-version={API_VERSION}");
        let resp = rest.call(op, Method::GET, &path, &[], Vec::new()).await?;
        if resp.status != 200 {
            return Err(manage_hint(status_error(&resp, what), rest));
        }
        let text = String::from_utf8_lossy(&resp.body);
        let page = parse_feed(&text)?;
        let n = page.entries.len();
        out.extend(page.entries);
        let next = page.next_href.as_deref().and_then(skip_of);
        match next {
            Some(s) if s > skip => skip = s,
            _ if n >= PAGE => skip += n,
            _ => break,
        }
        if out.len() > 1_000_000 {
            break; // a broker that never stops paging
        }
    }
    Ok(out)
}

/// One entity's entry (queue, topic or `{topic}/Subscriptions/{name}`); `None` when it does
/// not exist (Azure answers an empty feed, or 404).
pub async fn get_queue(rest: &Rest, name: &str) -> Result<Option<QueueEntry>> {
    let path = format!("{}?api-version={API_VERSION}", entity_url_path(name));
    let resp = rest
        .call("mgmt:get-queue", Method::GET, &path, &[], Vec::new())
        .await?;
    if resp.status == 404 {
        return Ok(None);
    }
    if resp.status != 200 {
        return Err(manage_hint(
            status_error(
                &resp,
                &format!("reading entity {}", qdeck_model::sanitize::clean(name)),
            ),
            rest,
        ));
    }
    let page = parse_feed(&String::from_utf8_lossy(&resp.body))?;
    // The entry's title is the last path segment; keep the full entity path as the name.
    Ok(page.entries.into_iter().next().map(|mut e| {
        e.name = name.to_string();
        e
    }))
}

/// ISO-8601 duration (`PT1M`, `PT30.5S`, `P1DT2H`, `P10675199DT2H48M5.4775807S`) → seconds.
pub fn iso_duration_secs(s: &str) -> Option<f64> {
    let s = s.trim();
    let rest = s.strip_prefix('P')?;
    let mut total = 0.0;
    let mut num = String::new();
    let mut in_time = false;
    for c in rest.chars() {
        match c {
            'T' => in_time = true,
            '0'..='9' | '.' => num.push(c),
            unit => {
                let n: f64 = num.parse().ok()?;
                num.clear();
                total += n * match (unit, in_time) {
                    ('D', false) => 86_400.0,
                    ('W', false) => 604_800.0,
                    ('H', true) => 3_600.0,
                    ('M', true) => 60.0,
                    ('S', true) => 1.0,
                    _ => return None,
                };
            }
        }
    }
    num.is_empty().then_some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FEED: &str = r#"<feed xmlns="http://www.w3.org/2005/Atom"><title type="text">Queues</title><id>https://ns/$Resources/Queues</id><link rel="self" href="https://ns/$Resources/Queues?$skip=0&amp;$top=100"/><link rel="next" href="https://ns/$Resources/Queues?%24skip=100&amp;%24top=100"/>
<entry xml:base="https://ns/"><id>https://ns/orders</id><title type="text">orders</title><link rel="self" href="orders"/><content type="application/xml"><QueueDescription xmlns="http://schemas.microsoft.com/netservices/2010/10/servicebus/connect" xmlns:i="http://www.w3.org/2001/XMLSchema-instance"><LockDuration>PT1M</LockDuration><MaxDeliveryCount>10</MaxDeliveryCount><SizeInBytes>1234</SizeInBytes><MessageCount>7</MessageCount><CountDetails xmlns:d2p1="http://schemas.microsoft.com/netservices/2011/06/servicebus"><d2p1:ActiveMessageCount>5</d2p1:ActiveMessageCount><d2p1:DeadLetterMessageCount>2</d2p1:DeadLetterMessageCount><d2p1:ScheduledMessageCount>0</d2p1:ScheduledMessageCount><ActiveMessageCount>999</ActiveMessageCount></CountDetails></QueueDescription></content></entry></feed>"#;

    #[test]
    fn parses_feed_with_real_namespaces() {
        let p = parse_feed(FEED).unwrap();
        assert_eq!(p.entries.len(), 1);
        let e = &p.entries[0];
        assert_eq!(e.name, "orders");
        // The un-namespaced (wrong-namespace) ActiveMessageCount is ignored.
        assert_eq!(e.count("ActiveMessageCount"), Some(5));
        assert_eq!(e.count("DeadLetterMessageCount"), Some(2));
        assert_eq!(e.count("TransferMessageCount"), None);
        assert_eq!(e.field_u64("MaxDeliveryCount"), Some(10));
        assert_eq!(
            e.fields.get("LockDuration").map(String::as_str),
            Some("PT1M")
        );
        assert_eq!(p.next_href.as_deref().and_then(skip_of), Some(100));
    }

    #[test]
    fn durations() {
        assert_eq!(iso_duration_secs("PT1M"), Some(60.0));
        assert_eq!(iso_duration_secs("PT30.5S"), Some(30.5));
        assert_eq!(iso_duration_secs("P1DT2H"), Some(93_600.0));
        assert_eq!(iso_duration_secs("garbage"), None);
    }

    #[test]
    fn malformed_xml_is_an_error_not_a_panic() {
        const ATOM: &str = r#"xmlns="http://www.w3.org/2005/Atom""#;
        for bad in [
            format!("<feed {ATOM}><entry></feed>"),
            "<<<".to_string(),
            "</entry>".to_string(),
            // Cut off mid-entry: must not read as a page without that queue.
            format!("<feed {ATOM}><entry><title>x"),
            format!("<feed {ATOM}><entry><title>x</title></entry>"),
        ] {
            let err = parse_feed(&bad).expect_err(&bad);
            assert!(
                matches!(&err, BackendError::Protocol(m) if m.contains("malformed XML")),
                "{bad}: {err:?}"
            );
        }
        // The same feed, whole, is one entry: the errors above come from the damage.
        let whole = parse_feed(&format!(
            "<feed {ATOM}><entry><title>x</title></entry></feed>"
        ))
        .expect("whole feed");
        assert_eq!(whole.entries.len(), 1);
        assert_eq!(whole.entries[0].name, "x");
    }
}
