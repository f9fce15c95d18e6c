//! ApplicationClientProtocol and ApplicationMasterProtocol messages (`pb::hadoop::yarn`): a
//! realistic SubmitApplicationRequest, AllocateRequest and AllocateResponse encode with prost,
//! decode to an equal value, and read back identically through the checked-in descriptor
//! (prost-reflect), so the generated code and `descriptor.bin` agree on every field used. Also:
//! the proto2 defaults Java relies on when a field is absent, and the services in the descriptor
//! against the method-name constants of `hadoop_wire::yarn`.
//!
//! The values follow what Java 3.5 clients send: `YarnClientImpl.submitApplication` with a
//! distributed-shell-like AM, and `AMRMClientImpl.allocate` with node, rack and `*` asks.

use hadoop_wire::pb::hadoop::common::TokenProto;
use hadoop_wire::pb::hadoop::yarn::{self as py, *};
use hadoop_wire::pb::DESCRIPTOR_SET;
use hadoop_wire::yarn::{acp, amp};
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage};

const TS: i64 = 1_764_850_000_000;

fn app_id() -> ApplicationIdProto {
    ApplicationIdProto {
        id: Some(7),
        cluster_timestamp: Some(TS),
    }
}

fn attempt_id() -> ApplicationAttemptIdProto {
    ApplicationAttemptIdProto {
        application_id: Some(app_id()),
        attempt_id: Some(1),
    }
}

fn container_id(id: i64) -> ContainerIdProto {
    ContainerIdProto {
        app_id: Some(app_id()),
        app_attempt_id: Some(attempt_id()),
        id: Some(id),
    }
}

/// A resource as Java fills it: memory and vcores, plus one map entry per resource type.
fn resource(mb: i64, vcores: i32) -> ResourceProto {
    let info = |key: &str, value: i64, units: &str| ResourceInformationProto {
        key: key.into(),
        value: Some(value),
        units: Some(units.into()),
        r#type: Some(ResourceTypesProto::Countable as i32),
        tags: vec![],
        attributes: vec![],
    };
    ResourceProto {
        memory: Some(mb),
        virtual_cores: Some(vcores),
        resource_value_map: vec![
            info("memory-mb", mb, "Mi"),
            info("vcores", vcores.into(), ""),
        ],
    }
}

fn priority(p: i32) -> PriorityProto {
    PriorityProto { priority: Some(p) }
}

fn node(host: &str, port: i32) -> NodeIdProto {
    NodeIdProto {
        host: Some(host.into()),
        port: Some(port),
    }
}

fn token(kind: &str, service: &str) -> TokenProto {
    TokenProto {
        identifier: vec![0x0a, 0x0c, 0x08, 0x07, 0x10, 0x01],
        password: (0u8..20).collect(),
        kind: kind.into(),
        service: service.into(),
    }
}

fn kv(k: &str, v: &str) -> StringStringMapProto {
    StringStringMapProto {
        key: Some(k.into()),
        value: Some(v.into()),
    }
}

fn ask(name: &str, n: i32, relax: bool) -> ResourceRequestProto {
    ResourceRequestProto {
        priority: Some(priority(0)),
        resource_name: Some(name.into()),
        capability: Some(resource(1024, 1)),
        num_containers: Some(n),
        relax_locality: Some(relax),
        node_label_expression: None,
        execution_type_request: Some(ExecutionTypeRequestProto {
            execution_type: Some(ExecutionTypeProto::Guaranteed as i32),
            enforce_execution_type: Some(false),
        }),
        allocation_request_id: Some(0),
    }
}

fn container(id: i64, host: &str) -> ContainerProto {
    ContainerProto {
        id: Some(container_id(id)),
        node_id: Some(node(host, 45454)),
        node_http_address: Some(format!("{host}:8042")),
        resource: Some(resource(1024, 1)),
        priority: Some(priority(0)),
        container_token: Some(token("ContainerToken", &format!("{host}:45454"))),
        execution_type: Some(ExecutionTypeProto::Guaranteed as i32),
        allocation_request_id: Some(0),
        version: Some(0),
        allocation_tags: vec![],
        exposed_ports: None,
    }
}

