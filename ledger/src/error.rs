//! [`LedgerError`]: what can go wrong, in terms a caller can act on.

use bursar_pricing::money::format_micros;
use bursar_pricing::Currency;

/// The ledger's result type.
pub type Result<T, E = LedgerError> = std::result::Result<T, E>;

/// Errors from the ledger. Storage details are flattened into [`LedgerError::Storage`] so that
/// no database driver type appears in the public API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// A referenced object does not exist: `what` is `"account"`, `"user"`, `"hold"`, …
    #[error("{what} {name:?} not found")]
    NotFound { what: &'static str, name: String },

    /// The request contradicts what the ledger holds (an overlapping allocation, an
    /// idempotency key reused for something else, a cycle in the tree).
    #[error("conflict: {0}")]
    Conflict(String),

    /// The request is malformed (a bad name, an empty period, a positive refund).
    #[error("invalid: {0}")]
    Invalid(String),

    /// An account on the chain cannot cover an estimate: `remaining` is what that account's
    /// active allocation has left (allocated − charged − held), in micros.
    #[error(
        "insufficient allocation: account {account:?} has {} {currency} remaining, the estimate is {} {currency}",
        format_micros(*remaining, 0),
        format_micros(*estimate, 0)
    )]
    InsufficientAllocation {
        account: String,
        currency: Currency,
        estimate: i64,
        remaining: i64,
    },

    /// No account on the chain holds an active allocation in the currency: no access.
    #[error("no allocation in {currency} on account {account:?} or any of its ancestors")]
    NoAllocation { account: String, currency: Currency },

    /// `account` (the account asked about, or the ancestor named by `closed`) is closed: it
    /// and its subtree take no new holds, allocations, deposits in or associations.
    #[error("account {account:?} is closed{}", closed_by.as_ref().map(|a| format!(" (its ancestor {a:?} is)")).unwrap_or_default())]
    AccountClosed {
        account: String,
        /// The closed ancestor, when it is not `account` itself.
        closed_by: Option<String>,
    },

    /// Taking `amount` from `account`'s allocation would leave its remaining (allocated −
    /// charged − held) below zero.
    #[error(
        "account {account:?} has {} {currency} remaining (allocated − charged − held); cannot take {} {currency} from it",
        format_micros(*remaining, 0),
        format_micros(*amount, 0)
    )]
    InsufficientRemaining {
        account: String,
        currency: Currency,
        amount: i64,
        remaining: i64,
    },

    /// An amount left the range of i64 micros.
    #[error("arithmetic overflow: {0}")]
    Overflow(String),

    /// The storage URL names a backend this build does not have.
    #[error("not supported: {0}")]
    Unsupported(String),

    /// The database failed (I/O, locking, a violated constraint the ledger did not expect).
    #[error("storage: {0}")]
    Storage(String),
}

impl LedgerError {
    pub(crate) fn not_found(what: &'static str, name: impl Into<String>) -> LedgerError {
        LedgerError::NotFound {
            what,
            name: name.into(),
        }
    }
}

/// `a + b`, or [`LedgerError::Overflow`] naming what was being summed.
pub(crate) fn add(a: i64, b: i64, what: &str) -> Result<i64> {
    a.checked_add(b)
        .ok_or_else(|| LedgerError::Overflow(format!("{what}: {a} + {b}")))
}

/// `a - b`, or [`LedgerError::Overflow`].
pub(crate) fn sub(a: i64, b: i64, what: &str) -> Result<i64> {
    a.checked_sub(b)
        .ok_or_else(|| LedgerError::Overflow(format!("{what}: {a} - {b}")))
}
