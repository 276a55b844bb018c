//! `bursar sync push` on a dstack cluster against the real dstack 0.22.5 server of the dev
//! stack (project `hpc`: alice is a member with role user, carol a manager).
//!
//! Fresh users (a suffix unique to the run, since the server keeps its state) are associated in
//! a fresh ledger with the project's account: one dstack lacks altogether, one dstack has but
//! not as a member, and one associated with another account. A dry run prints exactly the
//! changes and dstack is unchanged; a push makes them (checked through dstack's API: roles, not
//! only presence); a second push changes nothing; carol stays a manager. The users the test
//! made are deleted from dstack at the end.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use bursar_tests::{DevStack, Site};
use serde_json::{json, Value};

/// `POST {url}{path}` with the admin token: (status, body).
fn dstack(dev: &DevStack, path: &str, body: &Value) -> (u16, Value) {
    let out = Command::new("curl")
        .args([
            "-s",
            "-X",
            "POST",
            "-H",
            &format!(
                "Authorization: Bearer {}",
                dev.var("BURSAR_DEV_DSTACK_ADMIN_TOKEN")
            ),
            "-H",
            "Content-Type: application/json",
            "-d",
            &body.to_string(),
            "-w",
            "\n%{http_code}",
            &format!("{}{path}", dev.var("BURSAR_DEV_DSTACK_URL")),
        ])
        .output()
        .expect("run curl");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let (body, status) = text.rsplit_once('\n').expect("status line");
    let status: u16 = status.trim().parse().expect("http status");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The project's members: username → role.
fn members(dev: &DevStack) -> BTreeMap<String, String> {
    let project = dev.var("BURSAR_DEV_DSTACK_PROJECT");
    let (status, body) = dstack(dev, &format!("/api/projects/{project}/get"), &json!({}));
    assert_eq!(status, 200, "projects/{project}/get: {body}");
    body["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| {
            (
                m["user"]["username"].as_str().unwrap().to_string(),
                m["project_role"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// dstack's users: username → global role.
fn users(dev: &DevStack) -> BTreeMap<String, String> {
    let (status, body) = dstack(dev, "/api/users/list", &json!({"limit": 2000}));
    assert_eq!(status, 200, "users/list: {body}");
    body.as_array()
        .expect("users")
        .iter()
        .map(|u| {
            (
                u["username"].as_str().unwrap().to_string(),
                u["global_role"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Deletes the run's users from dstack when the test ends, passed or failed.
struct Cleanup<'a> {
    dev: &'a DevStack,
    users: Vec<String>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let (status, body) = dstack(self.dev, "/api/users/delete", &json!({"users": self.users}));
        if status != 200 {
            eprintln!(
                "could not delete {:?} from dstack: {status} {body}",
                self.users
            );
        }
    }
}

#[test]
fn push_makes_bursar_users_members_once_and_never_downgrades() {
    let dev = DevStack::get();
    let project = dev.var("BURSAR_DEV_DSTACK_PROJECT").to_string();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let suffix = format!("{:x}", (nanos as u64) ^ u64::from(std::process::id()));
    let fresh = format!("sync-new-{suffix}");
    let known = format!("sync-known-{suffix}");
    let other = format!("sync-other-{suffix}");
    let _cleanup = Cleanup {
        dev: &dev,
        users: vec![fresh.clone(), known.clone()],
    };

    // `known` exists in dstack but is not a member of the project.
    let (status, body) = dstack(
        &dev,
        "/api/users/create",
        &json!({"username": known, "global_role": "user"}),
    );
    assert_eq!(status, 200, "users/create {known}: {body}");

    let token_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token_file.path(), dev.var("BURSAR_DEV_DSTACK_ADMIN_TOKEN")).unwrap();
    let site = Site::new(&format!(
        "accounts:\n  org: {{}}\n  physics: {{parent: org}}\n  chemistry: {{parent: org}}\n\
         clusters:\n  gpucloud:\n    kind: dstack\n    currency: usd\n    collect:\n      \
         dstack: {{url: \"{}\", token_file: \"{}\", project: \"{project}\", account: physics}}\n",
        dev.var("BURSAR_DEV_DSTACK_URL"),
        token_file.path().display(),
    ));
    for (user, account) in [
        (fresh.as_str(), "physics"),
        (known.as_str(), "physics"),
        ("alice", "physics"),
        ("carol", "physics"),
        (other.as_str(), "chemistry"),
    ] {
        site.ok(&["users", "associate", user, account]);
    }

    let members_before = members(&dev);
    let users_before = users(&dev);
    assert_eq!(
        members_before.get("carol").map(String::as_str),
        Some("manager")
    );
    assert_eq!(
        members_before.get("alice").map(String::as_str),
        Some("user")
    );
    assert!(!members_before.contains_key(&known));
    assert!(!users_before.contains_key(&fresh));

    // A dry run prints exactly the changes and makes none.
    let dry = site.ok(&["sync", "push", "--cluster", "gpucloud", "--dry-run"]);
    assert_eq!(
        dry,
        format!(
            "would add {known} to dstack project {project} as user\n\
             would create dstack user {fresh} (global role user)\n\
             would add {fresh} to dstack project {project} as user\n"
        )
    );
    assert_eq!(members(&dev), members_before, "a dry run adds no member");
    assert_eq!(users(&dev), users_before, "a dry run creates no user");
    let audit = site.json(&["audit"]);
    assert!(
        audit["audit"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["action"] != "sync.push"),
        "a dry run audits nothing: {audit}"
    );

    // The push.
    let pushed = site.ok(&["sync", "push", "--cluster", "gpucloud"]);
    assert_eq!(
        pushed,
        format!(
            "added {known} to dstack project {project} as user\n\
             created dstack user {fresh} (global role user)\n\
             added {fresh} to dstack project {project} as user\n"
        )
    );
    let after = members(&dev);
    assert_eq!(after.get(&fresh).map(String::as_str), Some("user"));
    assert_eq!(after.get(&known).map(String::as_str), Some("user"));
    assert_eq!(after.get("carol").map(String::as_str), Some("manager"));
    assert_eq!(after.get("alice").map(String::as_str), Some("user"));
    assert!(
        !after.contains_key(&other),
        "{other} may not charge physics"
    );
    let mut expected = members_before.clone();
    expected.insert(fresh.clone(), "user".into());
    expected.insert(known.clone(), "user".into());
    assert_eq!(after, expected, "nothing else changed, nobody was removed");
    let users_after = users(&dev);
    assert_eq!(users_after.get(&fresh).map(String::as_str), Some("user"));
    assert!(!users_after.contains_key(&other));

    let audit = site.json(&["audit"]);
    let mut targets: Vec<String> = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "sync.push")
        .map(|e| e["target"].as_str().unwrap().to_string())
        .collect();
    targets.sort();
    let mut want = vec![
        format!("gpucloud/dstack user {fresh}"),
        format!("gpucloud/project {project} member {fresh}"),
        format!("gpucloud/project {project} member {known}"),
    ];
    want.sort();
    assert_eq!(targets, want);

    // A second push changes nothing.
    let again = site.ok(&["sync", "push", "--cluster", "gpucloud"]);
    assert_eq!(
        again,
        format!("gpucloud: nothing to change (4 bursar users are members of dstack project {project})\n")
    );
    assert_eq!(members(&dev), after);
    let audit = site.json(&["audit"]);
    let pushes = audit["audit"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "sync.push")
        .count();
    assert_eq!(pushes, 3, "the second push audits nothing");
}
