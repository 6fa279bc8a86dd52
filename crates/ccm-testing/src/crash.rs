//! A process that dies at a chosen step: [`CrashAt`], the hook of an [`Intercept`] that refuses the k-th mutating
//! call of the AWS ports it stands in front of, as if the process died just before it. The crash tests run a
//! creation or a deletion once per k and check that the next, uninterrupted run finishes the job.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use ccm_aws_api::{AwsError, CallHook, ErrorKind, Intercept, PortCall, Result};

/// A port that refuses its [`CrashAt`]'s chosen mutating call.
pub type Faulty<T> = Intercept<T, CrashAt>;

/// Refuses the `fail_at`-th mutating call (1-based) among every port it guards: clones share one count, so the
/// EC2, ELB and ELBv2 ports of one run crash at the k-th call whichever port makes it. Reads always pass.
#[derive(Debug, Clone)]
pub struct CrashAt {
    count: Arc<AtomicUsize>,
    fail_at: usize,
}

impl CrashAt {
    /// A fresh count that refuses the `fail_at`-th mutating call.
    pub fn new(fail_at: usize) -> Self {
        Self {
            count: Arc::new(AtomicUsize::new(0)),
            fail_at,
        }
    }

    /// `port` behind this hook (sharing its count).
    pub fn guard<T>(&self, port: T) -> Faulty<T> {
        Intercept::new(port, self.clone())
    }

    /// Mutating calls asked for so far, the refused one included.
    pub fn mutations(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Makes the next mutating call the refused one, whatever the count so far.
    pub fn fail_next(&self) {
        self.count.store(self.fail_at - 1, Ordering::SeqCst);
    }
}

impl CallHook for CrashAt {
    fn before(&self, call: PortCall) -> Result<()> {
        let Some(operation) = call.mutation else {
            return Ok(());
        };
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        if n == self.fail_at {
            Err(AwsError::new(ErrorKind::Transient, "fault", operation).with_message("injected crash"))
        } else {
            Ok(())
        }
    }
}
