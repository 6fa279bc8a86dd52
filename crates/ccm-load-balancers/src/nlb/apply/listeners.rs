//! The listeners of an NLB's plan: created (then given their attributes and further certificates), modified,
//! deleted, and the certificate lists of TLS listeners.

use ccm_aws_api::{
    Ec2, Elbv2,
    elbv2::{ListenerChange, NewListener},
};

use super::{Change, Context};
use crate::{Error, nlb::Listener};

impl<E: Ec2, V: Elbv2> Context<'_, E, V> {
    /// Listeners (other kinds of change are not sent here).
    pub(super) async fn listener(&mut self, change: &Change) -> Result<(), Error> {
        let elbv2 = self.elbv2;
        match change {
            Change::DeleteListener { arn, .. } => match elbv2.delete_listener(arn).await {
                Err(e) if !e.is_not_found() => return Err(Error::aws("deleting a listener")(e)),
                _ => {}
            },
            Change::CreateListener { listener, tags } => self.create_listener(listener, tags).await?,
            Change::ModifyListenerAttributes { arn, attributes, .. } => elbv2
                .modify_listener_attributes(arn, attributes)
                .await
                .map_err(Error::aws("setting a listener's attributes"))?,
            Change::ListenerCertificates { arn, add, remove, .. } => {
                // Added first: a certificate swapped for another is never missing from the list meanwhile.
                if !add.is_empty() {
                    elbv2
                        .add_listener_certificates(arn, add)
                        .await
                        .map_err(Error::aws("adding certificates to a listener"))?;
                }
                if !remove.is_empty() {
                    elbv2
                        .remove_listener_certificates(arn, remove)
                        .await
                        .map_err(Error::aws("removing certificates from a listener"))?;
                }
            }
            Change::ModifyListener {
                arn,
                protocol,
                certificate,
                ssl_policy,
                alpn_policy,
                target_group,
                ..
            } => {
                let target_group_arn = target_group
                    .as_deref()
                    .map(|name| self.target_group(name))
                    .transpose()?;
                elbv2
                    .modify_listener(&ListenerChange {
                        listener_arn: arn.clone(),
                        port: None,
                        protocol: protocol.clone(),
                        certificate_arn: certificate.clone(),
                        ssl_policy: ssl_policy.clone(),
                        alpn_policy: alpn_policy.clone(),
                        target_group_arn,
                    })
                    .await
                    .map_err(Error::aws("modifying a listener"))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// A new listener, then its attributes and further certificates: a crash in between leaves them to the next
    /// plan, which compares them (a listener is only created when its port has none).
    async fn create_listener(&mut self, listener: &Listener, tags: &ccm_aws_api::Tags) -> Result<(), Error> {
        let elbv2 = self.elbv2;
        let created = elbv2
            .create_listener(&NewListener {
                load_balancer_arn: self.lb_arn()?,
                port: listener.port,
                protocol: listener.protocol.clone(),
                certificate_arn: listener.certificate.clone(),
                ssl_policy: listener.ssl_policy.clone(),
                // A new listener without a policy has none: `None` is not sent.
                alpn_policy: listener.alpn_policy.clone().filter(|p| p != "None"),
                target_group_arn: self.target_group(&listener.target_group.name)?,
                tags: tags.clone(),
            })
            .await;
        let created = match created {
            Ok(created) => created,
            // Only `DuplicateListener` (a listener created by a crashed run) is taken as done: the next plan
            // compares and fixes it. A refusal (`InvalidConfigurationRequest`, ...) fails the ensure, and the
            // Service gets no address until AWS accepts.
            Err(e) if e.is_already_exists() => return Ok(()),
            Err(e) => return Err(Error::aws("creating a listener")(e)),
        };
        if !listener.attributes.is_empty() {
            elbv2
                .modify_listener_attributes(&created.arn, &listener.attributes)
                .await
                .map_err(Error::aws("setting a new listener's attributes"))?;
        }
        if !listener.extra_certificates.is_empty() {
            elbv2
                .add_listener_certificates(&created.arn, &listener.extra_certificates)
                .await
                .map_err(Error::aws("adding certificates to a new listener"))?;
        }
        Ok(())
    }
}
