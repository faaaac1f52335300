//! The redrive stamp on a resubmitted copy, as custom properties (JSON values in HTTP
//! headers): `x-qdeck-redriven` counts the redrives the message has been through and
//! `x-qdeck-redriven-at` says when (Unix ms), so the reasons view can tell a message that
//! failed again after a redrive, as on the other brokers.

use super::browse::unquote;
use super::runtime::Outgoing;

const COUNT: &str = "x-qdeck-redriven";
const AT: &str = "x-qdeck-redriven-at";

pub fn stamp_redrive(copy: &mut Outgoing, now_ms: i64) {
    let before = copy
        .custom
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(COUNT))
        .and_then(|(_, v)| unquote(v).trim().parse::<u64>().ok())
        .unwrap_or(0);
    copy.custom
        .retain(|(k, _)| !k.eq_ignore_ascii_case(COUNT) && !k.eq_ignore_ascii_case(AT));
    copy.custom
        .push((COUNT.to_string(), (before + 1).to_string()));
    copy.custom.push((AT.to_string(), now_ms.to_string()));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(custom: &[(&str, &str)]) -> Outgoing {
        Outgoing {
            body: Vec::new(),
            content_type: None,
            props: Default::default(),
            custom: custom
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn the_count_rises_and_the_time_is_replaced() {
        let mut o = out(&[("X-Tenant", "\"acme\"")]);
        stamp_redrive(&mut o, 5);
        assert_eq!(o.custom[1], (COUNT.to_string(), "1".to_string()));
        stamp_redrive(&mut o, 9);
        assert_eq!(
            o.custom,
            vec![
                ("X-Tenant".to_string(), "\"acme\"".to_string()),
                (COUNT.to_string(), "2".to_string()),
                (AT.to_string(), "9".to_string())
            ]
        );
        // A count sent as a JSON string by another tool still counts.
        let mut o = out(&[("x-qdeck-redriven", "\"3\"")]);
        stamp_redrive(&mut o, 1);
        assert_eq!(o.custom[0].1, "4");
    }
}
