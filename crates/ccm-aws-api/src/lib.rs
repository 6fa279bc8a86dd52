//! Narrow async port traits per AWS service (Ec2, Elb, Elbv2, Ecr, Sts, Metadata) in domain types, with pages collapsed, and `AwsError` carrying an error kind (not found, throttled, invalid, conflict, permanent) and the AWS code. The `mock` feature generates mockall mocks of every port.
//!
//! May depend on: `ccm-tagging`, `thiserror`, `mockall` (feature `mock`). Never on `aws-sdk-*`: domain crates build against these ports in seconds.
