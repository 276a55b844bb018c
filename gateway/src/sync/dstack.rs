//! `bursar sync push --cluster C` for a dstack cluster: bursar's users become members of the
//! cluster's dstack project.
//!
//! **Who.** A dstack run is charged to the account the cluster's `collect.dstack` section names
//! for its user: `user_accounts[user]` when the user has an entry, else `account` (default: the
//! project's name). A bursar user becomes a member when they are associated with that account
//! and it is open — exactly the users whose own dstack runs bursar may charge. Association with
//! a sub-account is not enough, as in Slurm.
//!
//! **How.** With a dstack global admin's token (checked first: only an admin sees every user):
//! `users/list` and `projects/{p}/get`, then per missing user `users/create` (global role
//! `user`) when dstack has no such user, and `projects/{p}/add_members` with role `user`.
//! Only ever adds: members bursar did not add are never removed, and users who are already
//! members are never sent again (dstack's `add_members` *sets* the role, so sending a manager
//! again as `user` would downgrade them). Every change is audited (`sync.push`) once dstack has
//! confirmed it; a failed call stops the push with what was done so far printed and audited.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use bursar_collectors::dstack::{
    valid_username, DstackClient, DstackConfig, DstackError, GlobalRole, ProjectRole,
};
use bursar_ledger::NewAudit;

use crate::app::App;
use crate::config::{ClusterConfig, ClusterKind, DstackSource};

/// Limit for one call to dstack when the config gives none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// One change the push makes in dstack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DstackChange {
    /// `users/create {username, global_role: user}`.
    CreateUser { user: String },
    /// `projects/{project}/add_members [{username, project_role: user}]`.
    AddMember { user: String, project: String },
}

impl DstackChange {
    /// What the change does, as a dry run (`would …`) or a real run prints it.
    pub fn line(&self, dry_run: bool) -> String {
        match (self, dry_run) {
            (DstackChange::CreateUser { user }, true) => {
                format!("would create dstack user {user} (global role user)")
            }
            (DstackChange::CreateUser { user }, false) => {
                format!("created dstack user {user} (global role user)")
            }
            (DstackChange::AddMember { user, project }, true) => {
                format!("would add {user} to dstack project {project} as user")
            }
            (DstackChange::AddMember { user, project }, false) => {
                format!("added {user} to dstack project {project} as user")
            }
        }
    }

    /// The audit log's target, under the cluster's name.
    fn audit_target(&self) -> String {
        match self {
            DstackChange::CreateUser { user } => format!("dstack user {user}"),
            DstackChange::AddMember { user, project } => format!("project {project} member {user}"),
        }
    }
}

/// What a push will do, and what it leaves out and why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub changes: Vec<DstackChange>,
    pub notes: Vec<String>,
}

/// The bursar users who should be members of the project: those associated with the open
/// account their dstack runs are charged to (`user_accounts[user]`, else `account`).
pub fn wanted_members(
    account: &str,
    user_accounts: &BTreeMap<String, String>,
    associations: &BTreeSet<(String, String)>,
    open_accounts: &BTreeSet<String>,
) -> BTreeSet<String> {
    associations
        .iter()
        .filter(|(user, assoc)| {
            let charged = user_accounts.get(user).map_or(account, String::as_str);
            assoc == charged && open_accounts.contains(charged)
        })
        .map(|(user, _)| user.clone())
        .collect()
}

/// The changes that make every wanted user a member of `project`. `dstack_users` are the names
/// dstack has; `members` the project's members, whatever their role (they are left alone).
pub fn plan(
    project: &str,
    wanted: &BTreeSet<String>,
    dstack_users: &BTreeSet<String>,
    members: &BTreeMap<String, ProjectRole>,
) -> Plan {
    let mut plan = Plan::default();
    // dstack refuses to create a name that differs from an existing one only in case, but
    // membership goes by the exact name.
    let folded: BTreeMap<String, &String> =
        dstack_users.iter().map(|u| (u.to_lowercase(), u)).collect();
    for user in wanted {
        if members.contains_key(user) {
            continue;
        }
        if !valid_username(user) {
            plan.notes.push(format!(
                "{user} is left out: dstack user names are 1 to 60 letters, digits, '-' or '_'"
            ));
            continue;
        }
        if !dstack_users.contains(user) {
            if let Some(other) = folded.get(&user.to_lowercase()) {
                plan.notes.push(format!(
                    "{user} is left out: dstack has a user {other}, and refuses a name that differs only in case"
                ));
                continue;
            }
            plan.changes
                .push(DstackChange::CreateUser { user: user.clone() });
        }
        plan.changes.push(DstackChange::AddMember {
            user: user.clone(),
            project: project.to_string(),
        });
    }
    plan
}

