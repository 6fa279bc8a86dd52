//! AWS's documented API throttling figures, as data: (action, bucket capacity, refill rate in tokens per
//! second). Read by the throttling mode (`throttling.rs`), which gives them their meaning.
//!
//! EC2: "Request throttling for the Amazon EC2 API",
//! <https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html>, tables "Request token bucket
//! sizes and refill rates" (its uncategorized actions) and "Resource token bucket sizes and refill rates".
//! Elastic Load Balancing: "Request throttling for the Elastic Load Balancing API",
//! <https://docs.aws.amazon.com/elasticloadbalancing/latest/userguide/elb-api-throttling.html>.

/// EC2 actions with a request bucket of their own ("Uncategorized actions"), whatever their category.
pub(super) const EC2_UNCATEGORIZED: &[(&str, f64, f64)] = &[
    ("AcceptVpcEndpointConnections", 10.0, 1.0),
    ("AdvertiseByoipCidr", 1.0, 0.1),
    ("AssignIpv6Addresses", 100.0, 5.0),
    ("AssignPrivateIpAddresses", 100.0, 5.0),
    ("AssignPrivateNatGatewayAddress", 10.0, 1.0),
    ("AssociateCapacityReservationBillingOwner", 1.0, 0.5),
    ("AssociateEnclaveCertificateIamRole", 10.0, 1.0),
    ("AssociateIamInstanceProfile", 100.0, 5.0),
    ("AssociateNatGatewayAddress", 10.0, 1.0),
    ("AttachVerifiedAccessTrustProvider", 10.0, 2.0),
    ("AuthorizeClientVpnIngress", 5.0, 2.0),
    ("CancelDeclarativePoliciesReport", 1.0, 1.0),
    ("CopyImage", 100.0, 1.0),
    ("CreateClientVpnRoute", 5.0, 2.0),
    ("CreateCoipCidr", 5.0, 1.0),
    ("CreateCoipPool", 5.0, 1.0),
    ("CreateDefaultSubnet", 1.0, 1.0),
    ("CreateDefaultVpc", 1.0, 1.0),
    ("CreateLaunchTemplateVersion", 100.0, 5.0),
    ("CreateNatGateway", 10.0, 1.0),
    ("CreateNetworkInterface", 100.0, 5.0),
    ("CreateRestoreImageTask", 50.0, 0.1),
    ("CreateSnapshot", 100.0, 5.0),
    ("CreateSnapshots", 100.0, 5.0),
    ("CreateSpotDatafeedSubscription", 50.0, 3.0),
    ("CreateStoreImageTask", 50.0, 0.1),
    ("CreateSubnetCidrReservation", 5.0, 1.0),
    ("CreateTags", 100.0, 10.0),
    ("CreateVerifiedAccessEndpoint", 20.0, 4.0),
    ("CreateVerifiedAccessGroup", 10.0, 2.0),
    ("CreateVerifiedAccessInstance", 10.0, 2.0),
    ("CreateVerifiedAccessTrustProvider", 10.0, 2.0),
    ("CreateVolume", 100.0, 5.0),
    ("CreateVpcEndpoint", 4.0, 0.3),
    ("CreateVpcEndpointServiceConfiguration", 10.0, 1.0),
    ("DeleteClientVpnRoute", 5.0, 2.0),
    ("DeleteCoipCidr", 5.0, 1.0),
    ("DeleteCoipPool", 5.0, 1.0),
    ("DeleteCoipPoolPermission", 5.0, 1.0),
    ("DeleteNatGateway", 10.0, 1.0),
    ("DeleteNetworkInterface", 100.0, 5.0),
    ("DeleteSnapshot", 100.0, 5.0),
    ("DeleteSpotDatafeedSubscription", 50.0, 3.0),
    ("DeleteSubnetCidrReservation", 5.0, 1.0),
    ("DeleteQueuedReservedInstances", 5.0, 5.0),
    ("DeleteTags", 100.0, 10.0),
    ("DeleteVerifiedAccessEndpoint", 20.0, 4.0),
    ("DeleteVerifiedAccessGroup", 10.0, 2.0),
    ("DeleteVerifiedAccessInstance", 10.0, 2.0),
    ("DeleteVerifiedAccessTrustProvider", 10.0, 2.0),
    ("DeleteVolume", 100.0, 5.0),
    ("DeleteVpcEndpoints", 4.0, 0.3),
    ("DeleteVpcEndpointServiceConfigurations", 10.0, 1.0),
    ("DeprovisionByoipCidr", 1.0, 0.1),
    ("DeregisterImage", 100.0, 5.0),
    ("DescribeAggregateIdFormat", 10.0, 10.0),
    ("DescribeByoipCidrs", 1.0, 0.5),
    ("DescribeCapacityBlockExtensionOfferings", 10.0, 0.15),
    ("DescribeCapacityBlockOfferings", 10.0, 0.15),
    ("DescribeDeclarativePoliciesReports", 5.0, 5.0),
    ("DescribeHostReservations", 5.0, 2.0),
    ("DescribeHostReservationOfferings", 5.0, 2.0),
    ("DescribeIdentityIdFormat", 10.0, 10.0),
    ("DescribeIdFormat", 10.0, 10.0),
    ("DescribeInstanceTopology", 1.0, 1.0),
    ("DescribeMovingAddresses", 1.0, 1.0),
    ("DescribePrincipalIdFormat", 10.0, 10.0),
    ("DescribeReservedInstancesOfferings", 10.0, 10.0),
    ("DescribeSecurityGroupReferences", 20.0, 5.0),
    ("DescribeSpotDatafeedSubscription", 100.0, 13.0),
    ("DescribeSpotFleetInstances", 100.0, 5.0),
    ("DescribeSpotFleetRequestHistory", 100.0, 5.0),
    ("DescribeSpotFleetRequests", 50.0, 3.0),
    ("DescribeStaleSecurityGroups", 20.0, 5.0),
    ("DescribeStoreImageTasks", 50.0, 0.5),
    ("DescribeVerifiedAccessInstanceLoggingConfigurations", 10.0, 2.0),
    ("DetachVerifiedAccessTrustProvider", 10.0, 2.0),
    ("DisableFastLaunch", 5.0, 2.0),
    ("DisableImageBlockPublicAccess", 1.0, 0.1),
    ("DisableSnapshotBlockPublicAccess", 1.0, 0.1),
    ("DisassociateCapacityReservationBillingOwner", 1.0, 0.5),
    ("DisassociateEnclaveCertificateIamRole", 10.0, 1.0),
    ("DisassociateIamInstanceProfile", 100.0, 5.0),
    ("DisassociateNatGatewayAddress", 10.0, 1.0),
    ("EnableFastLaunch", 5.0, 2.0),
    ("EnableImageBlockPublicAccess", 1.0, 0.1),
    ("EnableSnapshotBlockPublicAccess", 1.0, 0.1),
    ("GetAssociatedEnclaveCertificateIamRoles", 10.0, 1.0),
    ("GetDeclarativePoliciesReportSummary", 5.0, 5.0),
    ("GetHostReservationPurchasePreview", 5.0, 2.0),
    ("ModifyImageAttribute", 100.0, 5.0),
    ("ModifyInstanceMetadataDefaults", 2.0, 2.0),
    ("ModifyInstanceMetadataOptions", 100.0, 5.0),
    ("ModifyLaunchTemplate", 100.0, 5.0),
    ("ModifyNetworkInterfaceAttribute", 100.0, 5.0),
    ("ModifySnapshotAttribute", 100.0, 5.0),
    ("ModifyVerifiedAccessEndpoint", 20.0, 4.0),
    ("ModifyVerifiedAccessEndpointPolicy", 20.0, 4.0),
    ("ModifyVerifiedAccessGroup", 10.0, 2.0),
    ("ModifyVerifiedAccessGroupPolicy", 20.0, 4.0),
    ("ModifyVerifiedAccessInstance", 10.0, 2.0),
    ("ModifyVerifiedAccessInstanceLoggingConfiguration", 10.0, 2.0),
    ("ModifyVerifiedAccessTrustProvider", 10.0, 2.0),
    ("ModifyVpcEndpoint", 4.0, 0.3),
    ("ModifyVpcEndpointServiceConfiguration", 10.0, 1.0),
    ("MoveAddressToVpc", 1.0, 1.0),
    ("ProvisionByoipCidr", 1.0, 0.1),
    ("PurchaseCapacityBlock", 10.0, 0.15),
    ("PurchaseCapacityBlockExtension", 10.0, 0.15),
    ("PurchaseHostReservation", 5.0, 2.0),
    ("PurchaseReservedInstancesOffering", 5.0, 5.0),
    ("RejectVpcEndpointConnections", 10.0, 1.0),
    ("RestoreAddressToClassic", 1.0, 1.0),
    ("RevokeClientVpnIngress", 5.0, 2.0),
    ("RunInstances", 5.0, 2.0),
    ("StartDeclarativePoliciesReport", 1.0, 1.0),
    ("StartInstances", 5.0, 2.0),
    ("TerminateInstances", 100.0, 5.0),
    ("UnassignPrivateIpAddresses", 100.0, 5.0),
    ("UnassignPrivateNatGatewayAddress", 10.0, 1.0),
    ("WithdrawByoipCidr", 1.0, 0.1),
];

