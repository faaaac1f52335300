//! Browsing a Sidekiq queue (its list, oldest first) and its sorted sets (lowest score first):
//! reads only (LRANGE, ZRANGE).

use super::jobs::sidekiq_job;
use super::{Key, Sidekiq};
use crate::redis::browse::{list_page, zset_page};
use crate::redis::library::{Due, Paging};
use crate::redis::RedisBackend;
use crate::Result;
use qdeck_model::domain::*;

pub(super) async fn page(lib: &Sidekiq, b: &RedisBackend, key: &Key, at: Paging) -> Result<Page> {
    let Paging { off, max, .. } = at;
    let cm = &mut b.conn.get().await?;
    let mut page = Page::default();
    let set = match key {
        Key::Queue(q) => {
            let items = list_page(cm, &lib.key(&format!("queue:{q}")), off, max).await?;
            page.next = (items.len() as isize == max).then(|| format!("q:{}", off + max));
            page.messages = items.iter().map(|p| sidekiq_job(p, None, None)).collect();
            return Ok(page);
        }
        sorted => sorted.set().unwrap_or("schedule"),
    };
    let both = b.both();
    let origin = |name: &str| lib.id(name, both);
    let members = zset_page(cm, &lib.key(set), off, max).await?;
    page.next = (members.len() as isize == max).then(|| format!("z:{}", off + max));
    // Jobs in the dead and retry sets name the queue they failed in.
    let origin_of = (*key != Key::Schedule).then_some(&origin as &dyn Fn(&str) -> QueueId);
    page.messages = members
        .iter()
        .map(|(m, s)| sidekiq_job(m, *s, origin_of))
        .collect();
    Ok(page)
}

/// Jobs of the `retry` or `schedule` set with their due time (the set's score, in seconds).
pub(super) async fn due(lib: &Sidekiq, b: &RedisBackend, key: &Key, at: Paging) -> Result<Due> {
    let Paging { off, max, .. } = at;
    let cm = &mut b.conn.get().await?;
    let members = zset_page(cm, &lib.key(key.set().unwrap_or("schedule")), off, max).await?;
    Ok(members
        .iter()
        .map(|(m, s)| {
            let due = s.map(|secs| (secs * 1000.0) as i64);
            (sidekiq_job(m, *s, None), due)
        })
        .collect())
}
