//! The queues as ApplicationClientProtocol presents them: `getQueueInfo` (and so `getAllQueues`,
//! `mapred queue -list`, `yarn queue -status`), `getQueueUserAcls`, and `getResourceTypeInfo`.
//!
//! The RM schedules one queue, `default`, under `root`; both are presented as Java's Capacity
//! scheduler (Java's default scheduler, with its default `capacity-scheduler.xml`) presents
//! them (`CSQueueInfoProvider`): capacities as fractions (root and default 1.0 of the cluster),
//! `schedulerType` "CapacityScheduler", queue paths `root` and `root.default`, accessible node
//! labels `*`, preemption disabled (no scheduler monitor), weight -1 (capacities, not weights),
//! `maxParallelApps` `Integer.MAX_VALUE`, and the default partition's configuration (maximum AM
//! share 0.1). A queue the scheduler does not have is answered as Java answers it: a response
//! without queue info (Java's `getQueueInfo` catches the scheduler's "Unknown queue" and logs
//! it), which `YarnClient` returns as null.

use hadoop_wire::pb::hadoop::yarn::{
    ApplicationReportProto, QueueAclProto, QueueConfigurationsMapProto, QueueConfigurationsProto,
    QueueInfoProto, QueueStateProto, QueueStatisticsProto, QueueUserAclInfoProto,
    ResourceTypeInfoProto, ResourceTypesProto,
};

use crate::app_acls::{AclPolicy, Caller};
use crate::apps::{AppState, Apps, Res, RmApp};

/// The root queue's name and path.
pub const ROOT: &str = "root";

/// `CapacitySchedulerConfiguration`'s default maximum AM resource share of a leaf queue.
const MAX_AM_PERCENT: f32 = 0.1;

/// The queue `name` names (a short name or a full path, as Java's `CapacityScheduler.getQueue`
/// takes either): `Some(None)` for root, `Some(Some(leaf))` for a leaf, `None` if unknown.
pub fn resolve<'a>(apps: &'a Apps, name: &str) -> Option<Option<&'a str>> {
    if name == ROOT {
        return Some(None);
    }
    let short = name.strip_prefix("root.").unwrap_or(name);
    apps.config()
        .queues
        .iter()
        .find(|q| q.as_str() == short)
        .map(|q| Some(q.as_str()))
}

/// Whether `app` is in `queue` (`None`: root, which holds every leaf's applications) as the
/// scheduler tracks it (not finished).
fn in_queue(app: &RmApp, queue: Option<&str>) -> bool {
    !app.state.is_final() && queue.is_none_or(|q| app.queue == q)
}

/// The applications of `queue` the scheduler tracks (`scheduler.getAppsInQueue`).
pub fn apps_in<'a>(apps: &'a Apps, queue: Option<&'a str>) -> impl Iterator<Item = &'a RmApp> {
    apps.apps().filter(move |a| in_queue(a, queue))
}

fn statistics(apps: &Apps, queue: Option<&str>, total: Res, used: Res) -> QueueStatisticsProto {
    let mut s = QueueStatisticsProto::default();
    let (mut running, mut pending, mut completed, mut killed, mut failed, mut submitted) =
        (0i64, 0i64, 0i64, 0i64, 0i64, 0i64);
    let mut users: Vec<&str> = Vec::new();
    for a in apps.apps().filter(|a| queue.is_none_or(|q| a.queue == q)) {
        submitted += 1;
        match a.state {
            AppState::Running | AppState::Finishing => running += 1,
            AppState::Submitted | AppState::Accepted => pending += 1,
            AppState::Finished => completed += 1,
            AppState::Killed => killed += 1,
            AppState::Failed => failed += 1,
        }
        if !a.state.is_final() && !users.contains(&a.user.as_str()) {
            users.push(&a.user);
        }
    }
    s.num_apps_submitted = Some(submitted);
    s.num_apps_running = Some(running);
    s.num_apps_pending = Some(pending);
    s.num_apps_completed = Some(completed);
    s.num_apps_killed = Some(killed);
    s.num_apps_failed = Some(failed);
    s.num_active_users = Some(users.len() as i64);
    s.available_memory_mb = Some((total.mem - used.mem).max(0));
    s.allocated_memory_mb = Some(used.mem);
    s.pending_memory_mb = Some(0);
    s.reserved_memory_mb = Some(0);
    s.available_v_cores = Some((total.vcores - used.vcores).max(0));
    s.allocated_v_cores = Some(used.vcores);
    s.pending_v_cores = Some(0);
    s.reserved_v_cores = Some(0);
    s
}

