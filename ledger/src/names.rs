//! Validation of the names the ledger stores: accounts, users, clusters, currencies.

use bursar_pricing::Currency;

use crate::error::{LedgerError, Result};

/// The account every tree hangs from. It always exists.
pub const ROOT: &str = "root";

/// Longest account or user name, in characters.
pub const MAX_NAME_CHARS: usize = 64;

/// A valid account name: non-empty, no whitespace, at most [`MAX_NAME_CHARS`] characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AccountName(String);

impl AccountName {
    pub fn parse(name: &str) -> Result<AccountName> {
        check_name("account", name)?;
        Ok(AccountName(name.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for AccountName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// Checks an account name; see [`AccountName`].
pub fn check_account(name: &str) -> Result<()> {
    check_name("account", name)
}

/// Checks a user name: the same rules as an account name.
pub fn check_user(name: &str) -> Result<()> {
    check_name("user", name)
}

/// Checks a cluster name: the same rules as an account name.
pub fn check_cluster(name: &str) -> Result<()> {
    check_name("cluster", name)
}

/// A currency code is non-empty, has no whitespace and at most 16 characters.
pub fn check_currency(currency: &Currency) -> Result<()> {
    let code = currency.as_str();
    if code.is_empty() || code.chars().count() > 16 || code.chars().any(char::is_whitespace) {
        return Err(LedgerError::Invalid(format!(
            "currency {code:?} must be 1 to 16 characters without whitespace"
        )));
    }
    Ok(())
}

fn check_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(LedgerError::Invalid(format!("{what} name is empty")));
    }
    if name.chars().any(char::is_whitespace) {
        return Err(LedgerError::Invalid(format!(
            "{what} name {name:?} contains whitespace"
        )));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(LedgerError::Invalid(format!(
            "{what} name {name:?} is longer than {MAX_NAME_CHARS} characters"
        )));
    }
    Ok(())
}

/// Checks that a free-text field (an idempotency key, a job id, a revision) is not empty.
pub(crate) fn check_present(what: &str, value: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(LedgerError::Invalid(format!("{what} is empty")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn account_names() {
        assert!(AccountName::parse("physics").is_ok());
        assert!(AccountName::parse("a-b_c.d").is_ok());
        assert!(AccountName::parse(&"x".repeat(64)).is_ok());
        assert!(AccountName::parse(&"x".repeat(65)).is_err());
        assert!(AccountName::parse("").is_err());
        assert!(AccountName::parse("two words").is_err());
        assert!(AccountName::parse("tab\there").is_err());
    }
}