/// A dstack cluster's project as `sync push` reaches it.
struct Target {
    cluster: String,
    client: DstackClient,
    source: DstackSource,
}

impl Target {
    /// The project, URL and token of `collect.dstack`, else of `submit.dstack`.
    fn from_config(cluster: &str, c: &ClusterConfig) -> anyhow::Result<Target> {
        debug_assert_eq!(c.kind, ClusterKind::Dstack);
        let collect = c.collect.as_ref().and_then(|k| k.dstack.as_ref());
        let source = match collect {
            Some(d) => d.clone(),
            None => c
                .submit_dstack()
                .map_err(|e| anyhow!("cluster {cluster}: {e}"))?
                .ok_or_else(|| {
                    anyhow!(
                        "cluster {cluster}: sync push needs the dstack project: give collect.dstack \
                         (url, token_file, project) or submit.dstack"
                    )
                })?,
        };
        let timeout = c
            .collect
            .as_ref()
            .and_then(|k| k.timeout)
            .or_else(|| c.submit.as_ref().and_then(|s| s.timeout))
            .unwrap_or(DEFAULT_TIMEOUT);
        let token = std::fs::read_to_string(&source.token_file).with_context(|| {
            format!(
                "cluster {cluster}: cannot read the dstack token file {}",
                source.token_file.display()
            )
        })?;
        let client = DstackClient::new(DstackConfig {
            base_url: source.url.clone(),
            token: token.trim().to_string().into(),
            project: source.project.clone(),
            cluster: cluster.to_string(),
            timeout,
            page_size: 100,
            ca_file: source.ca_file.clone(),
        })
        .with_context(|| format!("cluster {cluster}"))?;
        Ok(Target {
            cluster: cluster.to_string(),
            client,
            source,
        })
    }

    fn token_file(&self) -> &PathBuf {
        &self.source.token_file
    }

    /// A dstack error in the admin's terms: a refused token names its file.
    fn explain(&self, error: DstackError) -> anyhow::Error {
        match &error {
            DstackError::Auth {
                status, message, ..
            } => anyhow!(
                "cluster {}: dstack refused the token in {} ({status}: {message}); sync push \
                 needs a dstack global admin's token",
                self.cluster,
                self.token_file().display()
            ),
            _ => anyhow!("cluster {}: {error}", self.cluster),
        }
    }
}

