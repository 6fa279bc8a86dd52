"""moto's server, answering ELBv2 creates as AWS does when the same thing is created twice, and paging
DescribeInstances listings by instance as AWS does.

AWS documents CreateLoadBalancer, CreateTargetGroup and CreateListener (ELBv2) as idempotent: a second call
with the same settings succeeds and answers the existing resource; other settings fail with
DuplicateLoadBalancerName, DuplicateTargetGroupName or DuplicateListener. moto 5.2.5 instead creates a
second load balancer of the same name and a second listener on the same port, and refuses every target
group name twice. A retried call whose first answer was lost (a connection reset after the call took effect)
or two leaders creating the same load balancer then leave duplicates AWS never makes (a second NLB the CCM
cannot see by name is a leak to it). This launcher wraps those three backend methods and starts the server;
everything else is moto unchanged. scripts/testenv.sh starts moto with it.

A Classic ELB always has a health check on AWS: one created without is given the default, TCP on the first
listener's instance port, every 30 s, timeout 5 s, unhealthy after 2 failures, healthy after 10 successes.
moto 5.2.5 answers no HealthCheck at all until ConfigureHealthCheck, which the Go provider dereferences (and
panics on). New Classic ELBs get AWS's default here.

An instance launched without security groups is in its VPC's default group on AWS, and DescribeInstances says
so in the instance's SecurityGroups. moto 5.2.5 puts the default group on the instance's network interface but
answers an empty SecurityGroups, so the instance seemed to have no group: no load balancer rule was ever made
for it. Such instances are given their primary interface's groups here.

A DescribeInstances listing with MaxResults answers at most that many instances a page on AWS; moto 5.2.5
counts reservations instead, so 5,000 instances launched 250 at a time came back in one page: one call where
AWS makes five, and a response five times the size of AWS's largest (which inflated the CCM's peak memory in
the scale harness). Listings with MaxResults are paged by instance here; a reservation split across pages
appears in each with its part of the instances, as on AWS.

Defaults AWS answers and moto 5.2.5 leaves out (found by comparing the Go controller's resources with ours):
a Classic ELB's attributes include the draining timeout (300) and the desync mitigation mode (`defensive`)
from its creation on, and a ModifyLoadBalancerAttributes changes only the additional attributes it names
(moto appended another `defensive` entry on every call without any); an ELBv2 load balancer's attributes
include `access_logs.s3.enabled=false`, and its scheme is `internet-facing` when CreateLoadBalancer names
none (moto answered no scheme); a TCP, UDP or TCP_UDP listener has no SslPolicy (moto gave every listener
ELBSecurityPolicy-2016-08). A Classic ELB listener keeps the InstanceProtocol it was created with (moto answered
its front-end protocol: an SSL listener to TCP instances read back as SSL to SSL, which a controller then
"repaired" on every sync).

moto 5.2.5 keeps the AlpnPolicy a listener is created with but ignores it in ModifyListener, which changes it
on AWS; ModifyListener applies it here. It also ignores ModifyListener's Certificates on a TLS listener (it
applies them to HTTPS listeners only); here they replace a TLS listener's default certificate, its certificate
list (AddListenerCertificates) kept.

moto 5.2.5 applies ModifyTargetGroup's Matcher only to a group whose traffic protocol is HTTP or HTTPS; AWS
applies it to a group whose health check is HTTP or HTTPS, an NLB's TCP group included (which takes codes from
200 to 599). ModifyTargetGroup applies it here to such a group.

AWS refuses DeleteLoadBalancer (ELBv2) with OperationNotPermitted while the load balancer's
`deletion_protection.enabled` attribute is true; moto 5.2.5 deletes it. It is refused here as AWS does.

moto 5.2.5 has no DescribeInstanceTopology (it answers HTTP 500, which a client retries). AWS answers it with
the instances whose types have a topology (accelerated types such as p4d or trn1) and leaves the others out;
the test environment's instances are all of other types, so the answer here is AWS's for them: no instance.

moto 5.2.5 reads one resource's tags by scanning every tag of every resource in the Region
(`TaggedEC2Resource.get_tags` calls `describe_tags` with a resource-id filter, a regular expression matched
against each resource ID), and it reads them for every instance a `DescribeInstances` filter looks at and every
instance an answer lists: a listing over N tagged instances costs N times all tags, so at 5,000 instances one
page took 10 to 25 s and at 20,000 none came back within minutes (docs/performance.md, "Past 5,000 Nodes").
AWS's answer time does not grow that way. Here a resource's tags are read from moto's own per-resource map: the
same tags in the same order (the filter was an exact match, `fnmatch` anchors it, and resource IDs hold no
wildcards), only without the scan. No answer changes.

Each change, the AWS documentation it follows, and what ministack 1.5.33 (the second emulator, run as shipped:
docs/testing.md, "Two emulators") answers:
- ELBv2 creates answered as idempotent: https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/
  API_CreateLoadBalancer.html (API_CreateTargetGroup.html, API_CreateListener.html). ministack disagrees: an
  identical retry answers DuplicateLoadBalancerName; a name another type holds answers it too, as AWS does.
- A Classic ELB's default health check, draining timeout, desync mitigation mode and listener InstanceProtocol:
  https://docs.aws.amazon.com/elasticloadbalancing/latest/classic/elb-healthchecks.html,
  https://docs.aws.amazon.com/elasticloadbalancing/2012-06-01/APIReference/API_LoadBalancerAttributes.html.
  ministack has no Classic ELB.
- An instance's default group in DescribeInstances' SecurityGroups:
  https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RunInstances.html (SecurityGroupIds: "If you
  don't specify a security group ID, we use the default security group"). ministack agrees.
- DescribeInstances paged by instance: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
  API_DescribeInstances.html (MaxResults). ministack disagrees: it ignores MaxResults and NextToken.
- access_logs.s3.enabled=false, scheme internet-facing by default, no SslPolicy on TCP listeners:
  https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/API_LoadBalancerAttribute.html,
  API_CreateLoadBalancer.html (Scheme), API_Listener.html (SslPolicy: HTTPS and TLS listeners only). ministack
  agrees with all three.
- ModifyListener applies AlpnPolicy, and Certificates to TLS listeners ("[HTTPS and TLS listeners] The default
  certificate for the listener"): https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/
  API_ModifyListener.html. ministack keeps no AlpnPolicy at all, and has no ACM here.
- ModifyTargetGroup's Matcher for any group with an HTTP or HTTPS health check:
  https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/API_ModifyTargetGroup.html (Matcher:
  "[HTTP/HTTPS health checks] The HTTP or gRPC codes to use when checking for a successful response from a
  target"), API_Matcher.html ("For Network Load Balancers, you can specify values between 200 and 599").
  ministack agrees: it applies Matcher.HttpCode whatever the group's protocol.
- DeleteLoadBalancer refused under deletion protection: https://docs.aws.amazon.com/elasticloadbalancing/latest/
  network/network-load-balancers.html#deletion-protection. ministack disagrees: it deletes the load balancer.
- DescribeInstanceTopology answers no instance for types without a topology:
  https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTopology.html. ministack agrees
  (an empty list).
"""

