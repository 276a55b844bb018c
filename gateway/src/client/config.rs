//! Where the client finds the server and the token: `BURSAR_URL`, `BURSAR_TOKEN`, the token
//! file, `BURSAR_TIMEOUT`.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::SecretString;

use super::ClientError;

/// The server a client talks to when `BURSAR_URL` is not set (`bursar serve`'s default).
pub const DEFAULT_URL: &str = "http://127.0.0.1:8640";

/// How long one call may take, unless `BURSAR_TIMEOUT` says otherwise. Generous: a submission
/// waits for the cluster to accept the job, and the server has its own, shorter, limit for
/// that (503 when the cluster does not answer).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// How long to wait for a TCP (and TLS) connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the token came from, to say so when it is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// `BURSAR_TOKEN`.
    Env,
    /// The token file.
    File(PathBuf),
}

impl fmt::Display for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenSource::Env => f.write_str("BURSAR_TOKEN"),
            TokenSource::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Everything a client command needs to reach the server. `Debug` never shows the token.
#[derive(Debug)]
pub struct ClientConfig {
    /// Base URL without a trailing `/`.
    pub url: String,
    pub token: SecretString,
    pub token_source: TokenSource,
    pub timeout: Duration,
    /// Things the user should fix that do not stop the command (a token file others can read).
    pub warnings: Vec<String>,
}

impl ClientConfig {
    /// Reads the process environment and the token file.
    pub fn from_env() -> Result<ClientConfig, ClientError> {
        ClientConfig::from_lookup(|name| std::env::var_os(name))
    }

    /// [`from_env`](Self::from_env) with the environment given as a function (for tests).
    ///
    /// - `BURSAR_URL`: `http://` or `https://`, default [`DEFAULT_URL`].
    /// - `BURSAR_TOKEN`, else the file [`token_path`] names (whitespace around it is ignored).
    /// - `BURSAR_TIMEOUT`: `30s`, `5m`, … (default [`DEFAULT_TIMEOUT`]).
    pub fn from_lookup(
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<ClientConfig, ClientError> {
        let text = |name: &str| -> Result<Option<String>, ClientError> {
            match env(name) {
                None => Ok(None),
                Some(value) => value
                    .into_string()
                    .map(|s| Some(s.trim().to_string()).filter(|s| !s.is_empty()))
                    .map_err(|_| ClientError::Config(format!("{name} is not valid UTF-8"))),
            }
        };
        let url = text("BURSAR_URL")?.unwrap_or_else(|| DEFAULT_URL.to_string());
        let url = url.trim_end_matches('/').to_string();
        let scheme_ok = ["http://", "https://"].iter().any(|scheme| {
            url.get(..scheme.len())
                .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
                && url.len() > scheme.len()
        });
        if !scheme_ok {
            return Err(ClientError::Config(format!(
                "BURSAR_URL {url:?} is not an http:// or https:// URL (e.g. {DEFAULT_URL})"
            )));
        }
        let timeout = match text("BURSAR_TIMEOUT")? {
            None => DEFAULT_TIMEOUT,
            Some(t) => crate::timefmt::parse_duration(&t)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    ClientError::Config(format!(
                        "BURSAR_TIMEOUT {t:?} is not a duration such as 30s or 5m"
                    ))
                })?,
        };
        let mut warnings = Vec::new();
        let (token, token_source) = match text("BURSAR_TOKEN")? {
            Some(token) => (token, TokenSource::Env),
            None => {
                let home = env("HOME").map(PathBuf::from);
                let path = token_path(env("XDG_CONFIG_HOME").map(PathBuf::from), home.clone())
                    .ok_or_else(|| ClientError::NoToken {
                        path: "~/.config/bursar/token".into(),
                    })?;
                let token = read_token_file(&path, home.as_deref(), &mut warnings)?;
                (token, TokenSource::File(path))
            }
        };
        Ok(ClientConfig {
            url,
            token: SecretString::from(token),
            token_source,
            timeout,
            warnings,
        })
    }
}

