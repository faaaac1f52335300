//! Browsing a Celery queue on kombu's Redis transport in the order a worker would take its
//! messages: the priority lists step by step (0, 3, 6, 9), each from its right end. Reads
//! only (LRANGE): no message moves, nothing enters `unacked`.

use super::envelope;
use super::listing::lists;
use crate::redis::browse::list_page;
use crate::Result;
use qdeck_model::domain::*;

/// A page from list `step` (index into the priority steps), `off` messages into it.
pub async fn page(
    cm: &mut ::redis::aio::ConnectionManager,
    queue: &str,
    step: usize,
    off: isize,
    max: isize,
) -> Result<Page> {
    let keys = lists(queue);
    let mut page = Page::default();
    let (mut step, mut off) = (step, off);
    while step < keys.len() {
        let room = max - page.messages.len() as isize;
        if room <= 0 {
            break;
        }
        let items = list_page(cm, &keys[step], off, room).await?;
        let got = items.len() as isize;
        let shown = keys[step].replace(super::listing::SEP, "\\x06\\x16");
        for (i, raw) in items.iter().enumerate() {
            page.messages
                .push(envelope::message(raw, &shown, off as usize + i));
        }
        if got < room {
            step += 1;
            off = 0;
        } else {
            off += got;
        }
    }
    page.next = (step < keys.len()).then(|| format!("c{step}:{off}"));
    Ok(page)
}