/// EC2 actions that also take one token per instance from a resource bucket of their own.
pub(super) const EC2_RESOURCES: &[(&str, f64, f64)] = &[
    ("RunInstances", 1000.0, 2.0),
    ("TerminateInstances", 1000.0, 20.0),
    ("StartInstances", 1000.0, 2.0),
    ("StopInstances", 1000.0, 20.0),
];

/// The EC2 actions whose requests without pagination or a filter take from the smaller "unfiltered and
/// unpaginated non-mutating actions" bucket.
pub(super) const EC2_UNFILTERED_SUBSET: &[&str] = &[
    "DescribeInstances",
    "DescribeInstanceStatus",
    "DescribeNetworkInterfaces",
    "DescribeSecurityGroups",
    "DescribeSnapshots",
    "DescribeSpotInstanceRequests",
    "DescribeVolumes",
];

/// EC2's "Resource-intensive actions".
pub(super) const EC2_RESOURCE_INTENSIVE: &[&str] = &[
    "AcceptVpcPeeringConnection",
    "AuthorizeSecurityGroupIngress",
    "CancelSpotInstanceRequests",
    "CreateKeyPair",
    "CreateVpcPeeringConnection",
    "DeleteVpcPeeringConnection",
    "RejectVpcPeeringConnection",
    "RevokeSecurityGroupIngress",
    "RequestSpotInstances",
];