fn submit_request() -> SubmitApplicationRequestProto {
    let jar = LocalResourceProto {
        resource: Some(UrlProto {
            scheme: Some("hdfs".into()),
            host: Some("nn.example".into()),
            port: Some(8020),
            file: Some("/user/alice/.staging/application_1764850000000_0007/AppMaster.jar".into()),
            user_info: None,
        }),
        size: Some(71_234),
        timestamp: Some(TS + 1_234),
        r#type: Some(LocalResourceTypeProto::File as i32),
        visibility: Some(LocalResourceVisibilityProto::Application as i32),
        pattern: None,
        should_be_uploaded_to_shared_cache: Some(false),
    };
    let am_spec = ContainerLaunchContextProto {
        local_resources: vec![StringLocalResourceMapProto {
            key: Some("AppMaster.jar".into()),
            value: Some(jar),
        }],
        tokens: Some(b"HDTS\x00\x00\x00".to_vec()),
        service_data: vec![],
        environment: vec![
            kv("CLASSPATH", "{{CLASSPATH}}<CPS>./*<CPS>{{HADOOP_CONF_DIR}}"),
            kv("JAVA_HOME", "/usr/lib/jvm/java-17"),
        ],
        command: vec![
            "{{JAVA_HOME}}/bin/java -Xmx256m org.example.AppMaster 1><LOG_DIR>/AppMaster.stdout 2><LOG_DIR>/AppMaster.stderr".into(),
        ],
        application_ac_ls: vec![
            ApplicationAclMapProto {
                access_type: Some(ApplicationAccessTypeProto::AppaccessViewApp as i32),
                acl: Some("alice ".into()),
            },
            ApplicationAclMapProto {
                access_type: Some(ApplicationAccessTypeProto::AppaccessModifyApp as i32),
                acl: Some("alice ".into()),
            },
        ],
        container_retry_context: None,
        tokens_conf: None,
    };
    let mut am_ask = ask("*", 1, true);
    am_ask.capability = Some(resource(512, 1));
    am_ask.priority = Some(priority(0));
    am_ask.node_label_expression = Some(String::new());
    SubmitApplicationRequestProto {
        application_submission_context: Some(ApplicationSubmissionContextProto {
            application_id: Some(app_id()),
            application_name: Some("distributed-shell".into()),
            queue: Some("default".into()),
            priority: Some(priority(0)),
            am_container_spec: Some(am_spec),
            cancel_tokens_when_complete: Some(true),
            unmanaged_am: Some(false),
            max_app_attempts: Some(2),
            resource: Some(resource(512, 1)),
            application_type: Some("YARN".into()),
            keep_containers_across_application_attempts: Some(false),
            application_tags: vec!["hotpath".into(), "smoke".into()],
            attempt_failures_validity_interval: Some(-1),
            log_aggregation_context: Some(LogAggregationContextProto {
                include_pattern: Some(".*".into()),
                ..Default::default()
            }),
            reservation_id: None,
            node_label_expression: None,
            am_container_resource_request: vec![am_ask],
            application_timeouts: vec![ApplicationTimeoutMapProto {
                application_timeout_type: Some(
                    ApplicationTimeoutTypeProto::AppTimeoutLifetime as i32,
                ),
                timeout: Some(3600),
            }],
            application_scheduling_properties: vec![kv("queue.priority", "high")],
        }),
    }
}