/// `bursar sync push --cluster C [--dry-run]` for a dstack cluster.
pub async fn push(
    app: &App,
    cluster: &str,
    c: &ClusterConfig,
    dry_run: bool,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let target = Target::from_config(cluster, c)?;
    let project = target.source.project.clone();
    let account = target
        .source
        .account
        .clone()
        .unwrap_or_else(|| project.clone());

    let open: BTreeSet<String> = app
        .ledger
        .accounts()
        .await?
        .into_iter()
        .filter(|a| a.closed_at.is_none())
        .map(|a| a.name)
        .collect();
    let associations: BTreeSet<(String, String)> = app
        .ledger
        .associations()
        .await?
        .into_iter()
        .map(|a| (a.user, a.account))
        .collect();
    let wanted = wanted_members(&account, &target.source.user_accounts, &associations, &open);

    let client = &target.client;
    let me = client.me().await.map_err(|e| target.explain(e))?;
    if me.global_role != GlobalRole::Admin {
        bail!(
            "cluster {cluster}: the token in {} belongs to dstack user {}, whose global role is \
             {}; sync push needs a dstack global admin's token (only an admin sees and creates users)",
            target.token_file().display(),
            me.username,
            me.global_role.as_str()
        );
    }
    let dstack_users: BTreeSet<String> = client
        .list_users()
        .await
        .map_err(|e| target.explain(e))?
        .into_iter()
        .map(|u| u.username)
        .collect();
    let members: BTreeMap<String, ProjectRole> = client
        .project_members()
        .await
        .map_err(|e| target.explain(e))?
        .into_iter()
        .map(|m| (m.username, m.role))
        .collect();

    let plan = plan(&project, &wanted, &dstack_users, &members);
    for note in &plan.notes {
        writeln!(out, "{cluster}: {note}")?;
    }
    if plan.changes.is_empty() {
        writeln!(
            out,
            "{cluster}: nothing to change ({} bursar users are members of dstack project {project})",
            wanted.len() - plan.notes.len(),
        )?;
        return Ok(());
    }
    for change in plan.changes {
        if dry_run {
            writeln!(out, "{}", change.line(true))?;
            continue;
        }
        let after = match &change {
            DstackChange::CreateUser { user } => {
                client
                    .create_user(user, GlobalRole::User)
                    .await
                    .map_err(|e| target.explain(e))?;
                serde_json::json!({
                    "dstack": target.source.url, "username": user, "global_role": "user",
                })
            }
            DstackChange::AddMember { user, project } => {
                let now = client
                    .add_members(&[(user.clone(), ProjectRole::User)])
                    .await
                    .map_err(|e| target.explain(e))?;
                let role = now.iter().find(|m| &m.username == user).map(|m| m.role);
                if role != Some(ProjectRole::User) {
                    bail!(
                        "cluster {cluster}: dstack accepted adding {user} to project {project}, \
                         but the project it returned has {user} as {}",
                        role.map_or("no member", |r| r.as_str())
                    );
                }
                serde_json::json!({
                    "dstack": target.source.url, "project": project, "username": user,
                    "project_role": "user",
                })
            }
        };
        writeln!(out, "{}", change.line(false))?;
        app.ledger
            .audit(&NewAudit {
                at: crate::timefmt::now(),
                actor: "bursar".into(),
                role: "admin".into(),
                action: "sync.push".into(),
                target: format!("{cluster}/{}", change.audit_target()),
                before: None,
                after: Some(after.to_string()),
            })
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn pairs(p: &[(&str, &str)]) -> BTreeSet<(String, String)> {
        p.iter()
            .map(|(u, a)| (u.to_string(), a.to_string()))
            .collect()
    }

    #[test]
    fn members_are_the_users_of_the_account_their_runs_are_charged_to() {
        let assocs = pairs(&[
            ("alice", "physics"),
            ("bob", "chemistry"),
            ("carol", "chemistry"),
            ("carol", "physics"),
            ("dave", "theory"), // a sub-account of physics: not enough
            ("erin", "closed"),
            ("frank", "physics"), // mapped to chemistry, not associated with it
        ]);
        let open = set(&["physics", "chemistry", "theory"]);
        let user_accounts: BTreeMap<String, String> = [
            ("bob", "chemistry"),
            ("erin", "closed"),
            ("frank", "chemistry"),
        ]
        .iter()
        .map(|(u, a)| (u.to_string(), a.to_string()))
        .collect();
        assert_eq!(
            wanted_members("physics", &user_accounts, &assocs, &open),
            set(&["alice", "bob", "carol"])
        );
        assert_eq!(
            wanted_members("physics", &BTreeMap::new(), &assocs, &set(&["chemistry"])),
            set(&[])
        );
    }

    #[test]
    fn plan_creates_missing_users_adds_non_members_and_leaves_members_alone() {
        let members: BTreeMap<String, ProjectRole> = [
            ("alice".to_string(), ProjectRole::User),
            ("carol".to_string(), ProjectRole::Manager),
        ]
        .into();
        let p = plan(
            "hpc",
            &set(&["alice", "carol", "dave", "erin", "Bob", "x.y"]),
            &set(&["alice", "bob", "carol", "erin"]),
            &members,
        );
        let text: Vec<String> = p.changes.iter().map(|c| c.line(true)).collect();
        assert_eq!(
            text,
            [
                "would create dstack user dave (global role user)",
                "would add dave to dstack project hpc as user",
                "would add erin to dstack project hpc as user",
            ]
        );
        assert_eq!(p.notes.len(), 2, "{:?}", p.notes);
        assert!(p.notes[0].starts_with("Bob is left out: dstack has a user bob"));
        assert!(p.notes[1].starts_with("x.y is left out"));
        let nothing = plan("hpc", &set(&["alice", "carol"]), &set(&[]), &members);
        assert_eq!(nothing, Plan::default());
    }
}
