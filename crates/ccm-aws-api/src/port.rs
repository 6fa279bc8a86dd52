//! How a port is declared: the trait, written once inside `port!`, also gives its forwarding through `Arc` and
//! through [`Intercept`]. Nothing forwards a port by hand, so a method added to a port cannot be forgotten by a
//! wrapper (a forgotten method would not compile, and no default body is there to hide it).

use crate::Result;

/// One call through an [`Intercept`]: which port and method, and for a method that changes something in AWS, the
/// operation it performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PortCall {
    /// The port's trait: `Ec2`, `Elb` or `Elbv2`.
    pub port: &'static str,
    /// The port's method, e.g. `create_route`.
    pub method: &'static str,
    /// The AWS operation of a method that changes something (`CreateRoute`); `None` for one that only reads.
    pub mutation: Option<&'static str>,
}

impl PortCall {
    /// Whether the call changes something in AWS.
    pub fn is_mutation(&self) -> bool {
        self.mutation.is_some()
    }
}

/// What an [`Intercept`] asks before every call (an error refuses the call, which then never reaches the port),
/// and shows after it.
pub trait CallHook {
    /// Lets `call` through (`Ok`) or refuses it with the error its caller gets.
    ///
    /// # Errors
    ///
    /// Whatever the hook decides the caller should see instead of the port's answer.
    fn before(&self, call: PortCall) -> Result<()>;

    /// Sees the answer of a call it let through (the method's `Result`, to downcast: the instance catalog learns
    /// from `Result<Vec<Instance>>` this way). Does nothing by default.
    fn after(&self, call: PortCall, answer: &dyn std::any::Any) {
        let _ = (call, answer);
    }
}

/// A shared hook (the instance catalog in front of several ports).
impl<H: CallHook + ?Sized> CallHook for std::sync::Arc<H> {
    fn before(&self, call: PortCall) -> Result<()> {
        (**self).before(call)
    }

    fn after(&self, call: PortCall, answer: &dyn std::any::Any) {
        (**self).after(call, answer);
    }
}

/// A port with a [`CallHook`] in front of it: every method asks the hook, then calls the port. Tests use it to
/// refuse a chosen mutating call (a process that dies at each step in turn); it works for any port declared
/// here, so a new port method is intercepted without a line written for it.
#[derive(Debug, Clone)]
pub struct Intercept<T, H> {
    inner: T,
    hook: H,
}

impl<T, H> Intercept<T, H> {
    /// `inner` behind `hook`.
    pub fn new(inner: T, hook: H) -> Self {
        Self { inner, hook }
    }

    /// The port behind the hook.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The hook.
    pub fn hook(&self) -> &H {
        &self.hook
    }

    /// The port and the hook.
    pub fn into_parts(self) -> (T, H) {
        (self.inner, self.hook)
    }
}