import copy
import sys

from moto.elb import models as elb_models
from moto.elbv2 import models
from moto.elbv2.exceptions import (
    DuplicateListenerError,
    DuplicateLoadBalancerName,
    DuplicateTargetGroupName,
    ELBClientError,
)
from moto.core.responses import ActionResult
from moto.elbv2.responses import ELBV2Response
from moto.ec2.models.core import TaggedEC2Resource
from moto.ec2.models.instances import InstanceBackend
from moto.ec2.responses.instances import InstanceResponse
from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix
from moto.server import main

Backend = models.ELBv2Backend
_create_load_balancer = Backend.create_load_balancer
_create_target_group = Backend.create_target_group
_create_listener = Backend.create_listener
_delete_load_balancer = Backend.delete_load_balancer


def delete_load_balancer(self, arn):
    balancer = self.load_balancers.get(arn)
    if balancer is not None and balancer.attrs.get("deletion_protection.enabled") == "true":
        raise ELBClientError(
            "OperationNotPermitted",
            f"Load balancer '{arn}' cannot be deleted because deletion protection is enabled",
        )
    return _delete_load_balancer(self, arn)


def create_load_balancer(self, name, *args, **kwargs):
    kwargs["scheme"] = kwargs.get("scheme") or "internet-facing"
    for lb in self.load_balancers.values():
        if lb.name == name:
            scheme = kwargs.get("scheme") or "internet-facing"
            lb_type = kwargs.get("loadbalancer_type") or "application"
            if lb.scheme == scheme and lb.type == lb_type:
                return lb
            raise DuplicateLoadBalancerName()
    balancer = _create_load_balancer(self, name, *args, **kwargs)
    balancer.attrs.setdefault("access_logs.s3.enabled", "false")
    return balancer


