//! Configuration: the example parses, layering works, bad files say where and what, secrets
//! are redacted.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test asserts by unwrapping

use std::path::PathBuf;

use qdeck_model::config::{self, LoadOptions, ProfileKind};

fn write(dir: &tempfile::TempDir, text: &str) -> PathBuf {
    let p = dir.path().join("config.toml");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn example_config_parses_with_every_kind() {
    let text = include_str!("../config.example.toml");
    let c = config::parse_str(text).expect("config.example.toml must parse");
    let kinds: Vec<&str> = c.profiles.iter().map(|p| p.kind.name()).collect();
    assert_eq!(
        kinds,
        vec![
            "local",
            "rabbitmq",
            "sqs",
            "servicebus",
            "redis",
            "nats",
            "kafka",
            "pubsub"
        ]
    );
    assert!(c.profiles.iter().any(|p| p.access.is_some()));
    assert!(c
        .profiles
        .iter()
        .any(|p| p.effective_access() < qdeck_model::config::Access::Redrive));
    assert!(c.profiles.iter().any(|p| p.protected));
}

#[test]
fn profile_selection_and_read_only_flag() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        &dir,
        r#"
default_profile = "Second"
[[profiles]]
name = "First"
kind = "local"
path = "/tmp/a.db"
[[profiles]]
name = "Second"
kind = "local"
path = "/tmp/b.db"
"#,
    );
    let l = config::load(&LoadOptions {
        file: Some(f.clone()),
        ..Default::default()
    })
    .unwrap();
    // Names keep their case: the config crate lowercases keys, not values.
    assert_eq!(l.profile.name, "Second");
    assert!(!l.profile.read_only);
    let l = config::load(&LoadOptions {
        file: Some(f),
        profile: Some("First".into()),
        read_only: true,
    })
    .unwrap();
    assert_eq!(l.profile.name, "First");
    assert!(l.profile.read_only);
    match &l.profile.kind {
        ProfileKind::Local(s) => assert_eq!(s.resolved_path(), PathBuf::from("/tmp/a.db")),
        k => panic!("unexpected kind {k:?}"),
    }
}

#[test]
fn unknown_profile_names_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(&dir, "[[profiles]]\nname = \"dev\"\nkind = \"local\"\n");
    let e = config::load(&LoadOptions {
        file: Some(f),
        profile: Some("prod".into()),
        ..Default::default()
    })
    .unwrap_err();
    assert!(e.0.contains("unknown profile \"prod\""), "{}", e.0);
    assert!(e.0.contains("dev"), "{}", e.0);
}

#[test]
fn malformed_config_says_file_and_problem() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(&dir, "[ui\nrefresh_secs = 2\n");
    let e = config::load(&LoadOptions {
        file: Some(f.clone()),
        ..Default::default()
    })
    .unwrap_err();
    assert!(e.0.contains(&f.display().to_string()), "{}", e.0);
    assert!(e.0.contains("not valid TOML"), "{}", e.0);
    assert!(!e.0.contains('\n'), "one line: {}", e.0);

    let f = write(&dir, "[[profiles]]\nname = \"x\"\nkind = \"activemq\"\n");
    let e = config::load(&LoadOptions {
        file: Some(f),
        ..Default::default()
    })
    .unwrap_err();
    assert!(e.0.contains("activemq"), "{}", e.0);

    // A kind qdeck speaks, without what it needs to reach its broker: named at load.
    for (kind, needs) in [("kafka", "bootstrap_servers"), ("pubsub", "projects")] {
        let f = write(
            &dir,
            &format!("[[profiles]]\nname = \"x\"\nkind = \"{kind}\"\n"),
        );
        let e = config::load(&LoadOptions {
            file: Some(f),
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.0.contains(needs) && !e.0.contains('\n'), "{}", e.0);
    }

    let f = write(
        &dir,
        "[[profiles]]\nname = \"x\"\nkind = \"local\"\npth = \"/tmp/x\"\n",
    );
    let e = config::load(&LoadOptions {
        file: Some(f),
        ..Default::default()
    })
    .unwrap_err();
    assert!(e.0.contains("pth"), "unknown key named: {}", e.0);

    let f = write(&dir, "[ui]\nrefresh_secs = \"fast\"\n");
    let e = config::load(&LoadOptions {
        file: Some(f),
        ..Default::default()
    })
    .unwrap_err();
    assert!(e.0.contains("refresh_secs"), "{}", e.0);
}