fn allocate_request() -> AllocateRequestProto {
    let target =
        |t: py::placement_constraint_target_proto::TargetType, key: &str, vals: &[&str]| {
            PlacementConstraintTargetProto {
                target_type: t as i32,
                target_key: Some(key.into()),
                target_values: vals.iter().map(|v| v.to_string()).collect(),
            }
        };
    let simple = |scope: &str, min: i32, max: i32, t: PlacementConstraintTargetProto| {
        PlacementConstraintProto {
            simple_constraint: Some(SimplePlacementConstraintProto {
                scope: scope.into(),
                target_expressions: vec![t],
                min_cardinality: Some(min),
                max_cardinality: Some(max),
                attribute_op_code: None,
            }),
            composite_constraint: None,
        }
    };
    use py::placement_constraint_target_proto::TargetType;
    // anti-affinity with the `hbase-rs` tag on a node AND on a rack at most 3
    let constraint = PlacementConstraintProto {
        simple_constraint: None,
        composite_constraint: Some(CompositePlacementConstraintProto {
            composite_type: py::composite_placement_constraint_proto::CompositeType::And as i32,
            child_constraints: vec![
                simple(
                    "node",
                    0,
                    0,
                    target(TargetType::AllocationTag, "", &["hbase-rs"]),
                ),
                simple(
                    "rack",
                    0,
                    3,
                    target(TargetType::AllocationTag, "", &["hbase-rs"]),
                ),
            ],
            timed_child_constraints: vec![TimedPlacementConstraintProto {
                placement_constraint: simple(
                    "node",
                    1,
                    i32::MAX,
                    target(TargetType::NodeAttribute, "rm.yarn.io/os", &["linux"]),
                ),
                scheduling_delay: 5_000,
                delay_unit: Some(
                    py::timed_placement_constraint_proto::DelayUnit::Milliseconds as i32,
                ),
            }],
        }),
    };
    AllocateRequestProto {
        ask: vec![
            ask("10.0.0.11", 2, true),
            ask("/default-rack", 2, true),
            ask("*", 2, true),
        ],
        release: vec![container_id(3)],
        blacklist_request: Some(ResourceBlacklistRequestProto {
            blacklist_additions: vec!["10.0.0.13".into()],
            blacklist_removals: vec![],
        }),
        response_id: Some(4),
        progress: Some(0.25),
        update_requests: vec![UpdateContainerRequestProto {
            container_version: 0,
            container_id: container_id(2),
            update_type: ContainerUpdateTypeProto::IncreaseResource as i32,
            capability: Some(resource(2048, 2)),
            execution_type: None,
        }],
        scheduling_requests: vec![SchedulingRequestProto {
            allocation_request_id: Some(10),
            priority: Some(priority(1)),
            execution_type: Some(ExecutionTypeRequestProto {
                execution_type: Some(ExecutionTypeProto::Guaranteed as i32),
                enforce_execution_type: Some(true),
            }),
            allocation_tags: vec!["hbase-rs".into()],
            resource_sizing: Some(ResourceSizingProto {
                num_allocations: Some(3),
                resources: Some(resource(4096, 2)),
            }),
            placement_constraint: Some(constraint),
        }],
        tracking_url: Some("http://10.0.0.11:41000/".into()),
    }
}