def create_target_group(self, name, **kwargs):
    for group in self.target_groups.values():
        if group.name == name:
            same = (
                group.protocol == kwargs.get("protocol")
                and str(group.port) == str(kwargs.get("port"))
                and group.vpc_id == kwargs.get("vpc_id")
            )
            if same:
                return group
            raise DuplicateTargetGroupName()
    return _create_target_group(self, name, **kwargs)


def _forwards_to(actions):
    return [getattr(a, "data", a).get("TargetGroupArn") for a in actions]


def create_listener(self, load_balancer_arn, protocol, port, ssl_policy, certificate, actions, *args, **kwargs):
    balancer = self.load_balancers.get(load_balancer_arn)
    if balancer is not None:
        for listener in balancer.listeners.values():
            if str(listener.port) == str(port):
                same = (listener.protocol == (protocol or "").upper()
                        and _forwards_to(listener.default_actions) == _forwards_to(actions))
                if same:
                    return listener
                raise DuplicateListenerError()
    if (protocol or "").upper() in ("TCP", "UDP", "TCP_UDP"):
        ssl_policy = None
    return _create_listener(self, load_balancer_arn, protocol, port, ssl_policy, certificate, actions, *args,
                            **kwargs)


ClassicBackend = elb_models.ELBBackend
_create_classic_load_balancer = ClassicBackend.create_load_balancer


def create_classic_load_balancer(self, *args, **kwargs):
    balancer = _create_classic_load_balancer(self, *args, **kwargs)
    if balancer.health_check is None and balancer.listeners:
        port = balancer.listeners[0].instance_port
        balancer.health_check = elb_models.FakeHealthCheck(
            timeout="5", healthy_threshold="10", unhealthy_threshold="2", interval="30", target=f"TCP:{port}"
        )
    _keep_instance_protocols(balancer, kwargs.get("ports"))
    balancer.attributes["connection_draining"].setdefault("timeout", 300)
    balancer.attributes["additional_attributes"] = [("elb.http.desyncmitigationmode", "defensive")]
    return balancer


def _keep_instance_protocols(balancer, ports):
    for port in ports or []:
        wanted = port.get("InstanceProtocol")
        for listener in balancer.listeners:
            if wanted and str(listener.load_balancer_port) == str(port.get("LoadBalancerPort")):
                listener.given_instance_protocol = wanted.upper()


_create_classic_listeners = ClassicBackend.create_load_balancer_listeners


def create_classic_listeners(self, name, ports):
    balancer = _create_classic_listeners(self, name, ports)
    if balancer is not None:
        _keep_instance_protocols(balancer, ports)
    return balancer


_modify_classic_attributes = ClassicBackend.modify_load_balancer_attributes


def modify_classic_attributes(self, load_balancer_name, *args, additional_attributes=None, **kwargs):
    balancer = self.get_load_balancer(load_balancer_name)
    merged = dict(balancer.attributes["additional_attributes"])
    merged.update((a["Key"], a["Value"]) for a in additional_attributes or [])
    _modify_classic_attributes(self, load_balancer_name, *args, **kwargs)
    balancer.attributes["additional_attributes"] = list(merged.items())


