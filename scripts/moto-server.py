"""moto's server, answering ELBv2 creates as AWS does when the same thing is created twice.

AWS documents CreateLoadBalancer, CreateTargetGroup and CreateListener (ELBv2) as idempotent: a second call
with the same settings succeeds and answers the existing resource; other settings fail with
DuplicateLoadBalancerName, DuplicateTargetGroupName or DuplicateListener. moto 5.2.5 instead creates a
second load balancer of the same name and a second listener on the same port, and refuses every target
group name twice. A retried call whose first answer was lost (a connection reset after the call took effect)
or two leaders creating the same load balancer then leave duplicates AWS never makes (a second NLB the CCM
cannot see by name is a leak to it). This launcher wraps those three backend methods and starts the server;
everything else is moto unchanged. scripts/testenv.sh starts moto with it.
"""

import sys

from moto.elbv2 import models
from moto.elbv2.exceptions import (
    DuplicateListenerError,
    DuplicateLoadBalancerName,
    DuplicateTargetGroupName,
)
from moto.server import main

Backend = models.ELBv2Backend
_create_load_balancer = Backend.create_load_balancer
_create_target_group = Backend.create_target_group
_create_listener = Backend.create_listener


def create_load_balancer(self, name, *args, **kwargs):
    for lb in self.load_balancers.values():
        if lb.name == name:
            scheme = kwargs.get("scheme") or "internet-facing"
            lb_type = kwargs.get("loadbalancer_type") or "application"
            if lb.scheme == scheme and lb.type == lb_type:
                return lb
            raise DuplicateLoadBalancerName()
    return _create_load_balancer(self, name, *args, **kwargs)


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
    return _create_listener(self, load_balancer_arn, protocol, port, ssl_policy, certificate, actions, *args,
                            **kwargs)


Backend.create_load_balancer = create_load_balancer
Backend.create_target_group = create_target_group
Backend.create_listener = create_listener

if __name__ == "__main__":
    sys.exit(main())
