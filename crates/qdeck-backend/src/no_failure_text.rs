//! Dead letters whose broker records no failure text, only that the deliveries ran out
//! (Pub/Sub: a dead-letter policy's maximum delivery attempts). The backend marks them with
//! [`DELIVERIES_RAN_OUT`]; the reasons view then tells them apart by the deliveries they failed
//! (a count it keeps as written, where numbers in failure texts are normalised away as ids) and
//! their source, unless the user names an attribute to group by.

use qdeck_model::domain::Message;

/// The reason a backend gives a dead letter whose broker records nothing but the deliveries.
pub const DELIVERIES_RAN_OUT: &str = "max delivery attempts reached";

/// `after 5 deliveries` for such a dead letter (`deliveries not recorded` where the broker
/// does not say how many: the fake server, a message without the service's attributes);
/// `None` for any other message.
pub fn deliveries_group(m: &Message) -> Option<String> {
    let d = m.dead_letter.as_ref()?;
    if d.reason.as_deref() != Some(DELIVERIES_RAN_OUT) {
        return None;
    }
    Some(match d.count {
        Some(n) => format!("after {n} deliveries"),
        None => "deliveries not recorded".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdeck_model::domain::DeadLetterInfo;

    fn dead(reason: &str, count: Option<u64>) -> Message {
        Message {
            dead_letter: Some(DeadLetterInfo {
                reason: Some(reason.into()),
                count,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn only_dead_letters_marked_as_run_out_are_grouped_by_deliveries() {
        assert_eq!(
            deliveries_group(&dead(DELIVERIES_RAN_OUT, Some(5))).as_deref(),
            Some("after 5 deliveries")
        );
        assert_eq!(
            deliveries_group(&dead(DELIVERIES_RAN_OUT, None)).as_deref(),
            Some("deliveries not recorded")
        );
        assert_eq!(deliveries_group(&dead("rejected", Some(5))), None);
        assert_eq!(deliveries_group(&Message::default()), None);
    }
}
