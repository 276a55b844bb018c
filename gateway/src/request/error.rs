//! [`RequestError`]: everything that can be wrong with a job request, in words a user understands.

/// Why a job request (sbatch options, a `#SBATCH` line, a dstack task file or a JSON body) was
/// refused. Every message names the option or field at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// `-h`, `--help` or `--usage`: not a mistake; the caller prints
    /// [`SBATCH_USAGE`](super::SBATCH_USAGE) and stops.
    #[error("help requested")]
    HelpRequested,
    /// An option bursar does not know, or knows and cannot honour. Never ignored: a job that
    /// silently lost an option would run differently from what was priced.
    #[error("{option}: {reason}")]
    UnsupportedOption { option: String, reason: String },
    #[error("{option} needs a value")]
    MissingValue { option: String },
    #[error("{option} takes no value, got {value:?}")]
    UnexpectedValue { option: String, value: String },
    #[error("invalid {option} value {value:?}: {reason}")]
    InvalidValue {
        option: String,
        value: String,
        reason: String,
    },
    #[error("{first} and {second} are mutually exclusive")]
    Conflict { first: String, second: String },
    /// A word that is not an option where only options belong.
    #[error("unexpected argument {0:?}: only options may come before the job script")]
    UnexpectedArgument(String),
    /// A problem on a `#SBATCH` line of the job script (lines count from 1).
    #[error("job script line {line}: {error}")]
    ScriptLine {
        line: usize,
        error: Box<RequestError>,
    },
    /// The job script itself is unusable (no `#!` line, empty, DOS line breaks, …).
    #[error("{0}")]
    Script(String),
    /// A request that parsed but does not make sense (`validate`).
    #[error("{0}")]
    Invalid(String),
    #[error("invalid GPU spec {spec:?}: {reason}")]
    GpuSpec { spec: String, reason: String },
    /// A dstack task file that cannot be read or priced.
    #[error("dstack task: {0}")]
    Dstack(String),
}

impl RequestError {
    /// A stable machine-readable code for API error bodies (`{"error": code, ...}`).
    pub fn code(&self) -> &'static str {
        match self {
            RequestError::HelpRequested => "help_requested",
            RequestError::UnsupportedOption { .. } => "unsupported_option",
            RequestError::MissingValue { .. }
            | RequestError::UnexpectedValue { .. }
            | RequestError::InvalidValue { .. } => "invalid_option_value",
            RequestError::Conflict { .. } => "conflicting_options",
            RequestError::UnexpectedArgument(_) => "unexpected_argument",
            RequestError::ScriptLine { error, .. } => error.code(),
            RequestError::Script(_) => "invalid_script",
            RequestError::Invalid(_) => "invalid_request",
            RequestError::GpuSpec { .. } => "invalid_gpu_spec",
            RequestError::Dstack(_) => "invalid_dstack_task",
        }
    }

    pub(crate) fn invalid_value(option: &str, value: &str, reason: impl Into<String>) -> Self {
        RequestError::InvalidValue {
            option: option.to_string(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }

    pub(crate) fn at_line(self, line: usize) -> Self {
        match self {
            RequestError::ScriptLine { .. } => self,
            other => RequestError::ScriptLine {
                line,
                error: Box::new(other),
            },
        }
    }
}