fn allocate_response() -> AllocateResponseProto {
    let node_report = NodeReportProto {
        node_id: Some(node("10.0.0.12", 45454)),
        http_address: Some("10.0.0.12:8042".into()),
        rack_name: Some("/default-rack".into()),
        used: Some(resource(2048, 2)),
        capability: Some(resource(8192, 8)),
        num_containers: Some(2),
        node_state: Some(NodeStateProto::NsDecommissioning as i32),
        health_report: Some(String::new()),
        last_health_report_time: Some(TS + 60_000),
        node_labels: vec![],
        containers_utilization: None,
        node_utilization: Some(ResourceUtilizationProto {
            pmem: Some(1900),
            vmem: Some(4000),
            cpu: Some(0.5),
            custom_resources: vec![],
        }),
        decommissioning_timeout: Some(3600),
        node_update_type: Some(NodeUpdateTypeProto::NodeDecommissioning as i32),
        node_attributes: vec![NodeAttributeProto {
            attribute_key: NodeAttributeKeyProto {
                attribute_prefix: Some("rm.yarn.io".into()),
                attribute_name: "os".into(),
            },
            attribute_type: Some(NodeAttributeTypeProto::String as i32),
            attribute_value: Some("linux".into()),
        }],
    };
    AllocateResponseProto {
        a_m_command: None,
        response_id: Some(5),
        allocated_containers: vec![container(4, "10.0.0.11"), container(5, "10.0.0.12")],
        completed_container_statuses: vec![ContainerStatusProto {
            container_id: Some(container_id(3)),
            state: Some(ContainerStateProto::CComplete as i32),
            diagnostics: Some("Container released by application".into()),
            exit_status: Some(hadoop_wire::yarn::exit_status::ABORTED),
            capability: Some(resource(1024, 1)),
            execution_type: Some(ExecutionTypeProto::Guaranteed as i32),
            container_attributes: vec![],
            container_sub_state: Some(ContainerSubStateProto::CssDone as i32),
        }],
        limit: Some(resource(12_288, 12)),
        updated_nodes: vec![node_report],
        num_cluster_nodes: Some(3),
        preempt: Some(PreemptionMessageProto {
            strict_contract: Some(StrictPreemptionContractProto {
                container: vec![PreemptionContainerProto {
                    id: Some(container_id(2)),
                }],
            }),
            contract: Some(PreemptionContractProto {
                resource: vec![PreemptionResourceRequestProto {
                    resource: Some(ask("*", 1, true)),
                }],
                container: vec![PreemptionContainerProto {
                    id: Some(container_id(4)),
                }],
            }),
        }),
        nm_tokens: vec![
            NmTokenProto {
                node_id: Some(node("10.0.0.11", 45454)),
                token: Some(token("NMToken", "10.0.0.11:45454")),
            },
            NmTokenProto {
                node_id: Some(node("10.0.0.12", 45454)),
                token: Some(token("NMToken", "10.0.0.12:45454")),
            },
        ],
        am_rm_token: Some(token("YARN_AM_RM_TOKEN", "")),
        application_priority: Some(priority(0)),
        collector_info: Some(CollectorInfoProto {
            collector_addr: Some("10.0.0.11:42111".into()),
            collector_token: None,
        }),
        update_errors: vec![UpdateContainerErrorProto {
            reason: Some("INCORRECT_CONTAINER_VERSION_ERROR".into()),
            update_request: Some(UpdateContainerRequestProto {
                container_version: 0,
                container_id: container_id(5),
                update_type: ContainerUpdateTypeProto::DecreaseResource as i32,
                capability: Some(resource(512, 1)),
                execution_type: None,
            }),
            current_container_version: Some(1),
        }],
        updated_containers: vec![UpdatedContainerProto {
            update_type: ContainerUpdateTypeProto::IncreaseResource as i32,
            container: {
                let mut c = container(2, "10.0.0.11");
                c.resource = Some(resource(2048, 2));
                c.version = Some(1);
                c
            },
        }],
        containers_from_previous_attempts: vec![],
        rejected_scheduling_requests: vec![RejectedSchedulingRequestProto {
            reason: RejectionReasonProto::RrpCouldNotPlaceOnNode as i32,
            request: allocate_request().scheduling_requests.remove(0),
        }],
        enhanced_headroom: Some(EnhancedHeadroomProto {
            total_pending_count: Some(4),
            total_active_cores: Some(12),
        }),
    }
}

/// Encodes with prost, decodes, compares; then decodes the same bytes through the descriptor
/// (prost-reflect) and re-encodes them: the same bytes, so the descriptor and the generated code
/// agree on every field the value sets. Returns the encoding.
fn round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(m: &M, name: &str) -> Vec<u8> {
    let bytes = m.encode_to_vec();
    let back = M::decode(bytes.as_slice()).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(&back, m, "{name}: decode(encode(m)) != m");
    assert_eq!(back.encode_to_vec(), bytes, "{name}: re-encoding differs");
    let pool = DescriptorPool::decode(DESCRIPTOR_SET).unwrap();
    let desc = pool
        .get_message_by_name(&format!("hadoop.yarn.{name}"))
        .unwrap_or_else(|| panic!("{name} not in descriptor.bin"));
    let dynamic = DynamicMessage::decode(desc, bytes.as_slice()).unwrap();
    assert_eq!(
        dynamic.encode_to_vec(),
        bytes,
        "{name}: the descriptor reads a different message"
    );
    bytes
}

#[test]
fn submit_application_request_round_trips() {
    let req = submit_request();
    let bytes = round_trip(&req, "SubmitApplicationRequestProto");
    assert!(bytes.len() > 400, "{} bytes", bytes.len());
    let ctx = req.application_submission_context.as_ref().unwrap();
    round_trip(ctx, "ApplicationSubmissionContextProto");
}

#[test]
fn allocate_request_round_trips() {
    let req = allocate_request();
    round_trip(&req, "AllocateRequestProto");
    // an AM's plain heartbeat: nothing but response_id and progress
    let beat = AllocateRequestProto {
        response_id: Some(5),
        progress: Some(0.5),
        ..Default::default()
    };
    assert_eq!(
        round_trip(&beat, "AllocateRequestProto"),
        [0x20, 0x05, 0x2d, 0x00, 0x00, 0x00, 0x3f],
        "field 4 varint, field 5 fixed32 0.5f"
    );
}