#[test]
fn duplicate_profile_names_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        &dir,
        "[[profiles]]\nname = \"a\"\nkind = \"local\"\n[[profiles]]\nname = \"a\"\nkind = \"local\"\n",
    );
    let e = config::load(&LoadOptions {
        file: Some(f),
        ..Default::default()
    })
    .unwrap_err();
    assert!(e.0.contains("used twice"), "{}", e.0);
}

#[test]
fn missing_explicit_config_file_is_an_error() {
    let e = config::load(&LoadOptions {
        file: Some(PathBuf::from("/nonexistent/qdeck.toml")),
        ..Default::default()
    })
    .unwrap_err();
    assert!(e.0.contains("does not exist"), "{}", e.0);
}

/// `--read-only` binds the whole run: switching to a writable profile keeps the gate shut.
#[tokio::test]
async fn read_only_flag_survives_a_profile_switch() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(
        &file,
        format!(
            "audit_log = {:?}\n[[profiles]]\nname = \"ro\"\nkind = \"local\"\npath = {:?}\nread_only = true\n\n[[profiles]]\nname = \"rw\"\nkind = \"local\"\npath = {:?}\n",
            dir.path().join("audit.log"),
            dir.path().join("q.db"),
            dir.path().join("q.db"),
        ),
    )
    .unwrap();
    let first = qdeck_model::config::load(&qdeck_model::config::LoadOptions {
        file: Some(file.clone()),
        profile: Some("ro".into()),
        read_only: true,
    })
    .unwrap();
    let switched = qdeck_model::config::load(&first.options_for("rw")).unwrap();
    assert!(
        switched.profile.read_only,
        "--read-only carried to the new profile"
    );
    let s = qdeck_engine::session::Session::open(switched)
        .await
        .unwrap();
    assert!(s.gate.read_only());
    let r = s
        .gate
        .purge(
            &qdeck_model::domain::QueueId::new("q"),
            &qdeck_backend::OpProgress::detached(),
        )
        .await;
    assert!(matches!(r, Err(qdeck_backend::BackendError::Refused(_))));
    // Without the flag, a switch follows the new profile's own setting.
    let plain = qdeck_model::config::load(&qdeck_model::config::LoadOptions {
        file: Some(file),
        profile: Some("ro".into()),
        read_only: false,
    })
    .unwrap();
    assert!(
        !qdeck_model::config::load(&plain.options_for("rw"))
            .unwrap()
            .profile
            .read_only
    );
}

/// `access` tiers: the stricter of `access` and `read_only` wins, and `--read-only` caps any
/// profile of the run at `browse`, also after a switch.
#[test]
fn access_tiers_and_the_read_only_alias() {
    use qdeck_model::config::Access;
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        &dir,
        r#"
[[profiles]]
name = "s"
kind = "local"
access = "stats"
[[profiles]]
name = "b"
kind = "local"
read_only = true
[[profiles]]
name = "r"
kind = "local"
access = "redrive"
[[profiles]]
name = "rf"
kind = "local"
access = "full"
read_only = true
[[profiles]]
name = "f"
kind = "local"
"#,
    );
    let tier = |name: &str, read_only: bool| {
        config::load(&LoadOptions {
            file: Some(f.clone()),
            profile: Some(name.into()),
            read_only,
        })
        .unwrap()
        .profile
        .effective_access()
    };
    assert_eq!(tier("s", false), Access::Stats);
    assert_eq!(tier("b", false), Access::Browse);
    assert_eq!(tier("r", false), Access::Redrive);
    assert_eq!(tier("rf", false), Access::Browse);
    assert_eq!(tier("f", false), Access::Full);
    // `--read-only` lowers to browse, never raises `stats`.
    assert_eq!(tier("f", true), Access::Browse);
    assert_eq!(tier("s", true), Access::Stats);
    let first = config::load(&LoadOptions {
        file: Some(f.clone()),
        profile: Some("s".into()),
        read_only: true,
    })
    .unwrap();
    let switched = config::load(&first.options_for("f")).unwrap();
    assert_eq!(switched.profile.effective_access(), Access::Browse);
}

