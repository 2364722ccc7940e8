//! What the `jetstream` feature (on by default) adds to the command, and what a build
//! without it (`--no-default-features`, for embedded stores only) says: its help never
//! offers what it lacks, and a `nats://` target or a JetStream command is refused in one
//! line naming the feature (exit 2), never taken for a directory of that name.

use crate::run::{ok, serial};

/// Every subcommand's `--help`, and the top-level one.
fn all_help() -> Vec<(String, String)> {
    let commands = [
        "stats",
        "list",
        "show",
        "trace",
        "analyze",
        "replay",
        "delete",
        "purge",
        "mark-reprocessed",
        "export",
        "import",
        "enqueue",
        "verify",
        "serve",
        "completions",
    ];
    let mut out = vec![("deadletter".to_string(), ok(&["--help"]))];
    for c in commands {
        out.push((c.to_string(), ok(&[c, "--help"])));
    }
    out
}

#[cfg(feature = "jetstream")]
#[test]
fn the_help_offers_jetstream_targets_and_commands() {
    let _serial = serial();
    let help = ok(&["--help"]);
    assert!(help.contains("nats://HOST:PORT/NAMESPACE"), "{help}");
    assert!(help.contains("forward") && help.contains("fleet"), "{help}");
    assert!(ok(&["forward", "--help"]).contains("--to <URL>"));
    assert!(ok(&["fleet", "--help"]).contains("list"));
    // Every other command's help is the same in both builds.
    for (command, help) in all_help().into_iter().skip(1) {
        assert!(!help.contains("JetStream"), "{command}: {help}");
    }
}

#[cfg(not(feature = "jetstream"))]
mod without_jetstream {
    use std::process::{Command, Stdio};

    use super::*;
    use crate::run::{fails, stderr, BIN};

    const NOT_BUILT: &str = "this deadletter was built without its `jetstream` feature";

    #[test]
    fn the_help_offers_nothing_of_jetstream() {
        let _serial = serial();
        for (command, help) in all_help() {
            for word in ["nats", "JetStream", "forward", "fleet"] {
                assert!(
                    !help.contains(word),
                    "{command} --help says {word:?}: {help}"
                );
            }
        }
    }

    #[test]
    fn a_jetstream_target_or_command_is_refused_naming_the_feature() {
        let _serial = serial();
        let err = fails(&["stats", "nats://127.0.0.1:4222/shop"], 2, NOT_BUILT);
        assert!(
            err.contains("nats://127.0.0.1:4222/shop is a JetStream namespace"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1, "one line: {err:?}");
        for args in [
            &["forward", "./data", "--to", "nats://127.0.0.1:4222/fleet"][..],
            &["fleet", "list", "nats://127.0.0.1:4222/fleet"],
        ] {
            let err = fails(args, 2, NOT_BUILT);
            assert!(
                err.contains(&format!("`deadletter {}` works on JetStream", args[0])),
                "{err}"
            );
        }
        // The same for a script: one JSON object.
        let o = crate::run::run(&["--json", "list", "nats://127.0.0.1:4222"]);
        assert_eq!(o.status.code(), Some(2));
        let err: serde_json::Value = serde_json::from_str(stderr(&o).trim()).unwrap();
        assert_eq!(err["error"]["kind"], "not_built");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("nats://127.0.0.1:4222/deadletter is a JetStream namespace"),
            "{message}"
        );
        // A command that would create a store creates nothing under a `nats:` name.
        let cwd = tempfile::tempdir().unwrap();
        let o = Command::new(BIN)
            .args(["enqueue", "nats://127.0.0.1:4222/shop", "--queue", "q", "x"])
            .current_dir(cwd.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(NOT_BUILT));
        assert_eq!(std::fs::read_dir(cwd.path()).unwrap().count(), 0);
    }
}