#[test]
fn allocate_response_round_trips() {
    let resp = allocate_response();
    round_trip(&resp, "AllocateResponseProto");
    // the RM's resync order alone
    let resync = AllocateResponseProto {
        a_m_command: Some(AmCommandProto::AmResync as i32),
        response_id: Some(0),
        ..Default::default()
    };
    round_trip(&resync, "AllocateResponseProto");
}

#[test]
fn the_other_messages_round_trip() {
    let report = ApplicationReportProto {
        application_id: Some(app_id()),
        user: Some("alice".into()),
        queue: Some("default".into()),
        name: Some("distributed-shell".into()),
        host: Some("10.0.0.11".into()),
        rpc_port: Some(41000),
        client_to_am_token: None,
        yarn_application_state: Some(YarnApplicationStateProto::Running as i32),
        tracking_url: Some("http://rm:8088/proxy/application_1764850000000_0007/".into()),
        diagnostics: Some(String::new()),
        start_time: Some(TS + 10),
        finish_time: Some(0),
        final_application_status: Some(FinalApplicationStatusProto::AppUndefined as i32),
        app_resource_usage: Some(ApplicationResourceUsageReportProto {
            num_used_containers: Some(3),
            used_resources: Some(resource(2560, 3)),
            memory_seconds: Some(12_345),
            vcore_seconds: Some(12),
            application_resource_usage_map: vec![StringLongMapProto {
                key: "memory-mb".into(),
                value: 12_345,
            }],
            ..Default::default()
        }),
        current_application_attempt_id: Some(attempt_id()),
        progress: Some(0.25),
        application_type: Some("YARN".into()),
        application_tags: vec!["hotpath".into()],
        priority: Some(priority(0)),
        app_timeouts: vec![AppTimeoutsMapProto {
            application_timeout_type: Some(ApplicationTimeoutTypeProto::AppTimeoutLifetime as i32),
            application_timeout: Some(ApplicationTimeoutProto {
                application_timeout_type: ApplicationTimeoutTypeProto::AppTimeoutLifetime as i32,
                expire_time: Some("UNLIMITED".into()),
                remaining_time: Some(-1),
            }),
        }],
        launch_time: Some(TS + 20),
        submit_time: Some(TS + 5),
        ..Default::default()
    };
    round_trip(
        &GetApplicationsResponseProto {
            applications: vec![report.clone()],
        },
        "GetApplicationsResponseProto",
    );
    round_trip(
        &GetQueueInfoResponseProto {
            queue_info: Some(QueueInfoProto {
                queue_name: Some("default".into()),
                capacity: Some(1.0),
                maximum_capacity: Some(1.0),
                current_capacity: Some(0.3),
                state: Some(QueueStateProto::QRunning as i32),
                applications: vec![report],
                queue_statistics: Some(QueueStatisticsProto {
                    num_apps_running: Some(1),
                    ..Default::default()
                }),
                queue_configurations_map: vec![QueueConfigurationsMapProto {
                    partition_name: String::new(),
                    queue_configurations: Some(QueueConfigurationsProto {
                        capacity: Some(1.0),
                        effective_max_capacity: Some(resource(12_288, 12)),
                        ..Default::default()
                    }),
                }],
                queue_path: Some("root.default".into()),
                ..Default::default()
            }),
        },
        "GetQueueInfoResponseProto",
    );
    round_trip(
        &GetClusterMetricsResponseProto {
            cluster_metrics: Some(YarnClusterMetricsProto {
                num_node_managers: Some(3),
                num_active_nms: Some(3),
                ..Default::default()
            }),
        },
        "GetClusterMetricsResponseProto",
    );
    round_trip(
        &RegisterApplicationMasterResponseProto {
            maximum_capability: Some(resource(8192, 8)),
            queue: Some("default".into()),
            scheduler_resource_types: vec![SchedulerResourceTypes::Memory as i32],
            ..Default::default()
        },
        "RegisterApplicationMasterResponseProto",
    );
    round_trip(
        &FinishApplicationMasterRequestProto {
            diagnostics: Some(String::new()),
            tracking_url: None,
            final_application_status: Some(FinalApplicationStatusProto::AppSucceeded as i32),
        },
        "FinishApplicationMasterRequestProto",
    );
}

