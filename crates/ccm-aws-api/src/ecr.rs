//! The ECR port: registry authorization tokens.
