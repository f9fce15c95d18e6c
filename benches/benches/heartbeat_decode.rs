//! View-based vs prost-based decoding of a NodeHeartbeatRequest with 50 container statuses.
//!
//! `cargo bench -p benches --bench heartbeat_decode` (add `-- --quick --noplot` for a fast run).
//! Each iteration is one heartbeat; criterion reports time per heartbeat.
//!
//! - `view`: validate() + what the RM's shard reads of each of the 50 statuses
//!   (`ContainerStatusView::summary`, then the container id into a `ContainerKey`): app id,
//!   cluster timestamp, attempt, id, state, exit status and execution type; capability skipped.
//! - `view_unvalidated`: the same reads without validate().
//! - `view_validate_only`: validate() alone.
//! - `prost`: NodeHeartbeatRequestProto::decode + the same reads.

use benches::heartbeat::{
    extract_prost, extract_view, extract_view_unvalidated, sample_request, Extracted,
};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hadoop_wire::view::yarn::NodeHeartbeatRequestView;
use prost::Message;
use std::hint::black_box;

fn heartbeat_decode(c: &mut Criterion) {
    let bytes = sample_request(50).encode_to_vec();
    let mut out: Vec<Extracted> = Vec::with_capacity(64);
    let mut g = c.benchmark_group("heartbeat_decode_50");
    g.throughput(Throughput::Elements(1));
    g.bench_function("view", |b| {
        b.iter(|| {
            extract_view(black_box(&bytes), &mut out).unwrap();
            black_box(&out);
        })
    });
    g.bench_function("view_unvalidated", |b| {
        b.iter(|| {
            extract_view_unvalidated(NodeHeartbeatRequestView::new(black_box(&bytes)), &mut out)
                .unwrap();
            black_box(&out);
        })
    });
    g.bench_function("view_validate_only", |b| {
        b.iter(|| {
            NodeHeartbeatRequestView::new(black_box(&bytes))
                .validate()
                .unwrap()
        })
    });
    g.bench_function("prost", |b| {
        b.iter(|| {
            extract_prost(black_box(&bytes), &mut out).unwrap();
            black_box(&out);
        })
    });
    g.finish();
}

criterion_group!(benches, heartbeat_decode);
criterion_main!(benches);