/// Absent fields read as Hadoop's proto2 defaults (the RM applies them to a bare submission).
#[test]
fn absent_fields_read_as_hadoop_defaults() {
    let ctx = ApplicationSubmissionContextProto::decode(&[][..]).unwrap();
    assert_eq!(ctx.application_name(), "N/A");
    assert_eq!(ctx.queue(), "default");
    assert_eq!(ctx.application_type(), "YARN");
    assert!(ctx.cancel_tokens_when_complete());
    assert!(!ctx.unmanaged_am());
    assert_eq!(ctx.max_app_attempts(), 0);
    assert_eq!(ctx.attempt_failures_validity_interval(), -1);
    let ask = ResourceRequestProto::decode(&[][..]).unwrap();
    assert!(ask.relax_locality());
    assert_eq!(ask.allocation_request_id(), -1);
    let exec = ExecutionTypeRequestProto::decode(&[][..]).unwrap();
    assert_eq!(exec.execution_type(), ExecutionTypeProto::Guaranteed);
    assert!(!exec.enforce_execution_type());
    let report = ApplicationReportProto::decode(&[][..]).unwrap();
    assert_eq!(report.diagnostics(), "N/A");
    let apps = GetApplicationsRequestProto::decode(&[][..]).unwrap();
    assert_eq!(apps.scope(), ApplicationsRequestScopeProto::All);
    assert!(!KillApplicationResponseProto::decode(&[][..])
        .unwrap()
        .is_kill_completed());
    assert!(!FinishApplicationMasterResponseProto::decode(&[][..])
        .unwrap()
        .is_unregistered());
    // Required fields: Java rejects a message without them, prost does not (it fills in zero
    // values), so whoever serves these must check presence itself. The descriptor says which.
    assert!(UpdatedContainerProto::decode(&[][..]).is_ok());
    let pool = DescriptorPool::decode(DESCRIPTOR_SET).unwrap();
    for (message, fields) in [
        ("UpdatedContainerProto", &["update_type", "container"][..]),
        ("RejectedSchedulingRequestProto", &["reason", "request"][..]),
        (
            "UpdateContainerRequestProto",
            &["container_version", "container_id", "update_type"][..],
        ),
    ] {
        let desc = pool
            .get_message_by_name(&format!("hadoop.yarn.{message}"))
            .unwrap();
        let required: Vec<String> = desc
            .fields()
            .filter(|f| f.cardinality() == prost_reflect::Cardinality::Required)
            .map(|f| f.name().to_string())
            .collect();
        assert_eq!(required, fields, "{message}");
    }
}

/// The services in `descriptor.bin` name the methods of `hadoop_wire::yarn`'s constants:
/// ApplicationMasterProtocol's three in order, ApplicationClientProtocol's subset in Hadoop's
/// order.
#[test]
fn services_match_the_method_constants() {
    let pool = DescriptorPool::decode(DESCRIPTOR_SET).unwrap();
    let methods = |service: &str| -> Vec<String> {
        pool.get_service_by_name(service)
            .unwrap_or_else(|| panic!("{service} not in descriptor.bin"))
            .methods()
            .map(|m| m.name().to_string())
            .collect()
    };
    assert_eq!(
        methods("hadoop.yarn.ApplicationMasterProtocolService"),
        amp::ALL
    );
    let ours = methods("hadoop.yarn.ApplicationClientProtocolService");
    let in_order: Vec<&str> = acp::ALL
        .iter()
        .copied()
        .filter(|m| ours.iter().any(|o| o == m))
        .collect();
    assert_eq!(ours, in_order, "a subset of acp::ALL, in Hadoop's order");
    for m in [
        acp::GET_NEW_APPLICATION,
        acp::SUBMIT_APPLICATION,
        acp::GET_APPLICATION_REPORT,
        acp::GET_APPLICATIONS,
        acp::FORCE_KILL_APPLICATION,
        acp::GET_CLUSTER_METRICS,
        acp::GET_CLUSTER_NODES,
        acp::GET_QUEUE_INFO,
    ] {
        assert!(ours.iter().any(|o| o == m), "{m} missing from the service");
    }
}