/// `$XDG_CONFIG_HOME/bursar/token` when `XDG_CONFIG_HOME` is an absolute path (the XDG rule:
/// a relative one is ignored), else `$HOME/.config/bursar/token`; `None` without either.
pub fn token_path(xdg_config_home: Option<PathBuf>, home: Option<PathBuf>) -> Option<PathBuf> {
    let base = xdg_config_home.filter(|p| p.is_absolute()).or_else(|| {
        home.filter(|h| !h.as_os_str().is_empty())
            .map(|h| h.join(".config"))
    })?;
    Some(base.join("bursar").join("token"))
}

fn read_token_file(
    path: &Path,
    home: Option<&Path>,
    warnings: &mut Vec<String>,
) -> Result<String, ClientError> {
    let shown = match home.and_then(|h| path.strip_prefix(h).ok()) {
        Some(rest) => format!("~/{}", rest.display()),
        None => path.display().to_string(),
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ClientError::NoToken { path: shown })
        }
        Err(e) => {
            return Err(ClientError::Config(format!(
                "cannot read the token file {shown}: {e}"
            )))
        }
    };
    let token = text.trim();
    if token.is_empty() {
        return Err(ClientError::Config(format!(
            "the token file {shown} is empty: put the token from `bursar token issue` in it"
        )));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ClientError::Config(format!(
            "the token file {shown} holds more than one token (or stray text): it must hold \
             exactly one"
        )));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            if meta.permissions().mode() & 0o077 != 0 {
                warnings.push(format!(
                    "the token file {shown} can be read by other users: chmod 600 {shown}"
                ));
            }
        }
    }
    #[cfg(not(unix))]
    let _ = warnings;
    Ok(token.to_string())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use secrecy::ExposeSecret;

    use super::*;

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn token_path_follows_xdg() {
        assert_eq!(
            token_path(Some("/x".into()), Some("/home/a".into())),
            Some(PathBuf::from("/x/bursar/token"))
        );
        assert_eq!(
            token_path(Some("relative".into()), Some("/home/a".into())),
            Some(PathBuf::from("/home/a/.config/bursar/token"))
        );
        assert_eq!(token_path(None, None), None);
    }

    #[test]
    fn env_token_and_defaults() {
        let c = ClientConfig::from_lookup(lookup(&[("BURSAR_TOKEN", " abc \n")])).unwrap();
        assert_eq!(c.url, DEFAULT_URL);
        assert_eq!(c.token.expose_secret(), "abc");
        assert_eq!(c.token_source, TokenSource::Env);
        assert_eq!(c.timeout, DEFAULT_TIMEOUT);
        assert!(!format!("{c:?}").contains("abc"));
    }

    #[test]
    fn url_and_timeout_are_checked() {
        let c = ClientConfig::from_lookup(lookup(&[
            ("BURSAR_TOKEN", "t"),
            ("BURSAR_URL", "https://bursar.example.org/"),
            ("BURSAR_TIMEOUT", "30s"),
        ]))
        .unwrap();
        assert_eq!(c.url, "https://bursar.example.org");
        assert_eq!(c.timeout, Duration::from_secs(30));
        for (name, value) in [("BURSAR_URL", "bursar:8640"), ("BURSAR_TIMEOUT", "soon")] {
            let e = ClientConfig::from_lookup(lookup(&[("BURSAR_TOKEN", "t"), (name, value)]))
                .unwrap_err();
            assert!(e.to_string().contains(name), "{e}");
        }
    }

    #[test]
    fn token_file_is_read_and_missing_one_explained() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_str().unwrap();
        let e = ClientConfig::from_lookup(lookup(&[("HOME", home)])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no token: ask your admin for one (`bursar token issue`) and put it in \
             ~/.config/bursar/token or BURSAR_TOKEN"
        );
        let file = dir.path().join(".config/bursar/token");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "tok\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let c = ClientConfig::from_lookup(lookup(&[("HOME", home)])).unwrap();
        assert_eq!(c.token.expose_secret(), "tok");
        assert_eq!(c.token_source, TokenSource::File(file.clone()));
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        std::fs::write(&file, "  \n").unwrap();
        let e = ClientConfig::from_lookup(lookup(&[("HOME", home)])).unwrap_err();
        assert!(e.to_string().contains("is empty"), "{e}");
    }
}