_describe_instances = InstanceResponse.describe_instances


def describe_instances(self):
    max_results = self._get_param("MaxResults")
    if max_results is None or "InstanceId.1" in self.data:
        return _describe_instances(self)
    self.error_on_dryrun()
    reservations = self.ec2_backend.describe_instances(filters=self._filters_from_querystring())
    pairs = [(r, i) for r in reservations for i in r.instances]
    start = int(self._get_param("NextToken") or 0)
    end = start + int(max_results)
    parts = []
    for reservation, instance in pairs[start:end]:
        if not parts or parts[-1].id != reservation.id:
            part = copy.copy(reservation)
            part.instances = []
            parts.append(part)
        parts[-1].instances.append(instance)
    next_token = str(end) if len(pairs) > end else None
    return ActionResult({"Reservations": parts, "NextToken": next_token})


_modify_listener = ELBV2Response.modify_listener
_modify_target_group = Backend.modify_target_group


def modify_target_group(self, arn, *args, **kwargs):
    group = _modify_target_group(self, arn, *args, **kwargs)
    # The responses pass the codes eighth after the ARN (moto 5.2.5's signature).
    http_codes = kwargs.get("http_codes", args[7] if len(args) > 7 else None)
    if http_codes is not None and (group.health_check_protocol or "").upper() in ("HTTP", "HTTPS"):
        group.matcher = {**(getattr(group, "matcher", None) or {}), "HttpCode": http_codes}
    return group


def modify_listener(self):
    result = _modify_listener(self)
    arn = self._get_param("ListenerArn")
    listener = self.elbv2_backend.describe_listeners(load_balancer_arn=None, listener_arns=[arn])[0]
    alpn = self._get_params().get("AlpnPolicy")
    if alpn:
        listener.alpn_policy = alpn
    # A TLS listener's new default certificate (moto applies Certificates to HTTPS listeners only). moto keeps
    # the default first in `certificates`, the certificate list after it: the list stays as it is.
    certificates = self._get_param("Certificates", [])
    if certificates and listener.protocol == "TLS":
        default = certificates[0]["CertificateArn"]
        listener.certificate = default
        listener.certificates = [default] + list(listener.certificates[1:])
    return result


def describe_instance_topology(self):
    return ActionResult({"Instances": []})


_run_instances = InstanceBackend.run_instances


def run_instances(self, *args, **kwargs):
    reservation = _run_instances(self, *args, **kwargs)
    for instance in reservation.instances:
        if not instance.security_groups and 0 in instance.nics:
            instance.security_groups = list(instance.nics[0]._group_set)
    return reservation


def get_tags(self):
    # The tags of this resource alone, as moto's describe_tags(filters={"resource-id": [id]}) answers them.
    tags = self.ec2_backend.tags.get(self.id) if self.id else None
    if not tags:
        return []
    kind = EC2_PREFIX_TO_RESOURCE.get(get_prefix(self.id), "")
    return [{"resource_id": self.id, "key": k, "value": v, "resource_type": kind} for k, v in tags.items()]


ELBV2Response.modify_listener = modify_listener
InstanceBackend.run_instances = run_instances
InstanceResponse.describe_instances = describe_instances
InstanceResponse.describe_instance_topology = describe_instance_topology
TaggedEC2Resource.get_tags = get_tags
Backend.create_load_balancer = create_load_balancer
Backend.create_target_group = create_target_group
Backend.create_listener = create_listener
Backend.delete_load_balancer = delete_load_balancer
Backend.modify_target_group = modify_target_group
ClassicBackend.create_load_balancer = create_classic_load_balancer
ClassicBackend.modify_load_balancer_attributes = modify_classic_attributes
ClassicBackend.create_load_balancer_listeners = create_classic_listeners
elb_models.FakeListener.instance_protocol = property(
    lambda self: getattr(self, "given_instance_protocol", None) or self.protocol
)

if __name__ == "__main__":
    sys.exit(main())
