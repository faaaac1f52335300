//! Tokens from the signed-in Azure CLI: `az account get-access-token --resource
//! https://servicebus.azure.net --output json`, run directly (no shell) from the `az` found on
//! PATH. The CLI keeps and refreshes its own sign-in; qdeck only reads the token it prints.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use chrono::{Local, NaiveDateTime, TimeZone};
use serde_json::Value;

use super::{AccessToken, FALLBACK_LIFETIME_SECS, RESOURCE};
use crate::servicebus::connstr::unix_now;
use crate::{BackendError, Result};
use qdeck_model::config::redact::redact;
use qdeck_model::config::secret::Secret;

/// The CLI can be slow to start (Python) and may refresh its sign-in over the network.
const TIMEOUT: Duration = Duration::from_secs(60);

const WHAT: &str = "Entra ID token from the Azure CLI (auth = \"azure-cli\")";

/// The first `az` on PATH that is an executable file.
fn find_az() -> Option<PathBuf> {
    let names: &[&str] = if cfg!(windows) {
        &["az.cmd", "az.exe"]
    } else {
        &["az"]
    };
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| is_executable(p))
}

#[cfg(unix)]
fn is_executable(p: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(p: &std::path::Path) -> bool {
    p.is_file()
}

pub async fn fetch() -> Result<AccessToken> {
    let az = find_az().ok_or_else(|| {
        BackendError::Auth(format!(
            "{WHAT}: the Azure CLI (az) is not on PATH; install it and run `az login`, or use another auth"
        ))
    })?;
    let run = tokio::process::Command::new(&az)
        .args([
            "account",
            "get-access-token",
            "--resource",
            RESOURCE,
            "--output",
            "json",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(TIMEOUT, run)
        .await
        .map_err(|_| BackendError::Auth(format!("{WHAT}: az gave no answer within 60 s")))?
        .map_err(|e| BackendError::Auth(format!("{WHAT}: cannot run {}: {e}", az.display())))?;
    if !out.status.success() {
        return Err(failure(
            &String::from_utf8_lossy(&out.stderr),
            out.status.code(),
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    parse_cli_output(&text, unix_now(), local_to_unix)
        .map_err(|why| BackendError::Auth(format!("{WHAT}: {why}")))
}

/// A failed `az` run as one line: a sign-in problem says to run `az login`; anything else
/// gives the CLI's own first error line (redacted, terminal-safe).
fn failure(stderr: &str, code: Option<i32>) -> BackendError {
    let line = stderr
        .lines()
        .map(str::trim)
        .find(|l| l.to_ascii_uppercase().starts_with("ERROR"))
        .or_else(|| stderr.lines().map(str::trim).find(|l| !l.is_empty()))
        .unwrap_or("");
    let line: String = line.chars().take(200).collect();
    let line = qdeck_model::sanitize::one_line(&redact(&line));
    let code = code.map_or_else(|| "killed".to_string(), |c| format!("exit {c}"));
    if stderr.to_ascii_lowercase().contains("az login") {
        BackendError::Auth(format!(
            "{WHAT}: the Azure CLI is not signed in; run `az login` ({code}: {line})"
        ))
    } else {
        BackendError::Auth(format!(
            "{WHAT}: az account get-access-token failed ({code}): {line}"
        ))
    }
}

/// The token and its expiry from the CLI's JSON: `expires_on` (Unix seconds, CLI 2.54 and
/// later) else `expiresOn` (local time, `YYYY-MM-DD HH:MM:SS.ffffff`, converted by `local`);
/// neither readable → `FALLBACK_LIFETIME_SECS` from `now`. Errors never hold the output.
pub fn parse_cli_output(
    text: &str,
    now: u64,
    local: impl Fn(NaiveDateTime) -> Option<u64>,
) -> std::result::Result<AccessToken, String> {
    let v: Value = serde_json::from_str(text.trim())
        .map_err(|_| "az account get-access-token did not print JSON".to_string())?;
    let token = v
        .get("accessToken")
        .and_then(Value::as_str)
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| "az account get-access-token printed no accessToken".to_string())?;
    let unix = v.get("expires_on").and_then(|e| match e {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    });
    let local_time = || {
        let s = v.get("expiresOn")?.as_str()?;
        let t = NaiveDateTime::parse_from_str(s.trim(), "%Y-%m-%d %H:%M:%S%.f").ok()?;
        local(t)
    };
    let expires_on = unix
        .or_else(local_time)
        .unwrap_or(now + FALLBACK_LIFETIME_SECS);
    Ok(AccessToken {
        token: Secret::new(token.trim()),
        expires_on,
        fetched_at: now,
    })
}

/// A wall-clock time on this machine as Unix seconds (the earlier one across a DST fold).
fn local_to_unix(t: NaiveDateTime) -> Option<u64> {
    let at = Local.from_local_datetime(&t).earliest()?;
    u64::try_from(at.timestamp()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(t: NaiveDateTime) -> Option<u64> {
        u64::try_from(t.and_utc().timestamp()).ok()
    }

    const NOW: u64 = 1_700_000_000;

    #[test]
    fn expires_on_in_unix_seconds_wins() {
        let out = r#"{"accessToken": "eyJ0.tok", "expiresOn": "2023-11-14 23:13:20.000000",
            "expires_on": 1700003600, "subscription": "s", "tenant": "t", "tokenType": "Bearer"}"#;
        let t = parse_cli_output(out, NOW, utc).unwrap();
        assert_eq!(t.token.expose(), "eyJ0.tok");
        assert_eq!(t.expires_on, 1_700_003_600);
        assert_eq!(t.fetched_at, NOW);
    }

    #[test]
    fn older_clis_give_local_time_only() {
        // 2023-11-14 23:13:20 is 1_700_003_600 in UTC; the converter stands for the local zone.
        let out = r#"{"accessToken": "tok", "expiresOn": "2023-11-14 23:13:20.123456"}"#;
        let t = parse_cli_output(out, NOW, utc).unwrap();
        assert_eq!(t.expires_on, 1_700_003_600);
        // A zone two hours east: the same wall time is two hours earlier.
        let t = parse_cli_output(out, NOW, |n| utc(n).map(|u| u - 7_200)).unwrap();
        assert_eq!(t.expires_on, 1_700_003_600 - 7_200);
    }

    #[test]
    fn no_readable_expiry_trusts_the_token_for_five_minutes() {
        for out in [
            r#"{"accessToken": "tok"}"#,
            r#"{"accessToken": "tok", "expiresOn": "soon", "expires_on": "later"}"#,
        ] {
            let t = parse_cli_output(out, NOW, utc).unwrap();
            assert_eq!(t.expires_on, NOW + 300, "{out}");
        }
    }

    #[test]
    fn bad_output_errors_never_echo_it() {
        for out in [
            "SECRET-not-json",
            r#"{"token": "SECRET"}"#,
            r#"{"accessToken": ""}"#,
        ] {
            let e = parse_cli_output(out, NOW, utc).unwrap_err();
            assert!(!e.contains("SECRET"), "{e}");
            assert!(e.contains("az account get-access-token"), "{e}");
        }
    }

    #[test]
    fn a_signed_out_cli_says_to_run_az_login() {
        let e = failure(
            "WARNING: something\nERROR: Please run 'az login' to setup account.\n",
            Some(1),
        )
        .to_string();
        assert!(e.contains("run `az login`"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let e = failure("ERROR: (ResourceNotFound) boom\n", Some(2)).to_string();
        assert!(
            e.contains("failed (exit 2): ERROR: (ResourceNotFound) boom"),
            "{e}"
        );
        assert!(!e.contains("az login"), "{e}");
    }
}