/// One queue's info (`queue`: `None` for root); with `children`, root's leaves (whose own
/// children, none, `recursive` would add). `reports` makes the application reports when asked.
pub fn queue_info(
    apps: &Apps,
    queue: Option<&str>,
    children: bool,
    recursive: bool,
    reports: &mut dyn FnMut(&RmApp) -> Option<ApplicationReportProto>,
) -> QueueInfoProto {
    let (total, used) = apps.cluster_resources();
    let current = if total.mem > 0 {
        used.mem as f32 / total.mem as f32
    } else {
        0.0
    };
    let (name, path) = match queue {
        None => (ROOT.to_string(), ROOT.to_string()),
        Some(q) => (q.to_string(), format!("root.{q}")),
    };
    // The default partition's configuration: every queue here has the whole cluster.
    let conf = QueueConfigurationsProto {
        capacity: Some(1.0),
        absolute_capacity: Some(1.0),
        max_capacity: Some(1.0),
        absolute_max_capacity: Some(1.0),
        max_am_percentage: Some(if queue.is_some() { MAX_AM_PERCENT } else { 0.0 }),
        effective_min_capacity: Some(total.to_proto()),
        effective_max_capacity: Some(total.to_proto()),
        configured_min_capacity: Some(Res::new(0, 0).to_proto()),
        configured_max_capacity: Some(Res::new(0, 0).to_proto()),
    };
    let child_queues = if children && queue.is_none() {
        apps.config()
            .queues
            .iter()
            .map(|q| queue_info(apps, Some(q), recursive, recursive, reports))
            .collect()
    } else {
        Vec::new()
    };
    let applications = apps_in(apps, queue).filter_map(&mut *reports).collect();
    QueueInfoProto {
        queue_name: Some(name),
        capacity: Some(1.0),
        maximum_capacity: Some(1.0),
        current_capacity: Some(current),
        state: Some(QueueStateProto::QRunning as i32),
        child_queues,
        applications,
        accessible_node_labels: vec!["*".into()],
        default_node_label_expression: None,
        queue_statistics: Some(statistics(apps, queue, total, used)),
        preemption_disabled: Some(true),
        queue_configurations_map: vec![QueueConfigurationsMapProto {
            partition_name: String::new(),
            queue_configurations: Some(conf),
        }],
        intra_queue_preemption_disabled: Some(true),
        weight: Some(-1.0),
        queue_path: Some(path),
        max_parallel_apps: Some(i32::MAX),
        scheduler_type: Some("CapacityScheduler".into()),
        ..Default::default()
    }
}

/// `getQueueUserAcls`: root, then each leaf, with the operations the caller may do on it
/// (`CapacityScheduler.getQueueUserAclInfo`). Without ACLs (`policy` None) every caller may do
/// both.
pub fn user_acls(
    apps: &Apps,
    policy: Option<&AclPolicy>,
    who: &Caller<'_>,
) -> Vec<QueueUserAclInfoProto> {
    std::iter::once(ROOT)
        .chain(apps.config().queues.iter().map(String::as_str))
        .map(|q| {
            let mut acls = Vec::with_capacity(2);
            let (submit, admin) = match policy {
                None => (true, true),
                Some(p) => (p.may_submit(who, q), p.is_queue_admin(who, q)),
            };
            if submit {
                acls.push(QueueAclProto::QaclSubmitApplications as i32);
            }
            if admin {
                acls.push(QueueAclProto::QaclAdministerQueue as i32);
            }
            QueueUserAclInfoProto {
                queue_name: Some(q.to_string()),
                user_acls: acls,
            }
        })
        .collect()
}

/// `getResourceTypeInfo`: the resource types the RM knows (`ResourceUtils.getResourcesTypeInfo`):
/// `memory-mb` (units `Mi`) and `vcores` (no units), both countable. This RM schedules no other
/// resource type, so it reports none (a `resource-types.xml` is not read).
pub fn resource_types() -> Vec<ResourceTypeInfoProto> {
    [("memory-mb", "Mi"), ("vcores", "")]
        .into_iter()
        .map(|(name, units)| ResourceTypeInfoProto {
            name: name.into(),
            units: Some(units.into()),
            r#type: Some(ResourceTypesProto::Countable as i32),
        })
        .collect()
}
