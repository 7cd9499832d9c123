//! Errors as text for logs and replies: a thiserror enum prints only its own context, so its
//! causes are appended here, the one place that walks `source()`.

/// `error` with its causes, as `{:#}` prints an anyhow error (thiserror enums print only their
/// own context).
pub(crate) fn anyhow_like(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}
