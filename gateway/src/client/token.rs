//! `bursar token keygen` and `bursar token issue`: the admin's side of the client's token.
//! Local commands: they read and write the HS256 key file and never call the server.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use chrono::Utc;
use secrecy::ExposeSecret;

use crate::auth::{generate_key_file, AuthConfig, TokenIssuer};
use crate::cli::{TokenIssueArgs, TokenKeygenArgs};
use crate::timefmt::{format_instant, parse_duration};

/// `--key-file`, else `auth.hs256_key_file` from the configuration.
fn key_file(given: Option<PathBuf>, auth: &AuthConfig) -> anyhow::Result<PathBuf> {
    given
        .or_else(|| auth.hs256_key_file.clone())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "no key file: give --key-file PATH or set auth.hs256_key_file in the configuration"
            )
        })
}

/// Writes a new HS256 key (mode 0600); refuses to replace an existing one.
pub fn keygen(
    auth: &AuthConfig,
    args: TokenKeygenArgs,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let path = key_file(args.key_file, auth)?;
    generate_key_file(&path)?;
    writeln!(
        out,
        "wrote a new HS256 key to {} (mode 0600); point auth.hs256_key_file at it",
        path.display()
    )?;
    Ok(())
}

/// Signs a token and prints it alone on standard output (so it can be redirected into the
/// user's token file); what it is for goes to `err`.
pub fn issue(
    auth: &AuthConfig,
    args: TokenIssueArgs,
    out: &mut impl Write,
    err: &mut impl Write,
) -> anyhow::Result<()> {
    let path = key_file(args.key_file, auth)?;
    let ttl = parse_duration(&args.ttl).context("--ttl")?;
    let issuer = TokenIssuer::from_key_file(&path, &auth.issuer, &auth.audience)?;
    let now = Utc::now();
    let token = issuer.issue(&args.user, args.role, ttl, now)?;
    writeln!(out, "{}", token.expose_secret())?;
    let expires = now
        .timestamp()
        .saturating_add(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX));
    writeln!(
        err,
        "bursar: token for {} ({}), valid until {}; the user puts it in ~/.config/bursar/token \
         (mode 0600) or BURSAR_TOKEN",
        args.user,
        args.role,
        format_instant(expires)
    )?;
    Ok(())
}
