//! When the SAS tokens qdeck signs are signed and put again: a sixth of their life before they
//! expire (ten minutes of the default hour), so a short `sas_token_ttl` (some organisations cap
//! SAS lifetimes) is renewed in proportion and a long operation never runs on an expired token.

/// Put a token again once it has less than this left to live.
pub fn refresh_margin(ttl_secs: u64) -> u64 {
    (ttl_secs / 6).max(2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use qdeck_model::config::ServicebusSettings;

    #[test]
    fn lifetimes_parse_with_a_floor_and_renew_in_proportion() {
        let ttl = |t: Option<&str>| {
            ServicebusSettings {
                sas_token_ttl: t.map(str::to_string),
                ..Default::default()
            }
            .sas_token_ttl_secs()
        };
        assert_eq!(ttl(None), Ok(3600));
        assert_eq!(ttl(Some("15m")), Ok(900));
        assert_eq!(ttl(Some(" 10s ")), Ok(10));
        assert!(ttl(Some("9s")).unwrap_err().contains("minimum"));
        assert!(ttl(Some("soon")).unwrap_err().contains("not a duration"));
        assert_eq!(refresh_margin(3600), 600);
        assert_eq!(refresh_margin(900), 150);
        assert_eq!(refresh_margin(10), 2);
    }

    #[test]
    fn a_bad_lifetime_in_a_config_is_named_with_its_profile() {
        let profile = |ttl: &str| {
            format!("[[profiles]]\nname = \"sb\"\nkind = \"servicebus\"\nconnection_string_env = \"CS\"\nsas_token_ttl = \"{ttl}\"\n")
        };
        assert!(qdeck_model::config::parse_str(&profile("20m")).is_ok());
        let e = qdeck_model::config::parse_str(&profile("5s"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("profiles[0].sas_token_ttl") && e.contains("10s"),
            "{e}"
        );
    }
}
