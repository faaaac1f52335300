//! Entra ID (Azure AD) tokens for Service Bus, when a profile asks for them with `auth =
//! "azure-cli"` (the signed-in Azure CLI) or `"workload-identity"` (a Kubernetes pod's
//! federated token exchanged at the Entra token endpoint, as Azure's
//! `WorkloadIdentityCredential` does). One credential per backend, shared by the management
//! API (`Authorization: Bearer`) and the AMQP connection (CBS put-token of type `jwt`), so a
//! token is fetched once for both and again only when it nears expiry.
//!
//! Tokens are `Secret`s: never logged, never in an error.

mod azure_cli;
mod workload;

use tokio::sync::Mutex;

use super::connstr::unix_now;
use crate::Result;
use qdeck_model::config::secret::{Secret, SecretSource};

pub use azure_cli::parse_cli_output;
pub use workload::parse_token_response;

/// The resource (for the Azure CLI) and scope (for the token endpoint) of Service Bus tokens.
pub const RESOURCE: &str = "https://servicebus.azure.net";
pub const SCOPE: &str = "https://servicebus.azure.net/.default";

/// When an answer gives no usable expiry, the token is trusted for this long.
pub const FALLBACK_LIFETIME_SECS: u64 = 300;
/// The most a token is refreshed ahead of its expiry (a fifth of its lifetime if that is less).
const MAX_MARGIN_SECS: u64 = 600;

#[derive(Clone)]
pub struct AccessToken {
    pub token: Secret,
    /// Unix seconds.
    pub expires_on: u64,
    /// Unix seconds, when it was fetched.
    pub fetched_at: u64,
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AccessToken(***, expires_on: {})", self.expires_on)
    }
}

/// Whether `t` should be replaced at `now`: less than min(10 min, a fifth of its lifetime)
/// left, the same margin the SAS tokens get. The lifetime counts from the fetch, so a token
/// the Azure CLI hands back from its own cache with minutes left is not asked for again on
/// every request.
pub fn refresh_due(now: u64, t: &AccessToken) -> bool {
    let left = t.expires_on.saturating_sub(now);
    let lifetime = t.expires_on.saturating_sub(t.fetched_at);
    left == 0 || left < MAX_MARGIN_SECS.min(lifetime / 5)
}

enum Source {
    AzureCli,
    Workload(workload::Workload),
}

/// A source of Entra ID tokens for Service Bus with its cached token.
pub struct EntraCredential {
    source: Source,
    cache: Mutex<Option<AccessToken>>,
}

impl std::fmt::Debug for EntraCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Entra({})", self.kind())
    }
}

impl EntraCredential {
    pub fn azure_cli() -> EntraCredential {
        EntraCredential {
            source: Source::AzureCli,
            cache: Mutex::new(None),
        }
    }

    /// From `AZURE_CLIENT_ID`, `AZURE_TENANT_ID`, `AZURE_FEDERATED_TOKEN_FILE` and
    /// `AZURE_AUTHORITY_HOST` (optional); a missing one is an error naming it.
    pub fn workload_identity(profile: &str, env: &dyn SecretSource) -> Result<EntraCredential> {
        Ok(EntraCredential {
            source: Source::Workload(workload::Workload::from_env(profile, env)?),
            cache: Mutex::new(None),
        })
    }

    /// The profile's `auth` value this credential stands for.
    pub fn kind(&self) -> &'static str {
        match self.source {
            Source::AzureCli => "azure-cli",
            Source::Workload(_) => "workload-identity",
        }
    }

    /// A token with long enough to live: the cached one, or a new one.
    pub async fn token(&self) -> Result<AccessToken> {
        let mut cache = self.cache.lock().await;
        let now = unix_now();
        if let Some(t) = cache.as_ref().filter(|t| !refresh_due(now, t)) {
            return Ok(t.clone());
        }
        let fresh = match &self.source {
            Source::AzureCli => azure_cli::fetch().await?,
            Source::Workload(w) => w.fetch().await?,
        };
        *cache = Some(fresh.clone());
        Ok(fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(fetched_at: u64, expires_on: u64) -> AccessToken {
        AccessToken {
            token: Secret::new("t"),
            expires_on,
            fetched_at,
        }
    }

    #[test]
    fn an_hour_token_is_refreshed_ten_minutes_before_expiry() {
        let t = tok(1_000, 1_000 + 3_600);
        assert!(!refresh_due(1_000, &t));
        assert!(!refresh_due(1_000 + 3_000, &t), "exactly 10 min left");
        assert!(refresh_due(1_000 + 3_001, &t));
        assert!(refresh_due(1_000 + 4_000, &t), "expired");
    }

    #[test]
    fn a_short_token_is_refreshed_with_a_fifth_of_its_lifetime_left() {
        // The 5-minute fallback: refreshed with 60 s left, not at once.
        let t = tok(1_000, 1_000 + FALLBACK_LIFETIME_SECS);
        assert!(!refresh_due(1_000 + 239, &t));
        assert!(refresh_due(1_000 + 241, &t));
    }

    #[test]
    fn a_token_handed_back_with_minutes_left_is_kept_for_most_of_them() {
        // The CLI's own cache answered with 8 minutes left: asked again with 96 s left.
        let t = tok(1_000, 1_000 + 480);
        assert!(!refresh_due(1_030, &t));
        assert!(!refresh_due(1_000 + 384, &t));
        assert!(refresh_due(1_000 + 385, &t));
        let t = tok(1_000, 1_000);
        assert!(refresh_due(1_000, &t), "a token with no life left");
    }
}
