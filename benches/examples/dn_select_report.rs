//! Prints the `dn-select` measurement as one JSON line (no allocation counter here; see the
//! bench for `allocs`): `cargo run --release -p benches --example dn_select_report`.

fn main() {
    let r = benches::dn_select::measure(1000, 15, None);
    println!("{}", r.to_json());
}
