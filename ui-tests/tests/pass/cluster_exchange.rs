//! A cluster that splits each row: `program_id(0) / cluster_num_ctas()` is the
//! same for the whole cluster, so a barrier under it is accepted.
use tlx::prelude::*;

#[tlx::kernel(configs = [(K = 2, ctas_per_cga = K)])]
fn row_sums<const K: usize>(x: Ptr<f32>, partial: Ptr<f32>, out: Ptr<f32>, rows: i32) {
    let row = program_id(0) / cluster_num_ctas();
    let x = multiple_of(x, 16);
    let v = load(x + row * 128 + cluster_cta_rank() * 64 + arange(0, 64));
    store(partial + program_id(0), sum(v, axis = 0));
    if row < rows {
        cluster_barrier();
    }
    store(
        out + row,
        sum(load(partial + row * K + arange(0, K)), axis = 0),
    );
}

pub fn main() {}
