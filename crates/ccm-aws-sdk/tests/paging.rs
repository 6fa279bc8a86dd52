//! Paging (moto always answers one page): the proxy answers with canned pages carrying next tokens, and the
//! adapter must follow them and collect everything.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod common;

use ccm_aws_api::{Ec2, Elbv2, Filter};
use ccm_testing::{Fault, FaultProxy, TestEnv};
use common::adapter;

fn ec2_page(body: &str) -> Fault {
    Fault::Respond {
        status: 200,
        content_type: "text/xml;charset=UTF-8".into(),
        body: format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{body}"),
    }
}

fn route_table(id: &str) -> String {
    format!(
        "<item><routeTableId>{id}</routeTableId><vpcId>vpc-1</vpcId><routeSet><item>\
         <destinationCidrBlock>10.244.0.0/24</destinationCidrBlock><instanceId>i-1</instanceId>\
         <state>blackhole</state></item></routeSet><associationSet/><tagSet/></item>"
    )
}

#[tokio::test]
async fn route_tables_follow_next_tokens() {
    let proxy = FaultProxy::start(&TestEnv::get().aws_endpoint).await.unwrap();
    let adapter = adapter(Some(&proxy.url())).await;
    let ns = "xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"";
    proxy.inject(
        "DescribeRouteTables",
        ec2_page(&format!(
            "<DescribeRouteTablesResponse {ns}><requestId>r</requestId><routeTableSet>{}{}</routeTableSet>\
             <nextToken>page-2</nextToken></DescribeRouteTablesResponse>",
            route_table("rtb-1"),
            route_table("rtb-2")
        )),
        1,
    );
    proxy.inject(
        "DescribeRouteTables",
        ec2_page(&format!(
            "<DescribeRouteTablesResponse {ns}><requestId>r</requestId><routeTableSet>{}</routeTableSet>\
             </DescribeRouteTablesResponse>",
            route_table("rtb-3")
        )),
        1,
    );
    let tables = adapter
        .ec2()
        .route_tables(&[Filter::new("vpc-id", ["vpc-1"])])
        .await
        .unwrap();
    let ids: Vec<&str> = tables.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["rtb-1", "rtb-2", "rtb-3"]);
    assert_eq!(tables[0].routes[0].state, ccm_aws_api::ec2::RouteState::Blackhole);
    let bodies = proxy.bodies("DescribeRouteTables");
    assert_eq!(bodies.len(), 2);
    assert!(!bodies[0].contains("NextToken"), "{}", bodies[0]);
    assert!(bodies[1].contains("NextToken=page-2"), "{}", bodies[1]);
    assert!(
        bodies[1].contains("Filter.1.Name=vpc-id"),
        "filters are kept on every page: {}",
        bodies[1]
    );
}

#[tokio::test]
async fn filtered_instances_follow_next_tokens() {
    let proxy = FaultProxy::start(&TestEnv::get().aws_endpoint).await.unwrap();
    let adapter = adapter(Some(&proxy.url())).await;
    let ns = "xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"";
    let instance = |id: &str| {
        format!(
            "<item><reservationId>r-{id}</reservationId><instancesSet><item><instanceId>{id}</instanceId>\
             <instanceState><code>16</code><name>running</name></instanceState></item></instancesSet></item>"
        )
    };
    proxy.inject(
        "DescribeInstances",
        ec2_page(&format!(
            "<DescribeInstancesResponse {ns}><reservationSet>{}</reservationSet><nextToken>t2</nextToken>\
             </DescribeInstancesResponse>",
            instance("i-a")
        )),
        1,
    );
    proxy.inject(
        "DescribeInstances",
        ec2_page(&format!(
            "<DescribeInstancesResponse {ns}><reservationSet>{}</reservationSet></DescribeInstancesResponse>",
            instance("i-b")
        )),
        1,
    );
    let found = adapter.ec2().instances(&[Filter::tag_key("k")]).await.unwrap();
    assert_eq!(
        found.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        ["i-a", "i-b"]
    );
    let bodies = proxy.bodies("DescribeInstances");
    assert!(bodies[0].contains("MaxResults=1000"), "{}", bodies[0]);
    assert!(bodies[1].contains("NextToken=t2"), "{}", bodies[1]);
}

#[tokio::test]
async fn elbv2_listeners_follow_markers() {
    let proxy = FaultProxy::start(&TestEnv::get().aws_endpoint).await.unwrap();
    let adapter = adapter(Some(&proxy.url())).await;
    let page = |arn: &str, port: i32, marker: &str| Fault::Respond {
        status: 200,
        content_type: "text/xml".into(),
        body: format!(
            "<DescribeListenersResponse xmlns=\"http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/\">\
             <DescribeListenersResult><Listeners><member><ListenerArn>{arn}</ListenerArn><Port>{port}</Port>\
             <Protocol>TCP</Protocol><DefaultActions><member><Type>forward</Type><TargetGroupArn>tg</TargetGroupArn>\
             </member></DefaultActions></member></Listeners>{marker}</DescribeListenersResult>\
             <ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></DescribeListenersResponse>"
        ),
    };
    proxy.inject(
        "DescribeListeners",
        page("l-1", 80, "<NextMarker>m2</NextMarker>"),
        1,
    );
    proxy.inject("DescribeListeners", page("l-2", 443, ""), 1);
    let listeners = adapter.elbv2().listeners("arn:lb").await.unwrap();
    assert_eq!(
        listeners
            .iter()
            .map(|l| (l.arn.as_str(), l.port))
            .collect::<Vec<_>>(),
        [("l-1", 80), ("l-2", 443)]
    );
    assert_eq!(listeners[0].default_target_groups, ["tg"]);
    assert!(proxy.bodies("DescribeListeners")[1].contains("Marker=m2"));
}