/// Classic ELB's (API version 1) resource-intensive actions.
pub(super) const ELB_RESOURCE_INTENSIVE: &[&str] = &[
    "CreateLoadBalancer",
    "AttachLoadBalancerToSubnets",
    "DetachLoadBalancerFromSubnets",
    "EnableAvailabilityZonesForLoadBalancer",
    "DisableAvailabilityZonesForLoadBalancer",
];

/// Classic ELB's registration actions.
pub(super) const ELB_REGISTRATION: &[&str] = &[
    "RegisterInstancesWithLoadBalancer",
    "DeregisterInstancesFromLoadBalancer",
];

/// ELBv2's resource-intensive actions.
pub(super) const ELBV2_RESOURCE_INTENSIVE: &[&str] = &["CreateLoadBalancer", "SetSubnets"];

/// ELBv2's registration actions.
pub(super) const ELBV2_REGISTRATION: &[&str] = &["RegisterTargets", "DeregisterTargets"];

/// ELBv2 actions with buckets of their own (the trust stores' and resource policies').
pub(super) const ELBV2_UNCATEGORIZED: &[(&str, f64, f64)] = &[
    ("CreateTrustStore", 10.0, 0.2),
    ("AddTrustStoreRevocations", 10.0, 0.2),
    ("DeleteSharedTrustStoreAssociation", 10.0, 0.2),
    ("DeleteTrustStore", 10.0, 0.2),
    ("ModifyTrustStore", 10.0, 0.2),
    ("RemoveTrustStoreRevocations", 10.0, 0.2),
    ("GetResourcePolicy", 20.0, 4.0),
    ("GetTrustStoreCaCertificatesBundle", 20.0, 4.0),
    ("GetTrustStoreRevocationContent", 20.0, 4.0),
    ("DescribeTrustStoreAssociations", 40.0, 10.0),
    ("DescribeTrustStoreRevocations", 40.0, 10.0),
    ("DescribeTrustStores", 40.0, 10.0),
];