/// Declares a port: the trait as written (methods `async` with a `Send` future, no default bodies), and its
/// implementations for `Arc<T>` and for [`Intercept`]. A method that changes something in AWS carries the AWS
/// operation as a documentation alias after its docs (`#[doc(alias = "CreateRoute")]`, which also finds it in a
/// search of the docs); that alias is what the intercept's hook is told.
///
/// The trait is emitted from its raw tokens (so that `mockall::automock` sees plain types), and parsed a second
/// time for the forwarding impls.
macro_rules! port {
    (@mutation) => { None };
    (@mutation $op:literal) => { Some($op) };
    (@forward $port:ident;
        $(
            $(#[doc = $doc:literal])*
            $(#[doc(alias = $op:literal)])?
            fn $method:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> impl Future<Output = $ret:ty> + Send;
        )*
    ) => {
        /// Shares one port between owners (e.g. the provider and a provider controller).
        impl<T: $port + ?Sized> $port for ::std::sync::Arc<T> {
            $(
                fn $method(&self $(, $arg: $ty)*) -> impl ::core::future::Future<Output = $ret> + Send {
                    (**self).$method($($arg),*)
                }
            )*
        }

        /// Asks the hook before every call.
        impl<T: $port + Sync, H: $crate::CallHook + Sync> $port for $crate::Intercept<T, H> {
            $(
                fn $method(&self $(, $arg: $ty)*) -> impl ::core::future::Future<Output = $ret> + Send {
                    async move {
                        let call = $crate::PortCall {
                            port: stringify!($port),
                            method: stringify!($method),
                            mutation: port!(@mutation $($op)?),
                        };
                        $crate::CallHook::before(self.hook(), call)?;
                        let answer = self.inner().$method($($arg),*).await;
                        $crate::CallHook::after(self.hook(), call, &answer);
                        answer
                    }
                }
            )*
        }
    };
    (
        $(#[$attr:meta])*
        pub trait $port:ident { $($body:tt)* }
    ) => {
        $(#[$attr])*
        pub trait $port { $($body)* }

        port!(@forward $port; $($body)*);
    };
}

#[cfg(test)]
mod tests {
    use std::{
        future::Future,
        sync::{Arc, Mutex},
    };

    use super::*;
    use crate::{AwsError, ErrorKind};

    port! {
        /// A port of two methods, declared as the real ones are.
        pub trait Echo {
            /// Reads a key.
            fn read(&self, key: &str) -> impl Future<Output = Result<String>> + Send;

            /// Writes a key.
            #[doc(alias = "PutEcho")]
            fn write(&self, key: &str, value: Option<String>) -> impl Future<Output = Result<()>> + Send;
        }
    }

    /// Records the writes that reach it.
    #[derive(Default)]
    struct Store(Mutex<Vec<String>>);

    impl Echo for Store {
        async fn read(&self, key: &str) -> Result<String> {
            Ok(format!("value of {key}"))
        }
        async fn write(&self, key: &str, value: Option<String>) -> Result<()> {
            self.0
                .lock()
                .unwrap()
                .push(format!("{key}={}", value.unwrap_or_default()));
            Ok(())
        }
    }

    /// Records every call it is asked about; refuses the mutations when `refuse` is set.
    #[derive(Default)]
    struct Log {
        calls: Mutex<Vec<PortCall>>,
        refuse: bool,
    }

    impl CallHook for Log {
        fn before(&self, call: PortCall) -> Result<()> {
            self.calls.lock().unwrap().push(call);
            match call.mutation {
                Some(op) if self.refuse => {
                    Err(AwsError::new(ErrorKind::Transient, "test", op).with_message("refused"))
                }
                _ => Ok(()),
            }
        }
    }

    #[tokio::test]
    async fn the_hook_hears_every_call_with_its_mutation_and_lets_it_through() {
        let port = Intercept::new(Store::default(), Log::default());
        assert_eq!(port.read("a").await.unwrap(), "value of a");
        port.write("b", Some("1".into())).await.unwrap();

        assert_eq!(
            *port.hook().calls.lock().unwrap(),
            [
                PortCall {
                    port: "Echo",
                    method: "read",
                    mutation: None
                },
                PortCall {
                    port: "Echo",
                    method: "write",
                    mutation: Some("PutEcho")
                },
            ]
        );
        assert!(!port.hook().calls.lock().unwrap()[0].is_mutation());
        assert_eq!(*port.inner().0.lock().unwrap(), ["b=1"]);
    }

    #[tokio::test]
    async fn a_refused_call_never_reaches_the_port() {
        let port = Intercept::new(
            Store::default(),
            Log {
                refuse: true,
                ..Log::default()
            },
        );
        let err = port.write("b", None).await.unwrap_err();

        assert_eq!(err.operation(), "PutEcho");
        assert!(
            port.inner().0.lock().unwrap().is_empty(),
            "the write went through"
        );
        assert_eq!(
            port.read("a").await.unwrap(),
            "value of a",
            "reads are not refused"
        );
    }

    #[tokio::test]
    async fn an_arc_forwards_every_method() {
        let store = Arc::new(Store::default());
        Echo::write(&store, "k", Some("v".into())).await.unwrap();
        assert_eq!(Echo::read(&store, "k").await.unwrap(), "value of k");
        assert_eq!(*store.0.lock().unwrap(), ["k=v"]);
    }
}