#[test]
fn unknown_access_value_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        &dir,
        "[[profiles]]\nname = \"a\"\nkind = \"local\"\n[[profiles]]\nname = \"b\"\nkind = \"local\"\naccess = \"write\"\n",
    );
    let e = config::load(&LoadOptions {
        file: Some(f),
        ..Default::default()
    })
    .unwrap_err();
    assert!(e.0.contains("profiles[1].access"), "{}", e.0);
    assert!(
        e.0.contains("\"write\"") && e.0.contains("stats, browse, redrive, full"),
        "{}",
        e.0
    );
    assert!(!e.0.contains('\n'));
}

#[test]
fn fire_threshold_defaults_to_300s_and_rejects_nonsense() {
    assert_eq!(config::parse_str("").unwrap().fire.max_age_secs, 300.0);
    let c = config::parse_str("[fire]\nmax_age_secs = 60\n").unwrap();
    assert_eq!(c.fire.max_age_secs, 60.0);
    let e = config::parse_str("[fire]\nmax_age_secs = 0\n").unwrap_err();
    assert!(e.0.contains("fire.max_age_secs must be above 0"), "{e}");
    let e = config::parse_str("[fire]\nmax_age = 60\n").unwrap_err();
    assert!(e.0.contains("max_age"), "{e}");
}

/// Service Bus `auth`: SAS needs the connection string; Entra ID needs exactly one of
/// `namespace` and `connection_string_env`. Each mistake is one line naming the profile and key.
#[test]
fn service_bus_auth_and_namespace_are_checked() {
    let sb = |extra: &str| {
        config::parse_str(&format!(
            "[[profiles]]\nname = \"a\"\nkind = \"local\"\n[[profiles]]\nname = \"sb\"\nkind = \"servicebus\"\n{extra}"
        ))
    };
    for ok in [
        "connection_string_env = \"CS\"\n",
        "auth = \"sas\"\nconnection_string_env = \"CS\"\n",
        "auth = \"azure-cli\"\nnamespace = \"contoso.servicebus.windows.net\"\n",
        "auth = \"workload-identity\"\nconnection_string_env = \"CS\"\n",
    ] {
        let c = sb(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        // What `config show` prints parses back to the same profile.
        let shown = toml::to_string(&c.profiles[1]).unwrap();
        assert!(!shown.contains("connection_string_env = \"\""), "{shown}");
    }
    for (bad, want) in [
        ("", "profiles[1]: connection_string_env is missing"),
        (
            "connection_string_env = \"CS\"\nnamespace = \"contoso.servicebus.windows.net\"\n",
            "profiles[1]: namespace is only used with auth = \"azure-cli\"",
        ),
        (
            "auth = \"azure-cli\"\n",
            "profiles[1] (auth = \"azure-cli\") needs namespace = \"NAME.servicebus.windows.net\" or connection_string_env",
        ),
        (
            "auth = \"workload-identity\"\nnamespace = \"contoso.servicebus.windows.net\"\nconnection_string_env = \"CS\"\n",
            "sets both namespace and connection_string_env",
        ),
        (
            "auth = \"azure-cli\"\nnamespace = \"https://contoso.servicebus.windows.net/\"\n",
            "profiles[1]: namespace must be a host name",
        ),
        (
            "auth = \"entra\"\nconnection_string_env = \"CS\"\n",
            "`sas`, `azure-cli`, `workload-identity` for key `profiles[1]`",
        ),
    ] {
        let e = sb(bad).unwrap_err();
        assert!(e.0.contains(want), "{bad:?}: {}", e.0);
        assert!(!e.0.contains('\n'), "{}", e.0);
    }
}
