//! Users and project membership, for `bursar sync push` on a dstack cluster:
//! `users/get_my_user`, `users/list`, `users/create`, `projects/{p}/get`,
//! `projects/{p}/add_members`.
//!
//! dstack 0.22.5 facts these calls rely on (checked against the dev server):
//! - `users/list` shows a global admin every user that is not deleted (inactive ones too), newest
//!   first, at most `limit` (≤ 2000) per page, continued with `prev_created_at` + `prev_id`;
//!   a non-admin gets only itself, so [`DstackClient::list_users`] is only meaningful with a
//!   global admin's token ([`DstackClient::me`] tells).
//! - `users/create` needs a global admin; a taken name is 400 `resource_exists`, a name outside
//!   `^[a-zA-Z0-9-_]{1,60}$` is 400 `error` (see [`valid_username`]).
//! - `add_members` **sets** the role of a user who is already a member (a manager added again as
//!   `user` becomes a plain user), so callers must only pass users who are not members yet. A
//!   user that does not exist is 400 `User not found: NAME`.

use serde::{Deserialize, Serialize};

use super::client::DstackClient;
use super::DstackError;

/// `users/list` refuses a larger `limit`.
pub const USERS_PAGE_LIMIT: usize = 2000;

/// A dstack global role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GlobalRole {
    Admin,
    User,
}

/// A role within a dstack project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProjectRole {
    Admin,
    Manager,
    User,
}

impl GlobalRole {
    pub fn as_str(self) -> &'static str {
        match self {
            GlobalRole::Admin => "admin",
            GlobalRole::User => "user",
        }
    }
}

impl ProjectRole {
    pub fn as_str(self) -> &'static str {
        match self {
            ProjectRole::Admin => "admin",
            ProjectRole::Manager => "manager",
            ProjectRole::User => "user",
        }
    }
}

/// A dstack user, as `users/list`, `users/create` and `get_my_user` return it (only the fields
/// bursar reads; `get_my_user` also carries the user's token, which is never kept).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct DstackUser {
    pub id: String,
    pub username: String,
    #[serde(default)]
    pub created_at: Option<String>,
    pub global_role: GlobalRole,
    pub active: bool,
}

/// One member of a project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectMember {
    pub username: String,
    pub role: ProjectRole,
}

/// Whether dstack 0.22.5 accepts `name` as a username (`^[a-zA-Z0-9-_]{1,60}$`).
pub fn valid_username(name: &str) -> bool {
    (1..=60).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[derive(Deserialize)]
struct ProjectBody {
    project_name: String,
    members: Vec<MemberBody>,
}

#[derive(Deserialize)]
struct MemberBody {
    user: MemberUser,
    project_role: ProjectRole,
}

#[derive(Deserialize)]
struct MemberUser {
    username: String,
}

impl DstackClient {
    /// The user the token belongs to (`users/get_my_user`).
    pub async fn me(&self) -> Result<DstackUser, DstackError> {
        let path = "/api/users/get_my_user";
        let text = self.post(path, &serde_json::json!({})).await?;
        self.parse(path, &text, "a user")
    }

    /// Every user a global admin can see (not deleted; inactive ones included), all pages.
    pub async fn list_users(&self) -> Result<Vec<DstackUser>, DstackError> {
        #[derive(Serialize)]
        struct ListUsers<'a> {
            limit: usize,
            #[serde(skip_serializing_if = "Option::is_none")]
            prev_created_at: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            prev_id: Option<&'a str>,
        }
        let path = "/api/users/list";
        let mut users: Vec<DstackUser> = Vec::new();
        loop {
            let last = users.last();
            let body = ListUsers {
                limit: USERS_PAGE_LIMIT,
                prev_created_at: last.and_then(|u| u.created_at.as_deref()),
                prev_id: last.map(|u| u.id.as_str()),
            };
            if last.is_some() && body.prev_created_at.is_none() {
                return Err(DstackError::BadPayload {
                    url: self.url(path),
                    detail: "a full page of users ends with one that has no created_at".into(),
                });
            }
            let text = self.post(path, &body).await?;
            let page: Vec<DstackUser> = self.parse(path, &text, "a list of users")?;
            let full = page.len() >= USERS_PAGE_LIMIT;
            users.extend(page);
            if !full {
                return Ok(users);
            }
        }
    }

    /// Creates a user (`users/create`, active, no e-mail). dstack returns no token for it.
    pub async fn create_user(
        &self,
        username: &str,
        global_role: GlobalRole,
    ) -> Result<DstackUser, DstackError> {
        let path = "/api/users/create";
        let body = serde_json::json!({ "username": username, "global_role": global_role });
        let text = self.post(path, &body).await?;
        let user: DstackUser = self.parse(path, &text, "a user")?;
        if user.username != username {
            return Err(DstackError::BadPayload {
                url: self.url(path),
                detail: format!("asked to create {username}, got {}", user.username),
            });
        }
        Ok(user)
    }

    /// The members of this client's project (`projects/{p}/get`).
    pub async fn project_members(&self) -> Result<Vec<ProjectMember>, DstackError> {
        let path = self.projects_path("get");
        let text = self.post(&path, &serde_json::json!({})).await?;
        self.members_of(&path, &text)
    }

    /// Adds users to this client's project (`projects/{p}/add_members`) and returns the
    /// members after the call. Pass only users who are not members: dstack sets the role of
    /// one who is, downgrades included.
    pub async fn add_members(
        &self,
        members: &[(String, ProjectRole)],
    ) -> Result<Vec<ProjectMember>, DstackError> {
        let path = self.projects_path("add_members");
        let list: Vec<serde_json::Value> = members
            .iter()
            .map(|(username, role)| serde_json::json!({ "username": username, "project_role": role }))
            .collect();
        let text = self
            .post(&path, &serde_json::json!({ "members": list }))
            .await?;
        self.members_of(&path, &text)
    }

    /// `/api/projects/{p}/CALL` (membership calls; runs live under `/api/project/{p}/`).
    fn projects_path(&self, call: &str) -> String {
        format!("/api/projects/{}/{call}", self.project())
    }

    fn members_of(&self, path: &str, text: &str) -> Result<Vec<ProjectMember>, DstackError> {
        let project: ProjectBody = self.parse(path, text, "a project")?;
        if project.project_name != self.project() {
            return Err(DstackError::BadPayload {
                url: self.url(path),
                detail: format!(
                    "asked for project {}, got {}",
                    self.project(),
                    project.project_name
                ),
            });
        }
        Ok(project
            .members
            .into_iter()
            .map(|m| ProjectMember {
                username: m.user.username,
                role: m.project_role,
            })
            .collect())
    }

    fn parse<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        text: &str,
        what: &str,
    ) -> Result<T, DstackError> {
        serde_json::from_str(text).map_err(|e| DstackError::BadPayload {
            url: self.url(path),
            detail: format!("not {what}: {e}"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames_follow_dstacks_pattern() {
        assert!(valid_username("alice"));
        assert!(valid_username("dave-2_x"));
        assert!(!valid_username(""));
        assert!(!valid_username("a.b"));
        assert!(!valid_username("jürgen"));
        assert!(!valid_username(&"a".repeat(61)));
        assert!(valid_username(&"a".repeat(60)));
    }
}
