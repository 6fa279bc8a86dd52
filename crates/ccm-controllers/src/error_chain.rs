//! One way to print an error for logs and Events: the error and its causes, `a: b: c`, a cause that repeats the
//! text before it printed once.

use std::fmt;

/// Displays an error with its causes, `a: b: c`. An error whose message already contains its cause prints the
/// cause twice: errors keep the cause as `#[source]`, never in the message. A cause whose text is the text just
/// printed is skipped: `CloudError::from_failure` wraps a provider's error under its own message.
#[derive(Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn std::error::Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut last = self.0.to_string();
        f.write_str(&last)?;
        let mut source = self.0.source();
        while let Some(s) = source {
            let text = s.to_string();
            if text != last {
                write!(f, ": {text}")?;
                last = text;
            }
            source = s.source();
        }
        Ok(())
    }
}

impl fmt::Debug for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn causes_follow_the_error() {
        let e = Outer(std::io::Error::other("inner"));
        assert_eq!(ErrorChain(&e).to_string(), "outer: inner");
    }

    #[derive(Debug, thiserror::Error)]
    #[error("inner")]
    struct Same(#[source] std::io::Error);

    #[test]
    fn a_wrapper_repeating_its_cause_prints_it_once() {
        let e = ccm_cloud_provider::CloudError::from_failure(Same(std::io::Error::other("socket")), None);
        assert_eq!(ErrorChain(&e).to_string(), "inner: socket");
    }
}
