//! The flags of the Go cloud controller manager accepted for compatibility only (no effect; a warning is logged
//! when one is set).

use clap::ArgAction;

use crate::go_flags::parse_go_bool;

macro_rules! compat_flags {
    (
        bool: [$($b:ident = $bf:literal),* $(,)?],
        value: [$($val:ident = $vf:literal),* $(,)?],
        list: [$($l:ident = $lf:literal),* $(,)?] $(,)?
    ) => {
        /// Flags of the Go cloud controller manager that are accepted so that existing manifests keep working,
        /// and have no effect (see `docs/flags.md`).
        #[derive(Debug, Clone, Default, clap::Args)]
        pub struct CompatOptions {
            $(
                /// Accepted for compatibility with the Go controller manager; no effect (a warning is logged).
                #[arg(long = $bf, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, help_heading = "Accepted for compatibility (no effect)")]
                pub $b: Option<bool>,
            )*
            $(
                /// Accepted for compatibility with the Go controller manager; no effect (a warning is logged).
                #[arg(long = $vf, value_name = "VALUE", help_heading = "Accepted for compatibility (no effect)")]
                pub $val: Option<String>,
            )*
            $(
                /// Accepted for compatibility with the Go controller manager; no effect (a warning is logged).
                #[arg(long = $lf, action = ArgAction::Append, value_name = "VALUE", help_heading = "Accepted for compatibility (no effect)")]
                pub $l: Vec<String>,
            )*
        }

        impl CompatOptions {
            /// The flags that were set on the command line, as `--name=value`.
            pub fn set_flags(&self) -> Vec<String> {
                let mut set = Vec::new();
                $( if let Some(v) = &self.$b { set.push(format!("--{}={v}", $bf)); } )*
                $( if let Some(v) = &self.$val { set.push(format!("--{}={v}", $vf)); } )*
                $( for v in &self.$l { set.push(format!("--{}={v}", $lf)); } )*
                set
            }

            /// Every flag name in this group.
            pub fn names() -> &'static [&'static str] {
                &[$($bf,)* $($vf,)* $($lf,)*]
            }
        }
    };
}

compat_flags! {
    bool: [
        allow_untagged_cloud = "allow-untagged-cloud",
        profiling = "profiling",
        contention_profiling = "contention-profiling",
        authentication_skip_lookup = "authentication-skip-lookup",
        authentication_tolerate_lookup_failure = "authentication-tolerate-lookup-failure",
        permit_port_sharing = "permit-port-sharing",
        permit_address_sharing = "permit-address-sharing",
        disable_http2_serving = "disable-http2-serving",
        webhook_disable_http2_serving = "webhook-disable-http2-serving",
        webhook_permit_port_sharing = "webhook-permit-port-sharing",
        webhook_permit_address_sharing = "webhook-permit-address-sharing",
        log_text_split_stream = "log-text-split-stream",
        log_json_split_stream = "log-json-split-stream",
    ],
    value: [
        cidr_allocator_type = "cidr-allocator-type",
        external_cloud_volume_plugin = "external-cloud-volume-plugin",
        node_sync_period = "node-sync-period",
        min_resync_period = "min-resync-period",
        kube_api_content_type = "kube-api-content-type",
        http2_max_streams_per_connection = "http2-max-streams-per-connection",
        authentication_kubeconfig = "authentication-kubeconfig",
        authentication_token_webhook_cache_ttl = "authentication-token-webhook-cache-ttl",
        client_ca_file = "client-ca-file",
        requestheader_client_ca_file = "requestheader-client-ca-file",
        authorization_kubeconfig = "authorization-kubeconfig",
        authorization_webhook_cache_authorized_ttl = "authorization-webhook-cache-authorized-ttl",
        authorization_webhook_cache_unauthorized_ttl = "authorization-webhook-cache-unauthorized-ttl",
        webhook_secure_port = "webhook-secure-port",
        webhook_bind_address = "webhook-bind-address",
        webhook_cert_dir = "webhook-cert-dir",
        webhook_tls_cert_file = "webhook-tls-cert-file",
        webhook_tls_private_key_file = "webhook-tls-private-key-file",
        webhook_tls_min_version = "webhook-tls-min-version",
        webhook_http2_max_streams_per_connection = "webhook-http2-max-streams-per-connection",
        log_flush_frequency = "log-flush-frequency",
        log_text_info_buffer_size = "log-text-info-buffer-size",
        log_json_info_buffer_size = "log-json-info-buffer-size",
    ],
    list: [
        tls_cipher_suites = "tls-cipher-suites",
        tls_curve_preferences = "tls-curve-preferences",
        tls_sni_cert_key = "tls-sni-cert-key",
        requestheader_allowed_names = "requestheader-allowed-names",
        requestheader_username_headers = "requestheader-username-headers",
        requestheader_group_headers = "requestheader-group-headers",
        requestheader_extra_headers_prefix = "requestheader-extra-headers-prefix",
        requestheader_uid_headers = "requestheader-uid-headers",
        feature_gates = "feature-gates",
        webhooks = "webhooks",
        webhook_tls_cipher_suites = "webhook-tls-cipher-suites",
        webhook_tls_curve_preferences = "webhook-tls-curve-preferences",
        webhook_tls_sni_cert_key = "webhook-tls-sni-cert-key",
        vmodule = "vmodule",
    ],
}
